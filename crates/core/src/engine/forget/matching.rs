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

/// Characters below which an identifier found in the subject's jobs is too common to look
/// for as a word inside text.
const SHORT: usize = 4;

/// One identifier of the subject, with the byte test that skips text that cannot hold it.
struct Identifier {
    value: String,
    prefilter: Prefilter,
    /// Matched only as a whole field (the field is the value, or a JSON string of just it),
    /// never as a word inside text: a short or purely numeric value the subject's jobs held
    /// (`42`, `ab`) would otherwise match unrelated entries, such as another job's progress.
    whole_field: bool,
}

/// The subject's identifiers: the id the erasure was asked for, and what its jobs and
/// archived records hold at the subject's paths.
pub(super) struct Identifiers {
    list: Vec<Identifier>,
}

/// Whether a value is only a number (digits, with a sign, point or exponent): as a word it
/// would be found in any count, time or progress.
fn numeric(v: &str) -> bool {
    v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
}

impl Identifiers {
    /// The identifiers: `given` (the id asked for) is matched as a whole word anywhere;
    /// `extra` values too, unless shorter than four characters or purely numeric, which match
    /// only a whole field. Empty values are left out: they would match everything.
    pub(super) fn new(given: &str, extra: impl IntoIterator<Item = String>) -> Self {
        let mut list: Vec<Identifier> = Vec::new();
        let given = std::iter::once((given.to_string(), false));
        let extra = extra
            .into_iter()
            .map(|v| (v.clone(), v.chars().count() < SHORT || numeric(&v)));
        for (value, whole_field) in given.chain(extra) {
            if !value.is_empty() && !list.iter().any(|have| have.value == value) {
                list.push(Identifier {
                    prefilter: Prefilter::new(&value),
                    value,
                    whole_field,
                });
            }
        }
        Identifiers { list }
    }

    /// Whether the field value `raw` names one of them.
    pub(super) fn named_in(&self, raw: &[u8]) -> bool {
        let mut candidates: Vec<&str> = Vec::new();
        for id in self.list.iter().filter(|id| id.prefilter.may_hold(raw)) {
            if !id.whole_field {
                candidates.push(&id.value);
            } else if whole_field_is(raw, &id.value) {
                return true;
            }
        }
        !candidates.is_empty() && mentions(raw, &candidates)
    }
}

/// Whether a field is exactly `value`, as written or as a JSON string of just it.
fn whole_field_is(raw: &[u8], value: &str) -> bool {
    raw == value.as_bytes() || serde_json::from_slice::<String>(raw).is_ok_and(|s| s == value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_found_in_json_and_in_text() {
        let ids = Identifiers::new("u42", ["ann@example.com".to_string(), String::new()]);
        assert!(ids.named_in(b"card of ann@example.com declined"));
        assert!(ids.named_in(br#"{"sent":"u42"}"#));
        assert!(ids.named_in(br#"{"note":"mail to ann@example.com failed"}"#));
        assert!(!ids.named_in(b"card of bob@example.com declined"));
        assert!(!ids.named_in(b"user u420"));
        assert!(!ids.named_in(b""), "an empty identifier matches nothing");
        let deep = format!("{}\"u42\"{}", "[".repeat(1000), "]".repeat(1000));
        assert!(ids.named_in(deep.as_bytes()));
    }

    #[test]
    fn short_or_numeric_identifiers_from_jobs_match_only_a_whole_field() {
        let ids = Identifiers::new(
            "u42",
            ["42", "ab", "1001", "-7.5", "ann@example.com"].map(String::from),
        );
        // Another job's progress, counts and text that merely contain them stay.
        assert!(!ids.named_in(b"progress 42"));
        assert!(!ids.named_in(br#"{"progress":42}"#));
        assert!(!ids.named_in(br#"[42,43]"#));
        assert!(!ids.named_in(b"order 1001 shipped"));
        assert!(!ids.named_in(br#"{"note":"ab cd"}"#));
        assert!(!ids.named_in(b"-7.5 degrees"));
        // A field that is exactly one of them goes.
        assert!(ids.named_in(b"42"));
        assert!(ids.named_in(b"1001"));
        assert!(ids.named_in(br#""ab""#));
        assert!(ids.named_in(b"-7.5"));
        // The id asked for, and a long identifier, keep matching as words anywhere.
        assert!(ids.named_in(b"user u42 failed"));
        assert!(ids.named_in(b"mail to ann@example.com bounced"));
        let short_given = Identifiers::new("7", ["7".to_string()]);
        assert!(
            short_given.named_in(b"user 7 failed"),
            "the id asked for matches as a word, however short"
        );
        assert!(!short_given.named_in(b"user 17 failed"));
    }
}
