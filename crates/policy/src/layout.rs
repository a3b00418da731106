//! Layouts: templates such as `bull:{tenant}:{env}:{queue}` that say how a queue's key base
//! is named, and the parse of a key base into queue, tenant and environment.

use std::fmt;

/// The parts a layout can capture from a key base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Queue,
    Tenant,
    Env,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Slot(Slot),
}

/// A compiled layout template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    text: String,
    pieces: Vec<Piece>,
}

/// What a layout captured from a key base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutMatch {
    /// The BullMQ prefix: everything before the queue name, without the trailing `:`.
    pub prefix: String,
    /// The queue name.
    pub queue: String,
    /// The tenant, when the layout has `{tenant}`.
    pub tenant: Option<String>,
    /// The environment as written in the key, when the layout has `{env}`.
    pub env: Option<String>,
}

impl Layout {
    /// Compiles a template. `{queue}` must appear exactly once and be the last segment,
    /// since BullMQ builds keys as `<prefix>:<queue>:<suffix>`.
    pub fn new(text: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(open) = rest.find('{') {
                if rest[open..].starts_with("{{") {
                    // `{{tag}}` is a literal Redis Cluster hash tag `{tag}`.
                    let close = rest[open..]
                        .find("}}")
                        .ok_or_else(|| format!("layout `{text}` has an unclosed `{{{{`"))?
                        + open;
                    let literal = format!("{}{{{}}}", &rest[..open], &rest[open + 2..close]);
                    push_literal(&mut pieces, literal);
                    rest = &rest[close + 2..];
                    continue;
                }
                if open > 0 {
                    push_literal(&mut pieces, rest[..open].to_string());
                }
                let close = rest[open..]
                    .find('}')
                    .ok_or_else(|| format!("layout `{text}` has an unclosed `{{`"))?
                    + open;
                let slot = match &rest[open + 1..close] {
                    "queue" => Slot::Queue,
                    "tenant" => Slot::Tenant,
                    "env" => Slot::Env,
                    other => {
                        return Err(format!(
                            "layout `{text}` has unknown placeholder `{{{other}}}`; expected {{queue}}, {{tenant}} or {{env}}"
                        ));
                    }
                };
                if pieces.contains(&Piece::Slot(slot)) {
                    return Err(format!("layout `{text}` repeats a placeholder"));
                }
                if matches!(pieces.last(), Some(Piece::Slot(_))) {
                    return Err(format!(
                        "layout `{text}` has two placeholders with nothing between them"
                    ));
                }
                pieces.push(Piece::Slot(slot));
                rest = &rest[close + 1..];
            } else {
                push_literal(&mut pieces, rest.to_string());
                rest = "";
            }
        }
        match pieces.last() {
            Some(Piece::Slot(Slot::Queue)) => {}
            _ => {
                return Err(format!(
                    "layout `{text}` must end with `{{queue}}` (BullMQ keys are `<prefix>:<queue>:…`)"
                ));
            }
        }
        if pieces.len() < 2
            || !matches!(&pieces[pieces.len() - 2], Piece::Literal(l) if l.ends_with(':'))
        {
            return Err(format!(
                "layout `{text}` needs a prefix ending in `:` before `{{queue}}`, e.g. `bull:{{queue}}`"
            ));
        }
        Ok(Layout {
            text: text.to_string(),
            pieces,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Matches a key base such as `bull:acme:prod:billing`. Placeholders never span a `:`.
    pub fn parse(&self, base: &str) -> Option<LayoutMatch> {
        let mut captured = LayoutMatch {
            prefix: String::new(),
            queue: String::new(),
            tenant: None,
            env: None,
        };
        let mut rest = base;
        let mut iter = self.pieces.iter().peekable();
        while let Some(piece) = iter.next() {
            match piece {
                Piece::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Piece::Slot(slot) => {
                    // A slot runs to the next literal's start, or to the end; never across `:`.
                    let end = match iter.peek() {
                        Some(Piece::Literal(next)) => {
                            let stop = rest.find(':').unwrap_or(rest.len());
                            rest[..stop]
                                .find(next.as_str())
                                .or_else(|| next.starts_with(':').then_some(stop))?
                        }
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.contains(':') {
                        return None;
                    }
                    match slot {
                        Slot::Queue => captured.queue = value.to_string(),
                        Slot::Tenant => captured.tenant = Some(value.to_string()),
                        Slot::Env => captured.env = Some(value.to_string()),
                    }
                    rest = &rest[end..];
                }
            }
        }
        if !rest.is_empty() {
            return None;
        }
        captured.prefix = base[..base.len() - captured.queue.len() - 1].to_string();
        Some(captured)
    }
}

/// Appends literal text, joining it to a literal already at the end.
fn push_literal(pieces: &mut Vec<Piece>, text: String) {
    if let Some(Piece::Literal(last)) = pieces.last_mut() {
        last.push_str(&text);
    } else {
        pieces.push(Piece::Literal(text));
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_layout() {
        let l = Layout::new("bull:{queue}").expect("valid");
        let m = l.parse("bull:emails").expect("match");
        assert_eq!(m.queue, "emails");
        assert_eq!(m.prefix, "bull");
        assert_eq!(m.tenant, None);
        assert!(l.parse("bull:acme:emails").is_none());
        assert!(l.parse("other:emails").is_none());
    }

    #[test]
    fn tenant_and_env() {
        let l = Layout::new("bull:{tenant}:{env}:{queue}").expect("valid");
        let m = l.parse("bull:acme:prod:billing-export").expect("match");
        assert_eq!(m.queue, "billing-export");
        assert_eq!(m.tenant.as_deref(), Some("acme"));
        assert_eq!(m.env.as_deref(), Some("prod"));
        assert_eq!(m.prefix, "bull:acme:prod");
        assert!(l.parse("bull:acme:billing").is_none());
    }

    #[test]
    fn prefix_with_colons_and_hash_tags() {
        assert!(
            Layout::new("{bull}:app:{queue}").is_err(),
            "a hash tag is not a placeholder"
        );
        let l = Layout::new("{{bull}}:{tenant}:{queue}").expect("valid");
        let m = l.parse("{bull}:acme:mail").expect("match");
        assert_eq!(m.prefix, "{bull}:acme");
        assert_eq!(m.queue, "mail");
        let l = Layout::new("svc:jobs:t-{tenant}:{queue}").expect("valid");
        let m = l.parse("svc:jobs:t-acme:mail").expect("match");
        assert_eq!(m.tenant.as_deref(), Some("acme"));
        assert_eq!(m.prefix, "svc:jobs:t-acme");
    }

    #[test]
    fn rejects_bad_templates() {
        for t in [
            "bull",
            "{queue}",
            "bull:{queue}:x",
            "bull:{tenant}{queue}",
            "bull:{who}:{queue}",
            "bull:{queue",
        ] {
            assert!(Layout::new(t).is_err(), "{t}");
        }
    }
}
