//! The YAML parser with its limits raised for large policy files, and its syntax errors made
//! into located problems (an unknown field with a "did you mean").

use super::suggest::suggest;
use super::{ConfigError, pos};
use serde_saphyr::budget::BudgetBreach;

/// The most YAML nodes (mappings, sequences and scalars) a policy file may hold: room for
/// about 400,000 one-line policies. The parser's default (250,000) refused files of 25,000
/// policies; the limit stays, so that a runaway file fails fast instead of eating memory.
pub(crate) const MAX_NODES: usize = 4_000_000;

/// Parses `text` as YAML (or JSON) into `T`, within the policy file's limits.
pub(crate) fn parse<'de, T: serde::Deserialize<'de>>(
    text: &'de str,
) -> Result<T, serde_saphyr::Error> {
    parse_within(text, MAX_NODES)
}

/// [`parse`] with at most `max_nodes` YAML nodes.
fn parse_within<'de, T: serde::Deserialize<'de>>(
    text: &'de str,
    max_nodes: usize,
) -> Result<T, serde_saphyr::Error> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = max_nodes;
    budget.max_events = 2 * max_nodes + 16;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    serde_saphyr::from_str_with_options(text, options)
}

/// Turns a parse error into a located [`ConfigError`], with "did you mean" for unknown fields
/// and what to do about a file past the parser's limits.
pub(crate) fn syntax_error(e: &serde_saphyr::Error) -> ConfigError {
    let rendered = e.without_snippet().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    let mut message = strip_location_suffix(strip_location_prefix(first)).to_string();
    let mut hint = unknown_field_hint(&message);
    if let Some((why, fix)) = budget_breach(e) {
        message = why;
        hint = Some(fix.to_string());
    }
    ConfigError {
        pos: e.location().map(|l| pos(&l)).unwrap_or_default(),
        path: String::new(),
        message,
        hint,
    }
}

/// What a breached parser limit means for a policy file, and what to do.
fn budget_breach(e: &serde_saphyr::Error) -> Option<(String, &'static str)> {
    let serde_saphyr::Error::Budget { breach, .. } = e.without_snippet() else {
        return None;
    };
    Some(match breach {
        BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. } => (
            format!(
                "the policy file is too large: it holds more than {} million YAML values (about {} thousand one-line policies), the most bullsweep reads",
                MAX_NODES / 1_000_000,
                MAX_NODES / 10_000
            ),
            "cover many queues with one policy (a glob in queueNamePattern such as `billing-*`, or `tenants:` overrides) instead of one policy per queue",
        ),
        other => (
            format!("the policy file exceeds a limit of the YAML parser: {other:?}"),
            "a policy file needs no deep nesting, YAML aliases or many documents; simplify it",
        ),
    })
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

#[cfg(test)]
mod tests {
    use super::{parse, parse_within, syntax_error};
    use crate::compile::schema::UnknownKeys;
    use serde_saphyr::Spanned;

    /// `n` one-line policies (eleven YAML values each).
    fn policies(n: usize) -> String {
        let mut text = String::from("version: 1\npolicies:\n");
        for i in 0..n {
            text.push_str(&format!(
                "  - {{ name: p{i}, queueNamePattern: q{i}, rules: {{ completed: {{ maxAge: 1d }} }} }}\n"
            ));
        }
        text
    }

    #[test]
    fn a_file_past_the_parsers_default_budget_is_read() {
        // 25,000 policies hold 275,000 values: the parser's default refused them.
        let text = policies(25_000);
        assert!(parse::<Spanned<UnknownKeys>>(&text).is_ok());
    }

    #[test]
    fn a_file_past_the_limit_is_told_how_to_shrink() {
        let text = policies(10);
        let Err(e) = parse_within::<Spanned<UnknownKeys>>(&text, 50) else {
            panic!("past the limit");
        };
        let problem = syntax_error(&e);
        assert!(
            problem.message.starts_with("the policy file is too large"),
            "{}",
            problem.message
        );
        assert!(!problem.message.contains("Nodes {"), "{}", problem.message);
        assert!(problem.pos.line > 1, "located: {:?}", problem.pos);
        assert!(
            problem
                .hint
                .as_deref()
                .is_some_and(|h| h.contains("queueNamePattern")),
            "{:?}",
            problem.hint
        );
    }
}
