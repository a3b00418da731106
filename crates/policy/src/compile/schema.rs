//! Every unknown key of a policy file, in one pass. The file is first read as a tree of
//! located keys and values, which is walked against `shape::FILE`, the keys each level allows,
//! so that every misspelled key is reported at once, beside every other problem (serde would
//! stop at the first). The typed parse skips unknown keys; a test in `shape` checks that each
//! level's keys are exactly the fields of its `raw` type, so the two cannot drift apart.

use super::suggest::suggest;
use super::{ConfigError, pos};
use crate::shape::{FILE, Shape};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

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
        (_, Shape::Named(_, inner)) => walk(node, inner, path, out),
        (Node::Map(entries), Shape::Fields(fields) | Shape::OneOf(fields)) => {
            for (key, value) in entries {
                let at = if path.is_empty() {
                    key.value.clone()
                } else {
                    format!("{path}.{}", key.value)
                };
                match fields.iter().find(|f| f.name == key.value) {
                    Some(field) => walk(value, &field.shape, &at, out),
                    None => {
                        let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
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
