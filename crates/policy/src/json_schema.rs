//! The policy file as a JSON Schema (draft 2020-12), for editors (`yaml-language-server`) and
//! CI. It is generated from `shape::FILE`, the one list of the file's keys, and from the
//! code's own lists of names (actions, states, modes, doctor kinds, cost presets, text
//! patterns), so it cannot drift from what `check` reads.
//!
//! The schema checks structure and types: unknown keys at every level, a mapping, list or
//! value where each belongs, required keys, names from closed lists, durations and counts. It
//! never refuses a file `check` accepts, so it is lenient where the YAML reader is: text may be
//! written as a plain number or boolean, a flag as YAML 1.1's `yes`/`no`/`on`/`off`, a number
//! with underscores (`1_000`). What depends on more than one value (an action valid for its
//! state, an action's target, ties, cycles, globs, time zones, cron fields) is `check`'s alone.

use crate::compile::FORMAT_VERSION;
use crate::duration::{BareUnit, UNITS};
use crate::schedule::{AUTO, CRON_PREFIX};
use crate::shape::{FILE, Field, Presence, Shape, Value as Kind};
use serde_json::{Map, Value, json};

/// The dialect: JSON Schema draft 2020-12.
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The schema's `$id`: the policy file format, by its version.
pub const SCHEMA_ID: &str = "urn:bullsweep:policy-file:1";

/// The spellings of a boolean the YAML reader (serde-saphyr's YAML 1.1 rule) accepts, in any
/// case; YAML 1.2, which editors use, reads all but `true` and `false` as text.
const YAML_BOOLEANS: [&str; 8] = ["true", "false", "yes", "no", "on", "off", "y", "n"];

/// The JSON Schema of the policy file (the document `bullsweep schema` prints and
/// `docs/bullsweep.schema.json` holds).
pub fn json_schema() -> Value {
    let mut defs = Defs(Map::new());
    let body = defs.shape(&FILE);
    let mut root = json!({
        "$schema": DIALECT,
        "$id": SCHEMA_ID,
        "title": "bullsweep policy file",
        "description": "Retention policies for BullMQ queues on Redis (`bullsweep check` validates a file in full).",
    });
    if let (Some(root), Value::Object(body)) = (root.as_object_mut(), body) {
        root.extend(body);
        root.insert("$defs".into(), Value::Object(defs.0));
    }
    root
}

/// The named shapes and value types, each generated once and referred to by `$ref`.
struct Defs(Map<String, Value>);

impl Defs {
    /// The schema of `shape`.
    fn shape(&mut self, shape: &Shape) -> Value {
        match *shape {
            Shape::Fields(fields) => self.mapping(fields),
            Shape::OneOf(fields) => {
                let mut schema = self.mapping(fields);
                // Exactly one key is set: present and not null.
                let one_of: Vec<Value> = fields
                    .iter()
                    .map(|f| json!({ "required": [f.name], "properties": { f.name: { "not": { "type": "null" } } } }))
                    .collect();
                schema["oneOf"] = Value::Array(one_of);
                schema
            }
            Shape::List(inner) => json!({ "type": "array", "items": self.shape(inner) }),
            Shape::Map(inner) => {
                json!({ "type": "object", "additionalProperties": self.shape(inner) })
            }
            Shape::Named(name, inner) => self.named(name, |defs| defs.shape(inner)),
            Shape::Value(kind) => self.value(kind),
        }
    }

    /// A `$ref` to the definition `name`, made by `make` the first time.
    fn named(&mut self, name: &str, make: impl FnOnce(&mut Defs) -> Value) -> Value {
        if !self.0.contains_key(name) {
            // Held before it is made, so that a shape naming itself would end.
            self.0.insert(name.into(), Value::Bool(true));
            let schema = make(self);
            self.0.insert(name.into(), schema);
        }
        json!({ "$ref": format!("#/$defs/{name}") })
    }

    /// A mapping with fixed keys: each described, the required ones listed, no others.
    fn mapping(&mut self, fields: &[Field]) -> Value {
        let mut properties = Map::new();
        for f in fields {
            properties.insert(f.name.into(), self.property(f));
        }
        let required: Vec<&str> = fields
            .iter()
            .filter(|f| f.presence == Presence::Required)
            .map(|f| f.name)
            .collect();
        let mut schema = json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        });
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    }

    /// One key's schema, with its description; null allowed where it means "left out".
    fn property(&mut self, f: &Field) -> Value {
        let inner = self.shape(&f.shape);
        let mut schema = match f.presence {
            Presence::Optional => json!({ "anyOf": [inner, { "type": "null" }] }),
            Presence::Defaulted | Presence::Required => inner,
        };
        let unit = match f.shape {
            Shape::Value(Kind::Duration(BareUnit::Seconds)) => " A bare number is seconds.",
            Shape::Value(Kind::Duration(BareUnit::Milliseconds)) => {
                " A bare number is milliseconds."
            }
            Shape::Value(Kind::Schedule) => " A bare number is milliseconds.",
            _ => "",
        };
        if let Value::Object(map) = &mut schema {
            map.insert("description".into(), format!("{}{unit}", f.doc).into());
        }
        schema
    }

    /// The schema of a value of kind `kind`.
    fn value(&mut self, kind: Kind) -> Value {
        match kind {
            Kind::Text => self.named("text", |_| {
                json!({
                    "description": "Text. A number or a boolean written plainly is read as its text.",
                    "type": ["string", "number", "boolean"],
                })
            }),
            Kind::Bool => self.named("boolean", |_| {
                json!({
                    "description": "`true` or `false`; YAML 1.1's `yes`, `no`, `on`, `off`, `y` and `n` are read as booleans too.",
                    "anyOf": [
                        { "type": "boolean" },
                        { "type": "string", "pattern": format!("^[ \\t\\r\\n]*(?:{})[ \\t\\r\\n]*$", any_case(&YAML_BOOLEANS)) },
                    ],
                })
            }),
            Kind::Number => self.named("number", |_| {
                json!({
                    "description": "A number.",
                    "anyOf": [
                        { "type": "number" },
                        { "type": "string", "pattern": format!("^\\s*[-+]?{NUMERAL}\\s*$") },
                    ],
                })
            }),
            Kind::Version => json!({
                "anyOf": [
                    { "const": FORMAT_VERSION },
                    { "type": "string", "pattern": format!("^\\s*\\+?{NUMERAL}\\s*$") },
                ],
            }),
            Kind::Duration(_) => self.named("duration", |_| {
                json!({
                    "description": format!("A duration: whole numbers of {}, each written without a space, e.g. `7d`, `90m`, `1h30m`, `500ms`; or a bare number, whose unit depends on the key.", unit_list()),
                    "anyOf": [
                        { "type": "number", "exclusiveMinimum": 0 },
                        { "type": "string", "pattern": format!("^\\s*(?:{}|{YAML11_NUMERAL})\\s*$", duration_pattern()) },
                    ],
                    "examples": ["7d", "90m", "1h30m", "500ms"],
                })
            }),
            Kind::Count(min) => {
                let name = match min {
                    0 => "count".to_string(),
                    min => format!("countFrom{min}"),
                };
                self.named(&name, |_| {
                    let least = match min {
                        0 => "zero".to_string(),
                        min => min.to_string(),
                    };
                    json!({
                        "description": format!("A whole number, {least} or more, written as a number (`\"500\"`, quoted, is text)."),
                        "anyOf": [
                            { "type": "integer", "minimum": min },
                            { "type": "string", "pattern": format!("^{YAML11_NUMERAL}$") },
                        ],
                    })
                })
            }
            Kind::Schedule => self.named("schedule", |_| {
                json!({
                    "description": "When it runs: a duration (`12h`), milliseconds (`86400000`), a cron expression after `CRON ` (`CRON 0 3 * * *`) or `auto`.",
                    "anyOf": [
                        { "type": "number", "exclusiveMinimum": 0 },
                        { "type": "string", "pattern": format!(
                            "^\\s*(?:{}|{}[\\s\\S]*|{}|{YAML11_NUMERAL})\\s*$",
                            escape(AUTO), escape(CRON_PREFIX), duration_pattern()
                        ) },
                    ],
                    "examples": ["1h", "CRON 0 3 * * *", "auto"],
                })
            }),
            Kind::Name(names) => json!({ "enum": names() }),
            Kind::TrimmedName(names) => {
                let names = names();
                let words: Vec<String> = names.iter().map(|n| escape(n)).collect();
                json!({
                    "anyOf": [
                        { "enum": names },
                        { "type": "string", "pattern": format!("^\\s*(?:{})\\s*$", words.join("|")) },
                    ],
                })
            }
            Kind::Any => json!({}),
        }
    }
}

/// A number as text: digits with a fraction and an exponent, or `0x`, `0o`, `0b` digits;
/// underscores between digits.
const NUMERAL: &str = r"(?:0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?)";

/// A number written plainly that YAML 1.2 (editors, and the JSON this schema sees) reads as
/// text but the YAML reader reads as a number: with underscores (`1_000`), `0b` digits, or a
/// `+` before `0x` or `0o`.
const YAML11_NUMERAL: &str =
    r"(?:\+?0b[01_]+|\+0[ox][0-9a-fA-F_]+|\+?[0-9]+_[0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?)";

/// One or more whole numbers each followed by its unit (`1h30m`), the units `duration` knows.
fn duration_pattern() -> String {
    let units: Vec<&str> = UNITS.iter().map(|(u, _)| *u).collect();
    format!("(?:[0-9]+(?:{}))+", units.join("|"))
}

/// The units as a sentence: `ms, s, m, h, d or w`.
fn unit_list() -> String {
    let units: Vec<&str> = UNITS.iter().map(|(u, _)| *u).collect();
    match units.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => units.join(""),
    }
}

/// An alternation of `words` that matches them in any case (`[Yy][Ee][Ss]`), since patterns
/// have no case-insensitive flag.
fn any_case(words: &[&str]) -> String {
    let alternatives: Vec<String> = words
        .iter()
        .map(|w| {
            w.chars()
                .map(|c| match (c.to_ascii_uppercase(), c.to_ascii_lowercase()) {
                    (up, low) if up != low => format!("[{up}{low}]"),
                    _ => escape(&c.to_string()),
                })
                .collect()
        })
        .collect();
    alternatives.join("|")
}

/// `text` as a pattern that matches it literally.
fn escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_2020_12_and_closes_every_fixed_mapping() {
        let schema = json_schema();
        assert_eq!(schema["$schema"], DIALECT);
        assert_eq!(schema["$id"], SCHEMA_ID);
        assert_eq!(schema["required"], json!(["version"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        let rule = &schema["$defs"]["stateRule"];
        assert_eq!(rule["additionalProperties"], json!(false));
        assert_eq!(
            rule["properties"]["action"]["anyOf"][0]["enum"],
            json!(["remove", "archive", "anonymize", "notify"])
        );
        assert!(
            rule["properties"]["maxAge"]["description"]
                .as_str()
                .is_some_and(|d| d.ends_with("A bare number is seconds.")),
            "{rule}"
        );
        // Every `$ref` names a definition that exists.
        let text = schema.to_string();
        for (i, _) in text.match_indices("\"$ref\":\"#/$defs/") {
            let rest = &text[i + "\"$ref\":\"#/$defs/".len()..];
            let name = &rest[..rest.find('"').unwrap_or(0)];
            assert!(schema["$defs"].get(name).is_some(), "no $defs/{name}");
        }
    }

    #[test]
    fn patterns_are_built_from_the_codes_lists() {
        assert_eq!(duration_pattern(), "(?:[0-9]+(?:ms|s|m|h|d|w))+");
        assert_eq!(unit_list(), "ms, s, m, h, d or w");
        assert_eq!(any_case(&["on", "y"]), "[Oo][Nn]|[Yy]");
        assert_eq!(escape("CRON *"), "CRON \\*");
        let schema = json_schema();
        let repair = &schema["properties"]["doctor"]["anyOf"][0]["properties"]["repair"];
        let names = &repair["items"]["anyOf"][0]["enum"];
        assert!(
            names.as_array().is_some_and(
                |n| n.len() == crate::DoctorKind::ALL.len() + 1 && n.contains(&json!("all"))
            ),
            "{repair}"
        );
    }
}
