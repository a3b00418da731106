//! JSON paths as policy files and the CLI write them: `user.email`, `items[0].card`,
//! `items[*].card` (every element) and `**.phone` (a key at any depth).

use crate::json_walk::Seg;
use serde_json::Value;

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
    AnyIndex,
    AnyDepth,
}

/// A compiled path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

impl std::fmt::Display for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl JsonPath {
    /// Parses a path; the error text is fit for a user.
    pub fn new(text: &str) -> Result<Self, String> {
        let mut steps = Vec::new();
        for part in text.split('.') {
            if part.is_empty() {
                return Err(format!("path `{text}` has an empty step"));
            }
            if part == "**" {
                steps.push(Step::AnyDepth);
                continue;
            }
            let (key, mut rest) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if key.contains(']') {
                return Err(format!("path `{text}` has a stray `]`"));
            }
            if !key.is_empty() {
                steps.push(Step::Key(key.to_string()));
            }
            while !rest.is_empty() {
                let close = rest
                    .find(']')
                    .filter(|_| rest.starts_with('['))
                    .ok_or_else(|| format!("path `{text}` has a malformed index"))?;
                let inner = &rest[1..close];
                steps.push(match inner {
                    "*" => Step::AnyIndex,
                    n => Step::Index(n.parse().map_err(|_| {
                        format!("path `{text}`: `[{n}]` is not an index; use a number or `*`")
                    })?),
                });
                rest = &rest[close + 1..];
            }
        }
        if steps.is_empty() {
            return Err("path is empty".into());
        }
        Ok(JsonPath {
            text: text.to_string(),
            steps,
        })
    }

    /// Every value the path reaches in `root`.
    pub fn find<'v>(&self, root: &'v Value) -> Vec<&'v Value> {
        let mut out = Vec::new();
        walk(root, &self.steps, &mut out);
        out
    }

    /// Where the path stands before a document's first step: the step positions reachable
    /// (a `**` may match no level), for [`Self::advance`] while a document is walked.
    pub(crate) fn start(&self) -> Vec<usize> {
        let mut at = vec![0];
        self.close(&mut at);
        at
    }

    /// The positions reachable from `from` after one step into a member, `seg`.
    pub(crate) fn advance(&self, from: &[usize], seg: Seg<'_>) -> Vec<usize> {
        let mut next = Vec::new();
        for &i in from {
            let to = match (self.steps.get(i), seg) {
                (Some(Step::Key(k)), Seg::Key(s)) if k == s => i + 1,
                (Some(Step::Index(n)), Seg::Index(m)) if *n == m => i + 1,
                (Some(Step::AnyIndex), Seg::Index(_)) => i + 1,
                // One level down, keeping `**` for deeper ones.
                (Some(Step::AnyDepth), _) => i,
                _ => continue,
            };
            if !next.contains(&to) {
                next.push(to);
            }
        }
        self.close(&mut next);
        next
    }

    /// One level of a walk followed by several paths at once: for each `(index, positions)` of
    /// `level` (the index names the path through `path_of`), its positions after stepping into
    /// `seg`, keeping only the paths still alive there.
    pub(crate) fn advance_level<'p>(
        level: &[(usize, Vec<usize>)],
        seg: Seg<'_>,
        path_of: impl Fn(usize) -> &'p JsonPath,
    ) -> Vec<(usize, Vec<usize>)> {
        level
            .iter()
            .filter_map(|(i, at)| {
                let to = path_of(*i).advance(at, seg);
                (!to.is_empty()).then_some((*i, to))
            })
            .collect()
    }

    /// Whether the value at positions `at` is one the path reaches.
    pub(crate) fn reached(&self, at: &[usize]) -> bool {
        at.contains(&self.steps.len())
    }

    /// Adds what a `**` matching no level reaches.
    fn close(&self, at: &mut Vec<usize>) {
        let mut k = 0;
        while k < at.len() {
            if self.steps.get(at[k]) == Some(&Step::AnyDepth) && !at.contains(&(at[k] + 1)) {
                at.push(at[k] + 1);
            }
            k += 1;
        }
    }

    /// Replaces every value the path reaches; returns how many were replaced.
    pub fn replace(&self, root: &mut Value, with: &Value) -> usize {
        walk_mut(root, &self.steps, with)
    }
}

fn walk<'v>(value: &'v Value, steps: &[Step], out: &mut Vec<&'v Value>) {
    let Some((step, rest)) = steps.split_first() else {
        out.push(value);
        return;
    };
    match (step, value) {
        (Step::Key(k), Value::Object(map)) => {
            if let Some(v) = map.get(k) {
                walk(v, rest, out);
            }
        }
        (Step::Index(i), Value::Array(items)) => {
            if let Some(v) = items.get(*i) {
                walk(v, rest, out);
            }
        }
        (Step::AnyIndex, Value::Array(items)) => items.iter().for_each(|v| walk(v, rest, out)),
        (Step::AnyDepth, _) => {
            // Zero levels, or one level down keeping `**` for deeper ones.
            walk(value, rest, out);
            match value {
                Value::Object(map) => map.values().for_each(|v| walk(v, steps, out)),
                Value::Array(items) => items.iter().for_each(|v| walk(v, steps, out)),
                _ => {}
            }
        }
        _ => {}
    }
}

fn walk_mut(value: &mut Value, steps: &[Step], with: &Value) -> usize {
    let Some((step, rest)) = steps.split_first() else {
        *value = with.clone();
        return 1;
    };
    match (step, value) {
        (Step::Key(k), Value::Object(map)) => map.get_mut(k).map_or(0, |v| walk_mut(v, rest, with)),
        (Step::Index(i), Value::Array(items)) => {
            items.get_mut(*i).map_or(0, |v| walk_mut(v, rest, with))
        }
        (Step::AnyIndex, Value::Array(items)) => {
            items.iter_mut().map(|v| walk_mut(v, rest, with)).sum()
        }
        (Step::AnyDepth, value) => {
            // Zero levels here, then one level down keeping `**` for deeper ones. A value just
            // replaced holds no further match, so nothing is counted twice.
            let here = walk_mut(value, rest, with);
            let below: usize = match value {
                Value::Object(map) => map.values_mut().map(|v| walk_mut(v, steps, with)).sum(),
                Value::Array(items) => items.iter_mut().map(|v| walk_mut(v, steps, with)).sum(),
                _ => 0,
            };
            here + below
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "user": {"email": "a@b.c", "phone": "1", "ssn": "x"},
            "items": [{"card": "4111", "phone": "2"}, {"card": "5500"}],
            "nested": {"deep": {"phone": "3"}}
        })
    }

    #[test]
    fn finds_keys_indexes_and_wildcards() {
        let d = doc();
        let f = |p: &str| {
            JsonPath::new(p)
                .expect("valid")
                .find(&d)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(f("user.email"), vec![json!("a@b.c")]);
        assert_eq!(f("items[1].card"), vec![json!("5500")]);
        assert_eq!(f("items[*].card"), vec![json!("4111"), json!("5500")]);
        let mut phones = f("**.phone");
        phones.sort_by_key(|v| v.to_string());
        assert_eq!(phones, vec![json!("1"), json!("2"), json!("3")]);
        assert!(f("user.missing").is_empty());
        assert!(f("items[9].card").is_empty());
    }

    #[test]
    fn replaces_every_match() {
        let mut d = doc();
        let red = json!("[REDACTED]");
        assert_eq!(
            JsonPath::new("**.phone")
                .expect("valid")
                .replace(&mut d, &red),
            3
        );
        assert_eq!(
            JsonPath::new("items[*].card")
                .expect("valid")
                .replace(&mut d, &red),
            2
        );
        assert_eq!(d["user"]["phone"], red);
        assert_eq!(d["nested"]["deep"]["phone"], red);
        assert_eq!(d["items"][1]["card"], red);
        assert_eq!(d["user"]["email"], "a@b.c");
    }

    #[test]
    fn rejects_bad_paths() {
        for p in ["", "a..b", "a[", "a[x]", "a]"] {
            assert!(JsonPath::new(p).is_err(), "{p}");
        }
    }
}
