//! Data subjects for erasure (`bullsweep forget`): who a job belongs to, found by JSON paths in
//! its data, and the cheap byte test that lets a scan skip jobs that cannot hold a value.

use crate::json_walk::{Malformed, Scalar, Seg, Visit, walk};
use crate::jsonpath::JsonPath;
use crate::position::SourcePos;

/// One `subjects:` entry: where a kind of subject (a user, a customer) is named in job data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// The name `forget --subject <name>=<value>` uses.
    pub name: String,
    /// Paths in job data that hold the subject's id.
    pub paths: Vec<JsonPath>,
    /// Where the tenant is in job data, for queues whose key carries none.
    pub tenant_path: Option<JsonPath>,
    /// Where the entry is in the policy file.
    pub pos: SourcePos,
}

/// What one job's data says about the subjects of its queue, read in one pass at any depth
/// ([`read_subjects`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubjectReading {
    /// Whether one of the subjects' paths holds the value.
    pub holds: bool,
    /// The tenant each subject's `tenantPath` names (the first string or number there), for
    /// the subjects that have one and find one.
    pub tenants: Vec<String>,
    /// Every string and number at any of the subjects' paths (the value among them when it
    /// holds): what else identifies the subject, such as an email beside its id.
    pub identifiers: Vec<String>,
}

/// A path being followed through a document: its subject, whether it is a `tenantPath`, and
/// its positions at each open level.
struct Tracked<'s> {
    path: &'s JsonPath,
    subject: usize,
    tenant: bool,
}

/// The walk's reader: the positions of every tracked path at each open level. A level where
/// no path can still match is an empty list, so a deep branch no path leads into costs
/// nothing but its depth.
struct SubjectWalk<'s> {
    tracked: Vec<Tracked<'s>>,
    /// Per open level: (tracked index, its positions), only for paths still alive.
    levels: Vec<Vec<(usize, Vec<usize>)>>,
    value: &'s str,
    out: SubjectReading,
    tenant_seen: Vec<bool>,
}

impl Visit for SubjectWalk<'_> {
    fn enter(&mut self, seg: Seg<'_>) {
        let tracked = &self.tracked;
        let next = self.levels.last().map_or_else(Vec::new, |level| {
            JsonPath::advance_level(level, seg, |t| tracked[t].path)
        });
        self.levels.push(next);
    }

    fn scalar(&mut self, value: Scalar<'_>) {
        let text = match value {
            Scalar::Str(s) => s,
            Scalar::Num(n) => n,
            Scalar::Other => return,
        };
        let Some(level) = self.levels.last() else {
            return;
        };
        for (t, at) in level {
            let tracked = &self.tracked[*t];
            if !tracked.path.reached(at) {
                continue;
            }
            if tracked.tenant {
                if !self.tenant_seen[tracked.subject] {
                    self.tenant_seen[tracked.subject] = true;
                    self.out.tenants.push(text.to_string());
                }
            } else {
                self.out.holds |= text == self.value;
                if !self.out.identifiers.iter().any(|i| i == text) {
                    self.out.identifiers.push(text.to_string());
                }
            }
        }
    }

    fn leave(&mut self) {
        self.levels.pop();
    }
}

/// Reads job data (JSON text, of any depth) for `subjects`: whether one of their paths holds
/// `value` (a string equal to it, or a number written the same way), the tenants their
/// `tenantPath`s name, and what else their paths hold. A member repeated in one object is
/// read each time it appears.
pub fn read_subjects(
    subjects: &[Subject],
    value: &str,
    text: &[u8],
) -> Result<SubjectReading, Malformed> {
    let tracked: Vec<Tracked<'_>> = subjects
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            s.paths
                .iter()
                .map(move |p| Tracked {
                    path: p,
                    subject: i,
                    tenant: false,
                })
                .chain(s.tenant_path.iter().map(move |p| Tracked {
                    path: p,
                    subject: i,
                    tenant: true,
                }))
        })
        .collect();
    let root = tracked
        .iter()
        .enumerate()
        .map(|(t, tr)| (t, tr.path.start()))
        .collect();
    let mut w = SubjectWalk {
        tracked,
        levels: vec![root],
        value,
        out: SubjectReading::default(),
        tenant_seen: vec![false; subjects.len()],
    };
    walk(text, &mut w)?;
    if !w.out.holds {
        w.out.identifiers.clear();
    }
    Ok(w.out)
}

/// Whether a JSON text (keys excluded) names one of `values` anywhere: a string that
/// mentions it as a whole word ([`text_mentions`]), or a number written as it is; `Err` when
/// the text is not JSON.
pub fn mentions_anywhere(text: &[u8], values: &[&str]) -> Result<bool, Malformed> {
    struct Any<'v> {
        values: &'v [&'v str],
        found: bool,
    }
    impl Visit for Any<'_> {
        fn enter(&mut self, _: Seg<'_>) {}
        fn scalar(&mut self, value: Scalar<'_>) {
            self.found |= match value {
                Scalar::Str(s) => self.values.iter().any(|v| text_mentions(s, v)),
                Scalar::Num(n) => self.values.contains(&n),
                Scalar::Other => false,
            };
        }
        fn leave(&mut self) {}
    }
    let mut any = Any {
        values,
        found: false,
    };
    walk(text, &mut any)?;
    Ok(any.found)
}

/// Whether free text mentions `value` as a whole word: not inside a longer run of letters,
/// digits, `_`, `-`, `.` or `@` (so `u42` is not found in `u420` or `a.u42@x`).
pub fn text_mentions(text: &str, value: &str) -> bool {
    if value.is_empty() {
        return false;
    }
    let word = |c: char| c.is_alphanumeric() || "_-.@".contains(c);
    let first = value.chars().next().is_some_and(word);
    let last = value.chars().last().is_some_and(word);
    text.match_indices(value).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + value.len()..].chars().next();
        let glued = (first && before.is_some_and(word)) || (last && after.is_some_and(word));
        !glued
    })
}

/// The byte test a scan runs before parsing anything: a JSON text that holds a value as a
/// string or number contains the value's bytes, unless an escape sequence was used inside it.
/// Encoders escape only quotes, backslashes, control characters and, in some settings, `/`,
/// non-ASCII and `<>&`; a value made only of letters, digits and `-_.@+:=, ` therefore always
/// appears as written. For any other value a text with a backslash is also a candidate.
#[derive(Clone, Debug)]
pub struct Prefilter {
    finder: memchr::memmem::Finder<'static>,
    escapes_matter: bool,
}

impl Prefilter {
    /// The test for `value`.
    pub fn new(value: &str) -> Self {
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_.@+:=, ".contains(c);
        Prefilter {
            finder: memchr::memmem::Finder::new(value.as_bytes()).into_owned(),
            escapes_matter: !value.chars().all(plain),
        }
    }

    /// Whether `text` may hold the value; `false` is certain.
    pub fn may_hold(&self, text: &[u8]) -> bool {
        self.finder.find(text).is_some()
            || (self.escapes_matter && memchr::memchr(b'\\', text).is_some())
    }

    /// Whether text that is not JSON, so cannot be read by paths, may still name the value:
    /// as a whole word of it ([`text_mentions`]), or, for a value an encoder may escape, in
    /// any text with a backslash (an escaped value cannot be told apart there).
    pub fn may_name(&self, text: &[u8]) -> bool {
        let value = String::from_utf8_lossy(self.finder.needle());
        text_mentions(&String::from_utf8_lossy(text), &value)
            || (self.escapes_matter && memchr::memchr(b'\\', text).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn subject(paths: &[&str]) -> Subject {
        Subject {
            name: "user".into(),
            paths: paths
                .iter()
                .map(|p| JsonPath::new(p).expect("path"))
                .collect(),
            tenant_path: Some(JsonPath::new("tenantId").expect("path")),
            pos: SourcePos::default(),
        }
    }

    fn read(s: &Subject, data: serde_json::Value) -> SubjectReading {
        read_subjects(std::slice::from_ref(s), "u42", data.to_string().as_bytes()).expect("json")
    }

    #[test]
    fn holds_by_path_only_and_exactly() {
        let s = subject(&["user.id", "customerId", "items[*].owner", "**.contact.mail"]);
        let holds = |data| read(&s, data).holds;
        assert!(holds(json!({"user": {"id": "u42"}})));
        assert!(!holds(json!({"customerId": 42})));
        assert!(
            read_subjects(std::slice::from_ref(&s), "42", br#"{"customerId":42.0e0}"#)
                .is_ok_and(|r| !r.holds),
            "a number is read as serde_json prints it: 42.0"
        );
        assert!(
            read_subjects(std::slice::from_ref(&s), "42", br#"{"customerId":42}"#)
                .is_ok_and(|r| r.holds)
        );
        assert!(holds(json!({"items": [{"owner": "x"}, {"owner": "u42"}]})));
        assert!(holds(json!({"a": [{"b": {"contact": {"mail": "u42"}}}]})));
        assert!(!holds(json!({"user": {"id": "u420"}})));
        assert!(
            !holds(json!({"note": "u42"})),
            "only the declared paths count"
        );
        assert!(!holds(json!({"user": {"id": ["u42"]}})));
        assert!(
            !holds(json!({"user": [{"id": "u42"}]})),
            "a key step needs an object"
        );
        let r = read(
            &s,
            json!({"tenantId": "acme", "user": {"id": "u42"}, "items": [{"owner": "ann@example.com"}]}),
        );
        assert_eq!(r.tenants, ["acme"]);
        assert_eq!(r.identifiers, ["u42", "ann@example.com"]);
        assert_eq!(read(&s, json!({"tenantId": 7})).tenants, ["7"]);
        assert!(read(&s, json!({"tenant": "acme"})).tenants.is_empty());
        assert!(
            read(&s, json!({"items": [{"owner": "x"}]}))
                .identifiers
                .is_empty(),
            "nothing identifies a subject the data does not hold"
        );
        assert!(read_subjects(std::slice::from_ref(&s), "u42", b"{not json").is_err());
    }

    #[test]
    fn a_subject_is_found_at_any_depth() {
        let s = subject(&["user.id"]);
        for depth in [600, 100_000] {
            let text = format!(
                "{{\"user\":{{\"id\":\"u42\"}},\"tenantId\":\"acme\",\"deep\":{}0{}}}",
                "[".repeat(depth),
                "]".repeat(depth)
            );
            assert!(serde_json::from_str::<serde_json::Value>(&text).is_err());
            let r = read_subjects(std::slice::from_ref(&s), "u42", text.as_bytes()).expect("deep");
            assert!(r.holds, "{depth}");
            assert_eq!(r.tenants, ["acme"]);
            let inside = format!(
                "{}{{\"user\":{{\"id\":\"u42\"}}}}{}",
                "[".repeat(depth),
                "]".repeat(depth)
            );
            assert!(mentions_anywhere(inside.as_bytes(), &["u42"]).expect("deep"));
            assert!(!mentions_anywhere(inside.as_bytes(), &["u7"]).expect("deep"));
        }
    }

    #[test]
    fn anywhere_and_in_text() {
        let any = |v: serde_json::Value, values: &[&str]| {
            mentions_anywhere(v.to_string().as_bytes(), values).expect("json")
        };
        assert!(any(json!({"a": [1, {"b": "u42"}]}), &["u42"]));
        assert!(any(json!({"a": [1, {"b": "x@y"}]}), &["u42", "x@y"]));
        assert!(any(json!({"msg": "sent to x@y today"}), &["x@y"]));
        assert!(!any(json!({"msg": "sent to ax@y"}), &["x@y"]));
        assert!(any(json!([1, 42]), &["42"]));
        assert!(!any(json!([1, 420]), &["42"]));
        assert!(!any(json!({"u42": "x"}), &["u42"]), "keys are not values");
        assert!(text_mentions("user u42 failed", "u42"));
        assert!(text_mentions("u42", "u42"));
        assert!(text_mentions(
            "card of ann@example.com declined",
            "ann@example.com"
        ));
        assert!(!text_mentions("user u420 failed", "u42"));
        assert!(!text_mentions("xu42", "u42"));
        assert!(!text_mentions("a.u42@x", "u42"));
        assert!(!text_mentions("anything", ""));
    }

    #[test]
    fn prefilter_never_misses_a_value_that_json_encodes() {
        for value in [
            "u42",
            "ann@example.com",
            "Zoë",
            "a\"b",
            "x/y",
            "tab\there",
            "42",
        ] {
            let p = Prefilter::new(value);
            for data in [
                json!({"user": {"id": value}}),
                json!({"deep": [{"k": value}], "other": "text with \" quote"}),
            ] {
                let text = serde_json::to_string(&data).expect("json");
                assert!(p.may_hold(text.as_bytes()), "{value} in {text}");
            }
            // An ASCII-escaping encoder (Python's default) writes non-ASCII as \u escapes.
            let ascii = serde_json::to_string(&json!({ "id": value }))
                .expect("json")
                .chars()
                .map(|c| {
                    if c.is_ascii() {
                        c.to_string()
                    } else {
                        format!("\\u{:04x}", c as u32)
                    }
                })
                .collect::<String>();
            assert!(p.may_hold(ascii.as_bytes()), "{value} in {ascii}");
        }
        assert!(!Prefilter::new("u42").may_hold(br#"{"user":{"id":"u7"},"s":"a\"b"}"#));
        // Text that does not parse is judged by its words.
        let p = Prefilter::new("u42");
        assert!(p.may_name(br#"{"user":{"id":"u42"},"n":1e400}"#));
        assert!(p.may_name(br#"{"user":{"id":"u42"}} trailing"#));
        assert!(!p.may_name(br#"{"user":{"id":"u420"},"n":1e400}"#));
        assert!(Prefilter::new("a\"b").may_name(br#"{"id":"a\"b",}"#));
        assert!(Prefilter::new("x/y").may_hold(br#"{"id":"x\/y"}"#));
    }
}
