//! Tables that fit the terminal without breaking a word: each column gets at least its
//! longest word, the width left is shared by what the columns would need in full, and cells
//! wrap only between words (or after a `:`, `/` or `-` inside a key base or a name). Only when
//! even the longest words cannot fit are the widest of them cut.

use comfy_table::{ContentArrangement, Table, presets::UTF8_BORDERS_ONLY};
use std::fmt;
use std::io::IsTerminal;

/// A table's header and rows, laid out when printed.
pub struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// The width to fit: `COLUMNS` when set, else the terminal's when output is one.
    width: Option<usize>,
}

/// A table with this header, to fit the terminal (or `COLUMNS`).
pub fn table(header: &[&str]) -> Grid {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
    Grid {
        header: header.iter().map(|h| h.to_string()).collect(),
        rows: Vec::new(),
        width: columns.or_else(terminal_width),
    }
}

/// The terminal's width, when standard output is one.
fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    terminal_size::terminal_size().map(|(w, _)| usize::from(w.0))
}

impl Grid {
    /// Adds a row (missing cells are empty).
    pub fn add_row<T: ToString>(&mut self, row: Vec<T>) -> &mut Self {
        self.rows
            .push(row.iter().map(ToString::to_string).collect());
        self
    }

    /// Each column's width: in full when that fits, else at least its longest word.
    fn widths(&self) -> Vec<usize> {
        let n = self.header.len();
        let cells = || std::iter::once(&self.header).chain(&self.rows);
        let column = |i: usize, measure: fn(&str) -> usize| {
            cells()
                .filter_map(|r| r.get(i))
                .map(|c| measure(c))
                .max()
                .unwrap_or(0)
        };
        let full: Vec<usize> = (0..n).map(|i| column(i, full_width)).collect();
        let least: Vec<usize> = (0..n).map(|i| column(i, longest_word)).collect();
        // Borders and padding: one each side of the table, three between or around columns.
        let room = self
            .width
            .map(|w| w.saturating_sub(3 * n + 1))
            .unwrap_or(usize::MAX);
        let needed: usize = full.iter().sum();
        if needed <= room {
            return full;
        }
        let floor: usize = least.iter().sum();
        if floor >= room {
            // Too narrow for the longest words: the widest columns give way, one at a time.
            let mut widths = least;
            while widths.iter().sum::<usize>() > room {
                let Some(widest) = widths.iter_mut().max_by_key(|w| **w).filter(|w| **w > 1) else {
                    break;
                };
                *widest -= 1;
            }
            return widths;
        }
        // Share what is left beyond the longest words by what each column lacks.
        let spare = room - floor;
        let lacking: Vec<usize> = full.iter().zip(&least).map(|(f, l)| f - l).collect();
        let total: usize = lacking.iter().sum();
        let mut widths: Vec<usize> = least
            .iter()
            .zip(&lacking)
            .map(|(l, k)| l + k * spare / total)
            .collect();
        let mut left = room - widths.iter().sum::<usize>();
        for i in 0..n {
            if left == 0 {
                break;
            }
            if widths[i] < full[i] {
                widths[i] += 1;
                left -= 1;
            }
        }
        widths
    }
}

impl fmt::Display for Grid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let widths = self.widths();
        let wrapped = |row: &Vec<String>| -> Vec<String> {
            widths
                .iter()
                .enumerate()
                .map(|(i, w)| wrap(row.get(i).map_or("", String::as_str), *w))
                .collect()
        };
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(wrapped(&self.header));
        for row in &self.rows {
            t.add_row(wrapped(row));
        }
        write!(f, "{t}")
    }
}

/// The widest line of a cell.
fn full_width(cell: &str) -> usize {
    cell.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// The longest piece of a cell that is never broken.
fn longest_word(cell: &str) -> usize {
    cell.lines()
        .flat_map(pieces)
        .map(|p| p.trim_end().chars().count())
        .max()
        .unwrap_or(0)
}

/// A line's pieces: each ends after a space, or after a `:`, `/` or `-` inside a word.
fn pieces(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in line.char_indices() {
        if matches!(c, ' ' | ':' | '/' | '-') {
            let end = i + c.len_utf8();
            out.push(&line[start..end]);
            start = end;
        }
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

/// A cell wrapped to `width` between its pieces; a piece longer than `width` is cut.
fn wrap(cell: &str, width: usize) -> String {
    let width = width.max(1);
    let mut lines = Vec::new();
    for line in cell.lines() {
        let mut current = String::new();
        for piece in pieces(line) {
            let fits = current.chars().count() + piece.trim_end().chars().count() <= width;
            if !current.is_empty() && !fits {
                lines.push(current.trim_end().to_string());
                current.clear();
            }
            let mut piece = piece;
            while piece.trim_end().chars().count() > width {
                let cut = piece
                    .char_indices()
                    .nth(width)
                    .map_or(piece.len(), |(i, _)| i);
                lines.push(piece[..cut].to_string());
                piece = &piece[cut..];
            }
            current.push_str(piece);
        }
        lines.push(current.trim_end().to_string());
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_wrap_between_words_and_after_separators_only() {
        assert_eq!(
            wrap("bull:acme:prod:billing", 10),
            "bull:acme:\nprod:\nbilling"
        );
        assert_eq!(
            wrap("maxAge 30d, action remove", 12),
            "maxAge 30d,\naction\nremove"
        );
        assert_eq!(wrap("unbreakable", 4), "unbr\neaka\nble");
        assert_eq!(longest_word("a-policy-with-a-long-name"), 7);
    }

    #[test]
    fn columns_share_the_width_and_never_go_below_their_longest_word() {
        let mut g = table(&["queue", "jobs"]);
        g.width = Some(30);
        g.add_row(vec!["bull:a-rather-long-tenant-name:billing", "12,345"]);
        let widths = g.widths();
        assert!(widths[0] >= "tenant-".len() && widths[1] == 6, "{widths:?}");
        assert!(widths.iter().sum::<usize>() + 7 <= 30, "{widths:?}");
        g.width = Some(16);
        assert_eq!(g.widths(), [5, 4], "too narrow: the widest give way");
    }
}
