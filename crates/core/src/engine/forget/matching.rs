//! How an erasure tells that bytes name the subject outside job data: a child's copy in its
//! parent, an events stream entry's field. Such text is searched for every identifier of the
//! subject (its id, and what its jobs hold at the subject's paths, such as an email), as JSON
//! of any depth when it parses, else as free text. Job data itself is read by the subject's
//! paths ([`super::ScopedQueue::read`]).

use bullsweep_policy::{Prefilter, mentions_anywhere, text_mentions};

/// Whether `raw` names one of `values`: anywhere in it as JSON (a string mentioning it as a
/// whole word, or a number equal to it), or, when it is not JSON, as a whole word of its text.
pub(super) fn mentions(raw: &[u8], values: &[&str]) -> bool {
    match mentions_anywhere(raw, values) {
        Ok(found) => found,
        Err(_) => {
            let text = String::from_utf8_lossy(raw);
            values.iter().any(|v| text_mentions(&text, v))
        }
    }
}

/// The subject's identifiers, each with the byte test that skips text that cannot hold it.
pub(super) struct Identifiers {
    list: Vec<(String, Prefilter)>,
}

impl Identifiers {
    /// The identifiers (empty ones left out: they would match everything).
    pub(super) fn new(values: impl IntoIterator<Item = String>) -> Self {
        let mut list: Vec<(String, Prefilter)> = Vec::new();
        for v in values {
            if !v.is_empty() && !list.iter().any(|(have, _)| *have == v) {
                let p = Prefilter::new(&v);
                list.push((v, p));
            }
        }
        Identifiers { list }
    }

    /// Whether `raw` names one of them.
    pub(super) fn named_in(&self, raw: &[u8]) -> bool {
        let candidates: Vec<&str> = self
            .list
            .iter()
            .filter(|(_, p)| p.may_hold(raw))
            .map(|(v, _)| v.as_str())
            .collect();
        !candidates.is_empty() && mentions(raw, &candidates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_found_in_json_and_in_text() {
        let ids = Identifiers::new(["u42".to_string(), "ann@example.com".into(), String::new()]);
        assert!(ids.named_in(b"card of ann@example.com declined"));
        assert!(ids.named_in(br#"{"sent":"u42"}"#));
        assert!(ids.named_in(br#"{"note":"mail to ann@example.com failed"}"#));
        assert!(!ids.named_in(b"card of bob@example.com declined"));
        assert!(!ids.named_in(b"user u420"));
        assert!(!ids.named_in(b""), "an empty identifier matches nothing");
        let deep = format!("{}\"u42\"{}", "[".repeat(1000), "]".repeat(1000));
        assert!(ids.named_in(deep.as_bytes()));
    }
}
