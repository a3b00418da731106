//! Equality tests on a backend: `x == Backend::Bull`, `Backend::Bullmq != y`, and
//! `matches!(…, Backend::…)`. They are found in the token stream, so the ones inside macros
//! (maud's `html!` templates) are found too; comments are not tokens.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use std::str::FromStr;

/// The lines of `source` that test a backend for equality. A file that does not tokenize has
/// none (the compiler says what is wrong with it).
pub fn backend_comparisons(source: &str) -> Vec<usize> {
    let Ok(stream) = TokenStream::from_str(source) else {
        return Vec::new();
    };
    let mut flat = Vec::new();
    flatten(stream, &mut flat);
    let mut lines: Vec<usize> = (0..flat.len())
        .filter_map(|i| comparison_at(&flat, i))
        .collect();
    lines.dedup();
    lines
}

/// One token as the search reads it: an identifier's text, a punctuation character, or the
/// start of a group (`(` for a parenthesized one), with its line.
struct Flat {
    text: String,
    line: usize,
}

fn flatten(stream: TokenStream, out: &mut Vec<Flat>) {
    for tree in stream {
        let line = tree.span().start().line;
        match tree {
            TokenTree::Group(g) => {
                let open = match g.delimiter() {
                    Delimiter::Parenthesis => "(",
                    Delimiter::Brace => "{",
                    Delimiter::Bracket => "[",
                    Delimiter::None => "",
                };
                out.push(Flat {
                    text: open.to_string(),
                    line,
                });
                flatten(g.stream(), out);
                out.push(Flat {
                    text: "<end>".to_string(),
                    line,
                });
            }
            TokenTree::Ident(i) => out.push(Flat {
                text: i.to_string(),
                line,
            }),
            TokenTree::Punct(p) => out.push(Flat {
                text: p.as_char().to_string(),
                line,
            }),
            TokenTree::Literal(_) => out.push(Flat {
                text: "<literal>".to_string(),
                line,
            }),
        }
    }
}

/// The line of a comparison that starts at token `i`, if one does.
fn comparison_at(flat: &[Flat], i: usize) -> Option<usize> {
    let text = |k: usize| flat.get(k).map(|t| t.text.as_str());
    let is_backend_path = |k: usize| text(k) == Some("Backend") && text(k + 1) == Some(":");
    // `==` or `!=`: two punctuation tokens.
    let equality = matches!(text(i), Some("=" | "!")) && text(i + 1) == Some("=");
    // Not `<=`, `>=`, `===`: the token before is not punctuation of a longer operator.
    let longer = i > 0 && matches!(text(i - 1), Some("=" | "<" | ">" | "!"));
    if equality && !longer {
        let after = is_backend_path(i + 2);
        let before = i >= 4 && is_backend_path(i - 4) && text(i - 2) == Some(":");
        if after || before {
            return Some(flat[i].line);
        }
    }
    if text(i) == Some("matches") && text(i + 1) == Some("!") && text(i + 2) == Some("(") {
        let mut depth = 0usize;
        for k in i + 2..flat.len() {
            match text(k) {
                Some("(" | "{" | "[" | "") => depth += 1,
                Some("<end>") => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ if is_backend_path(k) => return Some(flat[i].line),
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::backend_comparisons;

    #[test]
    fn finds_each_form_and_nothing_else() {
        let source = r#"
fn f(b: Backend, q: Q) {
    if b == Backend::Bull {}
    if Backend::Bullmq != q.backend {}
    let x = matches!(b, Backend::Bull);
    html! { @if q.backend == Backend::Bull { "legacy" } }
    // if b == Backend::Bull {} (a comment)
    match b { Backend::Bull => {}, Backend::Bullmq => {} }
    let y = b.events() == EventFeed::Stream;
    let z = n <= Backend::ALL.len();
}
"#;
        assert_eq!(backend_comparisons(source), vec![3, 4, 5, 6]);
    }
}
