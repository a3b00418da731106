//! An archived record as a reader who may not see personal data sees it: the job's data
//! through its queue's `pii:` rules (the code `action: anonymize` uses, with the patterns
//! over every string too), its log lines through the patterns, and, where no rule can be
//! applied, the job data replaced whole.

use super::ArchiveRecord;
use super::record::JSON_FIELDS;
use bullsweep_policy::PiiRules;
use serde_json::value::RawValue;

/// The hash fields that hold job data: shown to such a reader only redacted.
pub const DATA_FIELDS: [&str; 4] = ["data", "returnvalue", "failedReason", "stacktrace"];

/// What replaces job data that no rule can be applied to.
pub const REDACTED: &str = "[redacted]";

impl ArchiveRecord {
    /// This record as a reader without raw access sees it, under `rules` (the record's
    /// queue's `pii:`). Without rules, or for a record of raw bytes (`encoding: base64`, which
    /// no path or pattern reads), every job data field and log line is [`REDACTED`].
    pub fn redacted(&self, rules: Option<&PiiRules>) -> ArchiveRecord {
        let rules = rules.filter(|_| self.encoding.is_none());
        let mut out = self.clone();
        for (name, raw) in &mut out.fields.0 {
            if !DATA_FIELDS.contains(&name.as_str()) {
                continue;
            }
            let shown = match rules {
                None => json_string(REDACTED),
                Some(rules) if embedded(self, name) => rules.redact_field(name, raw.get()),
                Some(rules) => {
                    let text = serde_json::from_str::<String>(raw.get())
                        .unwrap_or_else(|_| raw.get().to_string());
                    json_string(&rules.redact_field(name, &text))
                }
            };
            // Every value above is JSON text, so this only fails on a bug; the data is then
            // replaced whole rather than shown.
            *raw = RawValue::from_string(shown).unwrap_or_else(|_| redacted_value());
        }
        for line in &mut out.logs {
            *line = match rules {
                Some(rules) => rules.scrub_text(line).unwrap_or_else(|| line.clone()),
                None => REDACTED.to_string(),
            };
        }
        out
    }
}

/// Whether field `name` is embedded in `record` as the JSON text Redis held.
fn embedded(record: &ArchiveRecord, name: &str) -> bool {
    JSON_FIELDS.contains(&name) && !record.text_fields.iter().any(|f| f == name)
}

/// `text` as a JSON string.
fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// [`REDACTED`] as a JSON value.
fn redacted_value() -> Box<RawValue> {
    serde_json::value::to_raw_value(REDACTED).unwrap_or_default()
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
        assert_eq!(field(&r, "returnvalue"), r#""u7 [REDACTED]""#);
        assert_eq!(field(&r, "name"), r#""send a@b.io""#, "not job data");
        assert_eq!(r.logs, vec!["sent to [REDACTED]".to_string()]);
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
            assert_eq!(r.logs, vec![REDACTED.to_string()]);
        }
    }
}
