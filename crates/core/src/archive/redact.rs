//! An archived record as a reader who may not see personal data sees it: the job through its
//! queue's `pii:` rules as [`JobRedaction`](bullsweep_policy::JobRedaction) reads a job (paths as `action: anonymize` applies
//! them, the patterns over every string of its job data and log lines, the values the paths
//! hold hidden in every other field and line), and, where no rule can be applied, the job
//! data replaced whole.

use super::ArchiveRecord;
use super::record::JSON_FIELDS;
use bullsweep_policy::{DATA_FIELDS, PiiRules, WITHHELD};
use serde_json::value::RawValue;

impl ArchiveRecord {
    /// This record as a reader without raw access sees it, under `rules` (the record's
    /// queue's `pii:`). Without rules, or for a record of raw bytes (`encoding: base64`, which
    /// no path or pattern reads), every job data field and log line is [`WITHHELD`].
    pub fn redacted(&self, rules: Option<&PiiRules>) -> ArchiveRecord {
        let rules = rules.filter(|_| self.encoding.is_none());
        let mut out = self.clone();
        let Some(rules) = rules else {
            for (name, raw) in &mut out.fields.0 {
                if DATA_FIELDS.contains(&name.as_str()) {
                    *raw = withheld_value();
                }
            }
            out.logs.iter_mut().for_each(|l| *l = WITHHELD.to_string());
            return out;
        };
        let texts: Vec<(String, String)> = self
            .fields
            .0
            .iter()
            .map(|(name, raw)| (name.clone(), text_of(self, name, raw)))
            .collect();
        let job = rules.redaction(
            texts
                .iter()
                .filter(|(name, _)| name == "data" || name == "returnvalue")
                .map(|(_, text)| text.as_str()),
        );
        for ((name, raw), (_, text)) in out.fields.0.iter_mut().zip(&texts) {
            *raw = shown(self, name, job.field(name, text));
        }
        for line in &mut out.logs {
            *line = job.text(line);
        }
        out
    }
}

/// Field `name`'s text: the JSON Redis held where it is embedded, else the string.
fn text_of(record: &ArchiveRecord, name: &str, raw: &RawValue) -> String {
    if embedded(record, name) {
        raw.get().to_string()
    } else {
        serde_json::from_str::<String>(raw.get()).unwrap_or_else(|_| raw.get().to_string())
    }
}

/// What [`JobRedaction::field`](bullsweep_policy::JobRedaction::field) gives for field `name`, as the record holds it: embedded
/// JSON stays embedded; a field withheld, or whose text is no longer JSON, is replaced whole.
fn shown(record: &ArchiveRecord, name: &str, text: Option<String>) -> Box<RawValue> {
    let Some(text) = text else {
        return withheld_value();
    };
    let json = if embedded(record, name) {
        text
    } else {
        serde_json::Value::String(text).to_string()
    };
    RawValue::from_string(json).unwrap_or_else(|_| withheld_value())
}

/// Whether field `name` is embedded in `record` as the JSON text Redis held.
fn embedded(record: &ArchiveRecord, name: &str) -> bool {
    JSON_FIELDS.contains(&name) && !record.text_fields.iter().any(|f| f == name)
}

/// [`WITHHELD`] as a JSON value.
fn withheld_value() -> Box<RawValue> {
    serde_json::value::to_raw_value(WITHHELD).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::RecordFields;
    use bullsweep_policy::{JsonPath, TextPattern};

    fn record(fields: &[(&str, &str)], text_fields: &[&str], logs: &[&str]) -> ArchiveRecord {
        ArchiveRecord {
            queue: "bull:mail".into(),
            id: "1".into(),
            backend: Default::default(),
            state: "completed".into(),
            finished_on: 1,
            role: None,
            source: None,
            encoding: None,
            fields: RecordFields(
                fields
                    .iter()
                    .map(|(k, v)| {
                        let raw = RawValue::from_string((*v).to_string()).expect("json");
                        ((*k).to_string(), raw)
                    })
                    .collect(),
            ),
            text_fields: text_fields.iter().map(|f| (*f).to_string()).collect(),
            logs: logs.iter().map(|l| (*l).to_string()).collect(),
        }
    }

    fn rules() -> PiiRules {
        PiiRules {
            paths: vec![JsonPath::new("user.id").expect("path")],
            patterns: vec![TextPattern::Email],
            replacement: "[REDACTED]".into(),
        }
    }

    fn field(r: &ArchiveRecord, name: &str) -> String {
        let (_, raw) = r.fields.0.iter().find(|(k, _)| k == name).expect("field");
        raw.get().to_string()
    }

    #[test]
    fn paths_and_patterns_apply_to_job_data_and_logs_and_nothing_else() {
        let r = record(
            &[
                ("name", r#""send a@b.io""#),
                ("data", r#"{"user":{"id":"u7"},"to":"a@b.io"}"#),
                ("failedReason", r#""no a@b.io""#),
                ("returnvalue", r#""u7 a@b.io""#),
            ],
            &["returnvalue"],
            &["sent to a@b.io"],
        )
        .redacted(Some(&rules()));
        assert_eq!(
            field(&r, "data"),
            r#"{"user":{"id":"[REDACTED]"},"to":"[REDACTED]"}"#
        );
        assert_eq!(field(&r, "failedReason"), r#""no [REDACTED]""#);
        assert_eq!(
            field(&r, "returnvalue"),
            r#""[redacted]""#,
            "not JSON: no path applies, so it is withheld"
        );
        assert_eq!(field(&r, "name"), r#""send [REDACTED]""#, "free text too");
        assert_eq!(r.logs, vec!["sent to [REDACTED]".to_string()]);
    }

    /// Issue 24 red team: a value `pii.paths` hides in `data` was shown in the record's
    /// failedReason, stacktrace, logs and name.
    #[test]
    fn values_hidden_by_path_are_hidden_in_every_field_and_log_line() {
        let r = record(
            &[
                ("name", r#""signup pid-7f3a-2""#),
                ("data", r#"{"user":{"id":"pid-7f3a-2"},"plan":"pro"}"#),
                ("failedReason", r#""cannot mail pid-7f3a-2""#),
                ("stacktrace", r#"["Error: pid-7f3a-2\n at f"]"#),
                ("opts", r#""{\"jobId\":\"pid-7f3a-2\"}""#),
                ("timestamp", r#""1700000000000""#),
            ],
            &[],
            &["mailing pid-7f3a-2"],
        );
        let shown = r.redacted(Some(&rules()));
        let text = serde_json::to_string(&shown).expect("json");
        assert!(!text.contains("pid-7f3a"), "{text}");
        assert_eq!(field(&shown, "failedReason"), r#""cannot mail [REDACTED]""#);
        assert_eq!(
            field(&shown, "stacktrace"),
            r#"["Error: [REDACTED]\n at f"]"#
        );
        assert_eq!(field(&shown, "name"), r#""signup [REDACTED]""#);
        assert_eq!(field(&shown, "timestamp"), r#""1700000000000""#);
        assert_eq!(shown.logs, vec!["mailing [REDACTED]".to_string()]);
        assert!(field(&shown, "data").contains(r#""plan":"pro""#));
    }

    /// Issue 24 red team: data nested past serde_json's 128 levels was shown as stored.
    #[test]
    fn data_the_paths_cannot_be_applied_to_is_withheld() {
        let deep = format!(
            "{}{{\"user\":{{\"id\":\"u-deep\"}}}}{}",
            "[".repeat(300),
            "]".repeat(300)
        );
        let r = record(
            &[("data", deep.as_str()), ("failedReason", r#""no u-deep""#)],
            &[],
            &["ok"],
        );
        let shown = r.redacted(Some(&PiiRules {
            paths: vec![JsonPath::new("**.id").expect("path")],
            ..rules()
        }));
        assert_eq!(field(&shown, "data"), r#""[redacted]""#);
        assert_eq!(field(&shown, "failedReason"), r#""no [REDACTED]""#);
        assert_eq!(shown.logs, vec!["ok".to_string()]);
        // Data kept as text because it was not JSON: no path applies, so it is withheld.
        let text = record(
            &[
                ("data", r#""{not json u-deep""#),
                ("failedReason", r#""no a@b.io""#),
            ],
            &["data"],
            &["a line"],
        )
        .redacted(Some(&rules()));
        assert_eq!(field(&text, "data"), r#""[redacted]""#);
        assert_eq!(field(&text, "failedReason"), r#""no [REDACTED]""#);
        assert_eq!(text.logs, vec!["a line".to_string()]);
    }

    #[test]
    fn without_rules_or_as_raw_bytes_job_data_is_replaced_whole() {
        let plain = record(&[("data", r#"{"n":1}"#)], &[], &["a line"]);
        let mut binary = plain.clone();
        binary.encoding = Some(crate::archive::record::BASE64.into());
        for (r, rules) in [
            (plain.redacted(None), None),
            (binary.redacted(Some(&rules())), Some(())),
        ] {
            assert_eq!(field(&r, "data"), r#""[redacted]""#, "{rules:?}");
            assert_eq!(r.logs, vec![WITHHELD.to_string()]);
        }
    }
}
