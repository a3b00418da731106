//! Every unknown key of a policy file, in one pass. The file is first read as a tree of
//! located keys and values, which is walked against [`FILE`], the keys each level allows, so
//! that every misspelled key is reported at once, beside every other problem (serde would
//! stop at the first). The typed parse skips unknown keys; a test checks that each level's
//! keys here are exactly the fields of its `raw` type, so the two cannot drift apart.

use super::suggest::suggest;
use super::{ConfigError, pos};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

/// What a level of the file may hold.
enum Shape {
    /// A mapping with these keys.
    Fields(&'static [(&'static str, Shape)]),
    /// A list of these.
    List(&'static Shape),
    /// A mapping with free keys (names chosen by the user) of these.
    Map(&'static Shape),
    /// Anything (a value; its type is checked by the typed parse).
    Any,
}

const STATE_RULE: Shape = Shape::Fields(&[
    ("maxAge", Shape::Any),
    ("maxCount", Shape::Any),
    ("keepFor", Shape::Any),
    ("action", Shape::Any),
    (
        "keepIf",
        Shape::Fields(&[("path", Shape::Any), ("equals", Shape::Any)]),
    ),
    ("ttl", Shape::Any),
]);

const STATE_RULES: Shape = Shape::Fields(&[
    ("completed", STATE_RULE),
    ("failed", STATE_RULE),
    ("waiting", STATE_RULE),
    ("delayed", STATE_RULE),
    ("prioritized", STATE_RULE),
    ("waiting-children", STATE_RULE),
    (
        "stalled",
        Shape::Fields(&[("maxAge", Shape::Any), ("action", Shape::Any)]),
    ),
]);

const PII: Shape = Shape::Fields(&[
    ("paths", Shape::Any),
    ("patterns", Shape::Any),
    ("replacement", Shape::Any),
]);

const SUBJECT: Shape = Shape::Fields(&[
    ("name", Shape::Any),
    ("paths", Shape::Any),
    ("tenantPath", Shape::Any),
]);

const POLICY: Shape = Shape::Fields(&[
    ("name", Shape::Any),
    ("environment", Shape::Any),
    ("queueNamePattern", Shape::Any),
    ("tenant", Shape::Any),
    ("rules", STATE_RULES),
    (
        "jobs",
        Shape::List(&Shape::Fields(&[
            ("name", Shape::Any),
            ("completed", STATE_RULE),
            ("failed", STATE_RULE),
            ("waiting", STATE_RULE),
            ("delayed", STATE_RULE),
            ("prioritized", STATE_RULE),
            ("waiting-children", STATE_RULE),
            ("source", SOURCE_LINK),
            ("deleteWhen", Shape::Any),
            ("keepFor", Shape::Any),
        ])),
    ),
    (
        "sla",
        Shape::Fields(&[
            ("maxDataAgeHours", Shape::Any),
            ("complianceTag", Shape::Any),
            ("auditRequired", Shape::Any),
        ]),
    ),
    ("pii", PII),
    ("subjects", Shape::List(&SUBJECT)),
    ("schedule", Shape::Any),
    ("timezone", Shape::Any),
    ("mode", Shape::Any),
    ("dependsOn", Shape::Any),
    (
        "deadLetter",
        Shape::Fields(&[
            ("warm", Shape::Any),
            ("cold", Shape::Any),
            ("purgeAfter", Shape::Any),
        ]),
    ),
    ("moveExhaustedTo", Shape::Any),
    ("protectWaitingParents", Shape::Any),
    ("source", SOURCE_LINK),
    ("deleteWhen", Shape::Any),
    ("keepFor", Shape::Any),
    (
        "events",
        Shape::Fields(&[("maxLen", Shape::Any), ("maxAge", Shape::Any)]),
    ),
]);

const SOURCE_LINK: Shape = Shape::Fields(&[
    ("name", Shape::Any),
    ("key", Shape::Any),
    ("action", Shape::Any),
]);

const SOURCE: Shape = Shape::Fields(&[
    (
        "postgres",
        Shape::Fields(&[
            ("url", Shape::Any),
            ("query", Shape::Any),
            ("timeout", Shape::Any),
            ("batchSize", Shape::Any),
        ]),
    ),
    (
        "redis",
        Shape::Fields(&[
            ("url", Shape::Any),
            ("key", Shape::Any),
            ("field", Shape::Any),
            ("equals", Shape::Any),
            ("timeout", Shape::Any),
            ("batchSize", Shape::Any),
        ]),
    ),
]);

/// The keys a policy file may hold, level by level.
const FILE: Shape = Shape::Fields(&[
    ("version", Shape::Any),
    ("environment", Shape::Any),
    ("environments", Shape::Map(&Shape::Any)),
    ("discovery", Shape::Fields(&[("layouts", Shape::Any)])),
    ("policies", Shape::List(&POLICY)),
    (
        "tenants",
        Shape::List(&Shape::Fields(&[
            ("tenantId", Shape::Any),
            ("environment", Shape::Any),
            ("overrides", STATE_RULES),
        ])),
    ),
    ("audit", Shape::Fields(&[("url", Shape::Any)])),
    (
        "archive",
        Shape::Fields(&[("url", Shape::Any), ("compression", Shape::Any)]),
    ),
    (
        "notify",
        Shape::Fields(&[
            (
                "webhook",
                Shape::Fields(&[("url", Shape::Any), ("headers", Shape::Map(&Shape::Any))]),
            ),
            ("log", Shape::Any),
        ]),
    ),
    ("pii", PII),
    ("subjects", Shape::List(&SUBJECT)),
    ("schedule", Shape::Any),
    ("timezone", Shape::Any),
    (
        "cost",
        Shape::Fields(&[
            ("perGbMonth", Shape::Any),
            ("preset", Shape::Any),
            ("replicas", Shape::Any),
            ("maxLeak", Shape::Any),
        ]),
    ),
    ("sources", Shape::Map(&SOURCE)),
    (
        "doctor",
        Shape::Fields(&[("schedule", Shape::Any), ("repair", Shape::Any)]),
    ),
]);

/// A YAML node with every key and value located.
pub(super) enum Node {
    /// A mapping, in file order.
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
    /// A sequence.
    Seq(Vec<Spanned<Node>>),
    /// A scalar (or a key that is not a string), not looked into.
    Scalar,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NodeVisitor;
        impl<'de> Visitor<'de> for NodeVisitor {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<Key>>()? {
                    let value = map.next_value::<Spanned<Node>>()?;
                    if let Key::Text(text) = key.value {
                        let key = Spanned::new(text, key.referenced, key.defined);
                        entries.push((key, value));
                    }
                }
                Ok(Node::Map(entries))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<Node>>()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_str<E>(self, _: &str) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
            fn visit_none<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar)
            }
        }
        deserializer.deserialize_any(NodeVisitor)
    }
}

/// A mapping key: text, or something else (a number, a list) that names no field.
enum Key {
    Text(String),
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key::Text(v.to_string()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Key, E> {
                Ok(Key::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Key, E> {
                Ok(Key::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Key, E> {
                Ok(Key::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Key, E> {
                Ok(Key::Other)
            }
            fn visit_unit<E>(self) -> Result<Key, E> {
                Ok(Key::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Key, A::Error> {
                Ok(Key::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Key, A::Error> {
                Ok(Key::Other)
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

/// Every key of `tree` that the policy file format does not have, with its location, key
/// path and a "did you mean" hint.
pub(super) fn unknown_keys(tree: &Spanned<Node>) -> Vec<ConfigError> {
    let mut out = Vec::new();
    walk(tree, &FILE, "", &mut out);
    out
}

fn walk(node: &Spanned<Node>, shape: &Shape, path: &str, out: &mut Vec<ConfigError>) {
    match (&node.value, shape) {
        (Node::Map(entries), Shape::Fields(fields)) => {
            for (key, value) in entries {
                let at = if path.is_empty() {
                    key.value.clone()
                } else {
                    format!("{path}.{}", key.value)
                };
                match fields.iter().find(|(name, _)| *name == key.value) {
                    Some((_, inner)) => walk(value, inner, &at, out),
                    None => {
                        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
                        let hint = match suggest(&key.value, &names) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("expected one of {}", names.join(", ")),
                        };
                        out.push(ConfigError {
                            pos: pos(&key.referenced),
                            path: at,
                            message: format!("unknown field `{}`", key.value),
                            hint: Some(hint),
                        });
                    }
                }
            }
        }
        (Node::Seq(items), Shape::List(inner)) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, inner, &format!("{path}[{i}]"), out);
            }
        }
        (Node::Map(entries), Shape::Map(inner)) => {
            for (key, value) in entries {
                walk(value, inner, &format!("{path}.{}", key.value), out);
            }
        }
        // Anything else is a value, or a type the typed parse reports.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::*;
    use serde::de::{self, Deserializer, Visitor};

    /// A deserializer that only records the field names a struct asks for.
    struct FieldNames(std::cell::RefCell<Vec<&'static str>>);

    #[derive(Debug)]
    struct Stop;
    impl fmt::Display for Stop {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("stop")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<T: fmt::Display>(_: T) -> Self {
            Stop
        }
    }

    impl<'de> Deserializer<'de> for &FieldNames {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.borrow_mut().extend_from_slice(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    /// The fields serde reads for `T`, from its derived `Deserialize`.
    fn fields<T: for<'de> Deserialize<'de>>() -> Vec<&'static str> {
        let names = FieldNames(std::cell::RefCell::new(Vec::new()));
        let _ = T::deserialize(&names);
        let mut out = names.0.into_inner();
        out.sort_unstable();
        out
    }

    fn keys(shape: &Shape) -> Vec<&'static str> {
        let Shape::Fields(fields) = shape else {
            return Vec::new();
        };
        let mut out: Vec<&'static str> = fields.iter().map(|(k, _)| *k).collect();
        out.sort_unstable();
        out
    }

    fn at(shape: &'static Shape, key: &str) -> &'static Shape {
        match shape {
            Shape::Fields(fields) => match fields.iter().find(|(k, _)| *k == key) {
                Some((_, Shape::List(inner))) => inner,
                Some((_, inner)) => inner,
                None => panic!("no key {key}"),
            },
            _ => panic!("not a mapping"),
        }
    }

    #[test]
    fn every_level_allows_exactly_its_raw_types_fields() {
        let policy = at(&FILE, "policies");
        let rules = at(policy, "rules");
        let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
            ("file", keys(&FILE), fields::<RawPolicyFile>()),
            ("cost", keys(at(&FILE, "cost")), fields::<RawCost>()),
            (
                "discovery",
                keys(at(&FILE, "discovery")),
                fields::<RawDiscovery>(),
            ),
            ("audit", keys(at(&FILE, "audit")), fields::<RawAudit>()),
            (
                "archive",
                keys(at(&FILE, "archive")),
                fields::<RawArchive>(),
            ),
            ("notify", keys(at(&FILE, "notify")), fields::<RawNotify>()),
            ("doctor", keys(at(&FILE, "doctor")), fields::<RawDoctor>()),
            (
                "webhook",
                keys(at(at(&FILE, "notify"), "webhook")),
                fields::<RawWebhook>(),
            ),
            ("pii", keys(at(&FILE, "pii")), fields::<RawPii>()),
            (
                "subjects",
                keys(at(&FILE, "subjects")),
                fields::<RawSubject>(),
            ),
            ("policy", keys(policy), fields::<RawPolicy>()),
            ("rules", keys(rules), fields::<RawStateRules>()),
            (
                "rule",
                keys(at(rules, "completed")),
                fields::<RawStateRule>(),
            ),
            (
                "keepIf",
                keys(at(at(rules, "completed"), "keepIf")),
                fields::<RawKeepIf>(),
            ),
            (
                "stalled",
                keys(at(rules, "stalled")),
                fields::<RawStalled>(),
            ),
            ("jobs", keys(at(policy, "jobs")), fields::<RawJobRule>()),
            ("events", keys(at(policy, "events")), fields::<RawEvents>()),
            ("sla", keys(at(policy, "sla")), fields::<RawSla>()),
            (
                "deadLetter",
                keys(at(policy, "deadLetter")),
                fields::<RawDeadLetter>(),
            ),
            ("tenants", keys(at(&FILE, "tenants")), fields::<RawTenant>()),
        ];
        for (level, schema, serde) in cases {
            assert!(!serde.is_empty(), "{level}: serde's fields were read");
            assert_eq!(
                schema, serde,
                "{level}: the schema and the raw type disagree"
            );
        }
    }
}
