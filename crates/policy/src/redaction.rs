//! How one job reads to someone who may not see personal data (a dashboard viewer or
//! operator): its queue's `pii:` paths applied to `data` and `returnvalue` as
//! `action: anonymize` applies them, the patterns over every string of its job data and log
//! lines, and the values the paths hold hidden wherever else the job repeats them (its name,
//! `failedReason`, `stacktrace`, logs, other fields). Where the paths cannot be applied (text
//! that is not JSON, or nested deeper than serde_json's 128 levels), the field is withheld
//! whole: nothing is shown on the assumption that no rule matched.

use crate::json_walk::{Scalar, Seg, Visit, walk};
use crate::jsonpath::JsonPath;
use crate::pii::{PiiRules, map_strings, replace_spans};

/// What replaces job data that no rule can be applied to.
pub const WITHHELD: &str = "[redacted]";

/// The job hash fields that hold job data: a reader without raw access sees them only
/// redacted, and nothing of them where no rule can be applied.
pub const DATA_FIELDS: [&str; 4] = ["data", "returnvalue", "failedReason", "stacktrace"];

/// Free text beside the job data that the producer writes (the job's name): the patterns
/// apply to it too.
const FREE_TEXT: [&str; 1] = ["name"];

/// A hidden value shorter than this (in characters) is hidden only where a whole string or
/// line equals it: a short id (`u7`, `42`) inside other words is too often something else.
const SHORTEST_INSIDE_TEXT: usize = 4;

/// One job's redaction, made by [`PiiRules::redaction`].
#[derive(Clone, Debug)]
pub struct JobRedaction<'r> {
    rules: &'r PiiRules,
    /// Every string and number at the paths in the job's `data` and `returnvalue`, longest
    /// first (so that a value containing another is replaced whole).
    hidden: Vec<String>,
}

impl PiiRules {
    /// The redaction of one job, from the texts of its `data` and `returnvalue` (JSON of any
    /// depth: they are read as a stream for the values at the paths; text that is not JSON
    /// has no paths, and is withheld itself).
    pub fn redaction<'a>(&self, job_data: impl IntoIterator<Item = &'a str>) -> JobRedaction<'_> {
        let mut hidden: Vec<String> = Vec::new();
        if !self.paths.is_empty() {
            for text in job_data {
                hidden.extend(values_at(&self.paths, text).unwrap_or_default());
            }
        }
        hidden.retain(|v| !v.is_empty());
        hidden.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        hidden.dedup();
        JobRedaction {
            rules: self,
            hidden,
        }
    }
}

impl JobRedaction<'_> {
    /// How the job's hash field `name` reads, `None` when it is withheld whole
    /// ([`WITHHELD`]: `data` or `returnvalue` that the paths cannot be applied to, being not
    /// JSON or nested deeper than a parsed tree may be): job data ([`DATA_FIELDS`]) by path
    /// and pattern, the job's name by pattern, and in every field the values the paths hold.
    pub fn field(&self, name: &str, text: &str) -> Option<String> {
        let data = DATA_FIELDS.contains(&name);
        let after_paths = match name {
            "data" | "returnvalue" => self.rules.scrub_json(text).ok()?,
            _ => None,
        };
        let text = after_paths.as_deref().unwrap_or(text);
        let patterns = data || FREE_TEXT.contains(&name);
        let scrubbed = map_strings(text, &|s| {
            let after = if patterns {
                self.rules.scrub_text(s)
            } else {
                None
            };
            self.hide(after.as_deref().unwrap_or(s)).or(after)
        });
        Some(scrubbed.unwrap_or_else(|| text.to_string()))
    }

    /// How free text the job carries beside its fields reads (one of its log lines, its id):
    /// the patterns, and the values the paths hold, each replaced where it stands, so what
    /// matches no rule stays (`welcome-[REDACTED]` for the id `welcome-zoe@example.com`).
    pub fn text(&self, text: &str) -> String {
        let after = self.rules.scrub_text(text);
        let shown = after.as_deref().unwrap_or(text);
        self.hide(shown).unwrap_or_else(|| shown.to_string())
    }

    /// `text` with the hidden values replaced: a whole text equal to one (ASCII case aside),
    /// and a value of [`SHORTEST_INSIDE_TEXT`] characters or more wherever it stands as a
    /// word of its own. `None` when none is there.
    fn hide(&self, text: &str) -> Option<String> {
        let mut current: Option<String> = None;
        for value in &self.hidden {
            let src = current.as_deref().unwrap_or(text);
            if src.eq_ignore_ascii_case(value) {
                return Some(self.rules.replacement.clone());
            }
            if value.chars().count() < SHORTEST_INSIDE_TEXT {
                continue;
            }
            let spans = word_spans(src, value);
            if !spans.is_empty() {
                current = Some(replace_spans(src, &spans, &self.rules.replacement));
            }
        }
        current
    }
}

/// Where `value` stands in `text` (ASCII case aside) with no letter or digit glued to it
/// where it starts or ends with one: `u-1042` in `user u-1042 failed`, not `1042` in
/// `17001042`.
pub(crate) fn word_spans(text: &str, value: &str) -> Vec<(usize, usize)> {
    let (hay, needle) = (text.to_ascii_lowercase(), value.to_ascii_lowercase());
    let bytes = hay.as_bytes();
    let glued_start = needle
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphanumeric);
    let glued_end = needle
        .as_bytes()
        .last()
        .is_some_and(u8::is_ascii_alphanumeric);
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = hay[from..].find(&needle) {
        let (start, end) = (from + found, from + found + needle.len());
        let free_start = !glued_start || start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        let free_end = !glued_end || bytes.get(end).is_none_or(|b| !b.is_ascii_alphanumeric());
        if free_start && free_end {
            spans.push((start, end));
            from = end;
        } else {
            // The next match may start inside this one; step one character on.
            from = start + hay[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    spans
}

/// Every string and number (as serde_json writes it) at or under a place one of `paths`
/// reaches in the JSON `text`, read as a stream at any depth; `None` when it is not JSON.
fn values_at(paths: &[JsonPath], text: &str) -> Option<Vec<String>> {
    let root: Vec<(usize, Vec<usize>)> = paths.iter().map(JsonPath::start).enumerate().collect();
    let mut reader = Collect {
        paths,
        inside_from: reached(paths, &root).then_some(1),
        levels: vec![root],
        values: Vec::new(),
    };
    walk(text.as_bytes(), &mut reader).ok()?;
    Some(reader.values)
}

/// Whether one of the paths reaches the value at `level`.
fn reached(paths: &[JsonPath], level: &[(usize, Vec<usize>)]) -> bool {
    level.iter().any(|(p, at)| paths[*p].reached(at))
}

/// The walk's reader for [`values_at`].
struct Collect<'p> {
    paths: &'p [JsonPath],
    /// Per open level: each path still alive there and its positions. Inside a reached
    /// value no path is followed (everything there is collected), so a level costs nothing.
    levels: Vec<Vec<(usize, Vec<usize>)>>,
    /// The number of open levels when the reached value that holds the current one opened.
    inside_from: Option<usize>,
    values: Vec<String>,
}

impl Visit for Collect<'_> {
    fn enter(&mut self, seg: Seg<'_>) {
        let next: Vec<(usize, Vec<usize>)> = match (self.inside_from, self.levels.last()) {
            (None, Some(level)) => {
                let paths = self.paths;
                JsonPath::advance_level(level, seg, |p| &paths[p])
            }
            _ => Vec::new(),
        };
        let hit = self.inside_from.is_none() && reached(self.paths, &next);
        self.levels.push(next);
        if hit {
            self.inside_from = Some(self.levels.len());
        }
    }

    fn scalar(&mut self, value: Scalar<'_>) {
        if self.inside_from.is_none() {
            return;
        }
        match value {
            Scalar::Str(s) | Scalar::Num(s) => self.values.push(s.to_string()),
            Scalar::Other => {}
        }
    }

    fn leave(&mut self) {
        if self.inside_from == Some(self.levels.len()) {
            self.inside_from = None;
        }
        self.levels.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pii::TextPattern;
    use crate::pii::tests::rules;

    /// `{"a":{"a":…{"user":{"id":"u-deep-7"}}…}}`, `depth` levels of `a` deep.
    fn deep(depth: usize) -> String {
        format!(
            "{}{{\"user\":{{\"id\":\"u-deep-7\"}}}}{}",
            "{\"a\":".repeat(depth),
            "}".repeat(depth)
        )
    }

    #[test]
    fn a_reader_sees_paths_and_patterns_applied_to_every_field() {
        let r = rules(&["user.id", "**.phone"], &[TextPattern::Email]);
        let data = r#"{"user":{"id":"u7","mail":"a@b.io"},"n":1,"x":{"phone":"555"}}"#;
        let job = r.redaction([data]);
        assert_eq!(
            job.field("data", data).as_deref(),
            Some(
                r#"{"user":{"id":"[REDACTED]","mail":"[REDACTED]"},"n":1,"x":{"phone":"[REDACTED]"}}"#
            )
        );
        // Anonymizing the same field applies the paths only.
        assert_eq!(
            r.scrub_field("data", data),
            Ok(Some(
                r#"{"user":{"id":"[REDACTED]","mail":"a@b.io"},"n":1,"x":{"phone":"[REDACTED]"}}"#
                    .into()
            ))
        );
        assert_eq!(
            job.field("failedReason", "no mail to a@b.io").as_deref(),
            Some("no mail to [REDACTED]")
        );
        assert_eq!(
            job.field("stacktrace", r#"["at a@b.io"]"#).as_deref(),
            Some(r#"["at [REDACTED]"]"#)
        );
        let plain = r.redaction([r#"{"n":1}"#]);
        assert_eq!(
            plain.field("data", r#"{"n":1}"#).as_deref(),
            Some(r#"{"n":1}"#)
        );
    }

    /// Issue 24 red team: job data nested past serde_json's 128 levels was shown as stored
    /// (the paths could not be applied, so nothing was replaced).
    #[test]
    fn data_too_deep_or_not_json_for_the_paths_is_withheld_whole() {
        let r = rules(&["**.id"], &[TextPattern::Email]);
        let text = deep(600);
        assert_eq!(r.scrub_json(&text), Err(crate::pii::Unreadable));
        assert_eq!(r.scrub_field("data", &text), Err(crate::pii::Unreadable));
        let job = r.redaction([text.as_str()]);
        assert_eq!(job.field("data", &text), None, "too deep: withheld");
        assert_eq!(job.field("returnvalue", &text), None);
        // The values at the paths are still found, at any depth, and hidden elsewhere.
        assert_eq!(
            job.field("failedReason", "no user u-deep-7").as_deref(),
            Some("no user [REDACTED]")
        );
        let huge = deep(100_000);
        assert_eq!(
            r.redaction([huge.as_str()]).text("for u-deep-7"),
            "for [REDACTED]"
        );
        // Not JSON: no path applies, so the field is withheld; the rest reads as ever.
        let plain = r.redaction(["not json a@b.io"]);
        assert_eq!(plain.field("data", "not json a@b.io"), None);
        assert_eq!(plain.field("returnvalue", "u7 a@b.io"), None);
        assert_eq!(
            plain.field("failedReason", "a@b.io").as_deref(),
            Some("[REDACTED]")
        );
        assert_eq!(plain.text("a line"), "a line");
        // Without paths there is nothing to apply: the patterns alone decide.
        let patterns_only = rules(&[], &[TextPattern::Email]);
        assert_eq!(
            patterns_only
                .redaction([text.as_str()])
                .field("failedReason", "x a@b.io")
                .as_deref(),
            Some("x [REDACTED]")
        );
    }

    /// Issue 24 red team: a value `pii.paths` hides in `data` was shown where the job repeats
    /// it: its failedReason, stacktrace, log lines and name.
    #[test]
    fn values_the_paths_hide_are_hidden_in_every_other_field_and_line() {
        let r = rules(&["user.id", "user.name", "user.n", "contact"], &[]);
        let data = r#"{"user":{"id":"pid-7f3a","name":"Zelda Quuxley","n":1042},"contact":{"tel":"+1 555 0100","ok":true},"i":7}"#;
        let job = r.redaction([data, r#"{"user":{"id":"u7"}}"#]);
        for (name, text, want) in [
            (
                "failedReason",
                "cannot mail Zelda Quuxley (PID-7F3A)",
                "cannot mail [REDACTED] ([REDACTED])",
            ),
            (
                "stacktrace",
                r#"["Error: pid-7f3a\n at x","tel +1 555 0100"]"#,
                r#"["Error: [REDACTED]\n at x","tel [REDACTED]"]"#,
            ),
            ("name", "signup pid-7f3a", "signup [REDACTED]"),
            (
                "opts",
                r#"{"jobId":"pid-7f3a","attempts":1}"#,
                r#"{"jobId":"[REDACTED]","attempts":1}"#,
            ),
            (
                "returnvalue",
                r#"{"for":"Zelda Quuxley"}"#,
                r#"{"for":"[REDACTED]"}"#,
            ),
            // A short value only where it is the whole text; a value glued to others stays.
            ("failedReason", "u7", "[REDACTED]"),
            ("failedReason", "u7 and u77", "u7 and u77"),
            ("timestamp", "17001042", "17001042"),
            ("attemptsMade", "1042", "[REDACTED]"),
        ] {
            assert_eq!(
                job.field(name, text).as_deref(),
                Some(want),
                "{name}: {text}"
            );
        }
        assert_eq!(
            job.text("mailing Zelda Quuxley, id pid-7f3a"),
            "mailing [REDACTED], id [REDACTED]"
        );
        assert_eq!(
            job.field("data", data).as_deref(),
            Some(
                r#"{"user":{"id":"[REDACTED]","name":"[REDACTED]","n":"[REDACTED]"},"contact":"[REDACTED]","i":7}"#
            )
        );
    }

    /// Red team (issue 42, F6): a custom job id carries personal data into a notice. It reads
    /// as free text does, keeping what no rule matches for an operator to correlate.
    #[test]
    fn a_job_id_reads_through_the_patterns_and_the_values_the_paths_hold() {
        let r = rules(&["user.name", "user.id"], &[TextPattern::Email]);
        let job = r.redaction([r#"{"user":{"name":"Zoë Müller","id":"u7"}}"#]);
        for (id, want) in [
            ("welcome-zoe@example.com", "[REDACTED]"),
            ("welcome:zoe@example.com", "welcome:[REDACTED]"),
            ("welcome-Zoë Müller", "welcome-[REDACTED]"),
            ("u7", "[REDACTED]"),
            ("order-u7", "order-u7"),
            ("order-1042", "order-1042"),
        ] {
            assert_eq!(job.text(id), want, "{id}");
        }
    }

    #[test]
    fn values_are_collected_at_any_depth_and_under_a_reached_container() {
        let paths = [JsonPath::new("**.card").expect("path")];
        assert_eq!(
            values_at(
                &paths,
                r#"{"a":[{"card":{"n":"4111","exp":12}},{"card":"x"}],"card2":"y"}"#
            ),
            Some(vec!["4111".into(), "12".into(), "x".into()])
        );
        assert_eq!(values_at(&paths, "{"), None);
        let whole = [JsonPath::new("**").expect("path")];
        assert_eq!(
            values_at(&whole, r#"{"a":"b","c":[1,null]}"#),
            Some(vec!["b".into(), "1".into()])
        );
    }
}
