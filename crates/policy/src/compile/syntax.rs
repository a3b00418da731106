//! Syntax errors from the YAML parser, made into located problems, and "did you mean".

use super::{ConfigError, pos};

/// Turns a parse error into a located [`ConfigError`], with "did you mean" for unknown fields.
pub(crate) fn syntax_error(e: &serde_saphyr::Error) -> ConfigError {
    let rendered = e.without_snippet().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    let message = strip_location_suffix(strip_location_prefix(first)).to_string();
    let hint = unknown_field_hint(&message);
    ConfigError {
        pos: e.location().map(|l| pos(&l)).unwrap_or_default(),
        path: String::new(),
        message,
        hint,
    }
}

fn strip_location_prefix(line: &str) -> &str {
    let line = line.strip_prefix("error: ").unwrap_or(line);
    if line.starts_with("line ")
        && let Some(idx) = line.find(": ")
    {
        return &line[idx + 2..];
    }
    line
}

/// Drops a trailing ` at line N, column M`: the position is printed in front already.
fn strip_location_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(idx) if message[idx..].contains(", column ") => &message[..idx],
        _ => message,
    }
}

/// `unknown field `maxAg`, expected one of name, maxAge` → `did you mean `maxAge`?`
fn unknown_field_hint(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let end = rest.find('`')?;
    let field = &rest[..end];
    let expected = rest[end..]
        .split_once("expected one of ")
        .map(|(_, list)| list)
        .or_else(|| rest[end..].split_once("expected ").map(|(_, list)| list))?;
    let names: Vec<&str> = expected
        .split(',')
        .map(|s| s.trim().trim_matches('`'))
        .filter(|s| !s.is_empty())
        .collect();
    suggest(field, &names).map(|s| format!("did you mean `{s}`?"))
}

/// The closest candidate within a small edit distance, if any.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.len() / 3).max(2);
    candidates
        .iter()
        .map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
