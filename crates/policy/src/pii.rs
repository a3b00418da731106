//! PII scrubbing rules for `action: anonymize`: JSON paths for structured job data and named
//! text scrubbers for free text. Everything here is pure string work.

use crate::jsonpath::JsonPath;
use serde_json::Value;
use std::fmt;

/// The replacement used when the policy file names none.
pub const DEFAULT_REPLACEMENT: &str = "[REDACTED]";

/// A named scrubber for free text (`failedReason`, `stacktrace`, logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextPattern {
    /// Email addresses: `local@domain.tld`.
    Email,
    /// Payment card numbers: 13 to 19 digits, optionally grouped by single spaces or dashes,
    /// that pass the Luhn check (so order ids and timestamps are left alone).
    CreditCard,
}

impl TextPattern {
    /// Every pattern, in documentation order.
    pub const ALL: [TextPattern; 2] = [TextPattern::Email, TextPattern::CreditCard];

    /// The name used in policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            TextPattern::Email => "email",
            TextPattern::CreditCard => "credit-card",
        }
    }

    /// Parses a policy-file pattern name.
    pub fn from_name(name: &str) -> Option<TextPattern> {
        TextPattern::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The byte ranges of `text` this pattern matches, in order and disjoint.
    fn matches(self, text: &str) -> Vec<(usize, usize)> {
        match self {
            TextPattern::Email => email_spans(text),
            TextPattern::CreditCard => card_spans(text),
        }
    }
}

impl fmt::Display for TextPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The scrubbing rules in force for one policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PiiRules {
    /// Paths into `data` and `returnvalue` whose values are replaced.
    pub paths: Vec<JsonPath>,
    /// Scrubbers for `failedReason`, `stacktrace` and logs.
    pub patterns: Vec<TextPattern>,
    /// What replaces each match.
    pub replacement: String,
}

/// Job data that paths cannot be applied to: not JSON, or nested deeper than a parsed tree
/// may be (serde_json stops at 128 levels). Nothing of it may be taken as scrubbed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unreadable;

impl PiiRules {
    /// Scrubs a JSON document (`data`, `returnvalue`) by path: `Ok(None)` when nothing
    /// changed, the compact JSON BullMQ writes otherwise; [`Unreadable`] when there are paths
    /// and the text cannot be read as a tree to apply them to.
    pub fn scrub_json(&self, text: &str) -> Result<Option<String>, Unreadable> {
        if self.paths.is_empty() {
            return Ok(None);
        }
        let mut doc: Value = serde_json::from_str(text).map_err(|_| Unreadable)?;
        let with = Value::String(self.replacement.clone());
        let mut hits = 0;
        for path in &self.paths {
            hits += path.replace(&mut doc, &with);
        }
        if hits == 0 {
            return Ok(None);
        }
        let out = serde_json::to_string(&doc).map_err(|_| Unreadable)?;
        Ok((out != text).then_some(out))
    }

    /// Scrubs free text with the patterns. `None` when nothing matched.
    pub fn scrub_text(&self, text: &str) -> Option<String> {
        let mut current: Option<String> = None;
        for pattern in &self.patterns {
            let src = current.as_deref().unwrap_or(text);
            let spans = pattern.matches(src);
            if spans.is_empty() {
                continue;
            }
            current = Some(replace_spans(src, &spans, &self.replacement));
        }
        current.filter(|s| s != text)
    }

    /// Scrubs free text that may be JSON (BullMQ stores `stacktrace` as a JSON array of
    /// strings): inside JSON every string is scrubbed and the document re-encoded, so a
    /// replacement never breaks the encoding; other text is scrubbed as it is.
    pub fn scrub_text_or_json(&self, text: &str) -> Option<String> {
        map_strings(text, &|s| self.scrub_text(s))
    }

    /// What `action: anonymize` writes for the job's hash field `name`: `data` and
    /// `returnvalue` by path, `stacktrace` and other text by pattern. `Ok(None)` when
    /// unchanged; [`Unreadable`] when paths cannot be applied to `data` or `returnvalue`.
    pub fn scrub_field(&self, name: &str, text: &str) -> Result<Option<String>, Unreadable> {
        match name {
            "data" | "returnvalue" => self.scrub_json(text),
            "stacktrace" => Ok(self.scrub_text_or_json(text)),
            _ => Ok(self.scrub_text(text)),
        }
    }
}

/// `text` with each of `spans` (byte ranges, in order and disjoint) replaced by `with`.
pub(crate) fn replace_spans(text: &str, spans: &[(usize, usize)], with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(start, end) in spans {
        out.push_str(&text[at..start]);
        out.push_str(with);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// Applies `f` to text that may be JSON: inside a JSON array, object or string to every
/// string (the document re-encoded, so a replacement never breaks the encoding), to other
/// text as it is. `None` when `f` changed nothing.
pub(crate) fn map_strings(text: &str, f: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    match serde_json::from_str::<Value>(text) {
        Ok(mut doc @ (Value::Array(_) | Value::Object(_) | Value::String(_))) => {
            if map_values(&mut doc, f) {
                serde_json::to_string(&doc).ok()
            } else {
                None
            }
        }
        _ => f(text),
    }
}

fn map_values(value: &mut Value, f: &dyn Fn(&str) -> Option<String>) -> bool {
    match value {
        Value::String(s) => match f(s) {
            Some(new) => {
                *s = new;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |acc, v| map_values(v, f) | acc),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |acc, v| map_values(v, f) | acc),
        _ => false,
    }
}

fn is_local_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+/=?^_`{|}~.-".contains(&b)
}

fn is_domain_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'.'
}

/// Email addresses: a non-empty local part, `@`, and a domain of at least two labels whose last
/// label is two or more letters.
fn email_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut floor = 0;
    for (at, _) in text.match_indices('@') {
        if at < floor {
            continue;
        }
        let mut start = at;
        while start > floor && is_local_char(bytes[start - 1]) {
            start -= 1;
        }
        // A local part does not start with a dot.
        while start < at && bytes[start] == b'.' {
            start += 1;
        }
        let mut end = at + 1;
        // A dot not followed by a label character ends the sentence, not the domain.
        while end < bytes.len()
            && is_domain_char(bytes[end])
            && (bytes[end] != b'.' || bytes.get(end + 1).is_some_and(u8::is_ascii_alphanumeric))
        {
            end += 1;
        }
        while end > at + 1 && bytes[end - 1] == b'-' {
            end -= 1;
        }
        // Drop trailing labels until the domain ends in a real top-level label
        // (`a@example.com.x` still finds `a@example.com`).
        while start < at && end > at + 1 {
            let domain = &text[at + 1..end];
            if domain_valid(domain) {
                spans.push((start, end));
                floor = end;
                break;
            }
            match domain.rfind('.') {
                Some(dot) => end = at + 1 + dot,
                None => break,
            }
        }
    }
    spans
}

fn domain_valid(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty())
        && labels
            .last()
            .is_some_and(|t| t.len() >= 2 && t.bytes().all(|b| b.is_ascii_alphabetic()))
}

fn luhn_valid(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            let d = u32::from(*d);
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Card numbers: runs of 13 to 19 digits, single spaces or dashes allowed between digits, not
/// glued to other letters or digits, that pass the Luhn check. The longest valid run wins.
fn card_spans(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_run =
            bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric());
        if !starts_run {
            i += 1;
            continue;
        }
        // Digits of the run and the byte offset just past each digit.
        let mut digits = Vec::new();
        let mut ends = Vec::new();
        let mut j = i;
        while j < bytes.len() {
            if bytes[j].is_ascii_digit() {
                digits.push(bytes[j] - b'0');
                ends.push(j + 1);
                j += 1;
            } else if matches!(bytes[j], b' ' | b'-')
                && bytes.get(j + 1).is_some_and(|b| b.is_ascii_digit())
            {
                j += 1;
            } else {
                break;
            }
        }
        let found = (13..=digits.len().min(19)).rev().find(|&n| {
            let next = bytes.get(ends[n - 1]);
            !next.is_some_and(|b| b.is_ascii_alphanumeric()) && luhn_valid(&digits[..n])
        });
        match found {
            Some(n) => {
                spans.push((i, ends[n - 1]));
                i = ends[n - 1];
            }
            None => i = j,
        }
    }
    spans
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Rules of `paths` and `patterns`, with the default replacement.
    pub(crate) fn rules(paths: &[&str], patterns: &[TextPattern]) -> PiiRules {
        PiiRules {
            paths: paths
                .iter()
                .map(|p| JsonPath::new(p).expect("valid path"))
                .collect(),
            patterns: patterns.to_vec(),
            replacement: DEFAULT_REPLACEMENT.into(),
        }
    }

    #[test]
    fn emails_are_found_in_prose() {
        let r = rules(&[], &[TextPattern::Email]);
        assert_eq!(
            r.scrub_text("mail to jane.doe+x@mail.example.com failed.")
                .as_deref(),
            Some("mail to [REDACTED] failed.")
        );
        assert_eq!(
            r.scrub_text("a@b.io,c@d.org").as_deref(),
            Some("[REDACTED],[REDACTED]")
        );
        for clean in [
            "no mail here",
            "@handle",
            "x@localhost",
            "user@host.c",
            "a@.com",
        ] {
            assert_eq!(r.scrub_text(clean), None, "{clean}");
        }
    }

    #[test]
    fn card_numbers_need_luhn_and_length() {
        let r = rules(&[], &[TextPattern::CreditCard]);
        for (input, want) in [
            (
                "card 4111 1111 1111 1111 declined",
                "card [REDACTED] declined",
            ),
            ("4111-1111-1111-1111", "[REDACTED]"),
            ("pan=5500005555555559;", "pan=[REDACTED];"),
            ("378282246310005", "[REDACTED]"),
        ] {
            assert_eq!(r.scrub_text(input).as_deref(), Some(want), "{input}");
        }
        for clean in [
            "order 4111111111111112", // fails Luhn
            "ts 1700000000000",       // 13 digits, fails Luhn
            "id ab4111111111111111",  // glued to letters
            "4111 1111",              // too short
            "phone +1 555 0100",
        ] {
            assert_eq!(r.scrub_text(clean), None, "{clean}");
        }
    }

    #[test]
    fn json_paths_scrub_values_and_keep_order() {
        let r = rules(&["user.email", "items[*].card", "**.phone"], &[]);
        let out = r
            .scrub_json(r#"{"z":1,"user":{"email":"a@b.co","phone":"1"},"items":[{"card":"4"}],"a":{"b":{"phone":2}}}"#)
            .expect("JSON")
            .expect("changed");
        assert_eq!(
            out,
            r#"{"z":1,"user":{"email":"[REDACTED]","phone":"[REDACTED]"},"items":[{"card":"[REDACTED]"}],"a":{"b":{"phone":"[REDACTED]"}}}"#
        );
        assert_eq!(
            r.scrub_json(&out),
            Ok(None),
            "scrubbing twice changes nothing"
        );
        assert_eq!(r.scrub_json(r#"{"other":1}"#), Ok(None));
        assert_eq!(r.scrub_json("not json"), Err(Unreadable));
    }

    #[test]
    fn stacktraces_stay_valid_json() {
        let r = PiiRules {
            replacement: "\"quoted\"".into(),
            ..rules(&[], &[TextPattern::Email])
        };
        let out = r
            .scrub_text_or_json(r#"["Error: no user x@y.com\n    at f (a.js:1:1)"]"#)
            .expect("changed");
        let parsed: Vec<String> = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(
            parsed,
            vec!["Error: no user \"quoted\"\n    at f (a.js:1:1)"]
        );
        assert_eq!(
            r.scrub_text_or_json("plain x@y.com").as_deref(),
            Some("plain \"quoted\"")
        );
        assert_eq!(r.scrub_text_or_json("[1,2]"), None);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Scrubbing any text never panics, and scrubbed text scrubs to nothing new.
        #[test]
        fn scrubbing_is_idempotent(text in "[ -~\\u{e9}\\u{4e2d}]{0,80}") {
            let r = PiiRules {
                paths: Vec::new(),
                patterns: TextPattern::ALL.to_vec(),
                replacement: DEFAULT_REPLACEMENT.into(),
            };
            if let Some(once) = r.scrub_text(&text) {
                prop_assert_eq!(r.scrub_text(&once), None);
            }
        }

        /// Inserted emails and cards are always found.
        #[test]
        fn planted_values_are_found(
            pre in "[a-z ]{0,10}",
            user in "[a-z][a-z0-9.]{0,8}[a-z]",
            post in "[ .,;]{1,3}[a-z ]{0,10}",
        ) {
            let r = PiiRules {
                paths: Vec::new(),
                patterns: TextPattern::ALL.to_vec(),
                replacement: DEFAULT_REPLACEMENT.into(),
            };
            let text = format!("{pre} {user}@example.com{post} 4111 1111 1111 1111{post}");
            // Nothing found is a failure, not an empty text that holds neither value.
            let out = r.scrub_text(&text);
            prop_assert!(out.is_some(), "nothing found in {:?}", text);
            let out = out.unwrap_or_default();
            prop_assert!(!out.contains("example.com"), "{}", out);
            prop_assert!(!out.contains("4111"), "{}", out);
            // Both the address and the card number were replaced.
            prop_assert_eq!(out.matches(DEFAULT_REPLACEMENT).count(), 2, "{}", out);
        }
    }
}
