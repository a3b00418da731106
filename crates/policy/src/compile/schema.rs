//! Every unknown key of a policy file, in one pass. The file is walked against `shape::FILE`,
//! the keys each level allows, as the parser reads it (nothing of it is kept), so that every
//! misspelled key is reported at once, beside every other problem (serde would stop at the
//! first). The typed parse skips unknown keys; a test in `shape` checks that each
//! level's keys are exactly the fields of its `raw` type, so the two cannot drift apart.

use super::suggest::suggest;
use super::{ConfigError, pos};
use crate::shape::{FILE, Field, Shape};
use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_saphyr::Spanned;
use std::fmt;

/// Every unknown key of a document, found while it is read: the document is walked against
/// `shape::FILE` as the parser reads it, and nothing of it is kept. Why: a tree of the whole
/// file, every key and value located, took about 2 KB per one-line policy (100 MB for a file of
/// 50,000 policies) beside the typed parse.
pub(super) struct UnknownKeys(pub(super) Vec<ConfigError>);

impl<'de> Deserialize<'de> for UnknownKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        Walk {
            shape: &FILE,
            path: String::new(),
            out: &mut out,
        }
        .deserialize(deserializer)?;
        Ok(UnknownKeys(out))
    }
}

/// One node of the document, checked against the shape its place allows; `path` is its key
/// path, and unknown keys go to `out`.
struct Walk<'a> {
    shape: &'a Shape,
    path: String,
    out: &'a mut Vec<ConfigError>,
}

impl Walk<'_> {
    /// The walk of a node under this one: its own shape and key path, the same findings.
    fn child<'b>(&'b mut self, shape: &'b Shape, path: String) -> Walk<'b> {
        Walk {
            shape,
            path,
            out: &mut *self.out,
        }
    }

    /// The key path of `key` under this node.
    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// A key the node's fields do not have, with a "did you mean".
    fn unknown(&mut self, fields: &[Field], key: &Spanned<String>) {
        let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
        let beside_source =
            self.path.ends_with("source") && matches!(key.value.as_str(), "keepFor" | "deleteWhen");
        let hint = match suggest(&key.value, &names) {
            // The README's "`source: { name, key, action }` with `deleteWhen` and `keepFor`".
            _ if beside_source => format!(
                "`{}` goes beside `source:`, in the policy, not inside it; `source` takes {}",
                key.value,
                names.join(", ")
            ),
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("expected one of {}", names.join(", ")),
        };
        self.out.push(ConfigError {
            pos: pos(&key.referenced),
            path: self.key_path(&key.value),
            message: format!("unknown field `{}`", key.value),
            hint: Some(hint),
        });
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match self.shape {
            Shape::Named(_, inner) => Walk {
                shape: inner,
                ..self
            }
            .deserialize(deserializer),
            _ => deserializer.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Spanned<Key>>()? {
            let Key::Text(text) = key.value else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            match self.shape {
                Shape::Fields(fields) | Shape::OneOf(fields) => {
                    match fields.iter().find(|f| f.name == text) {
                        Some(field) => {
                            let path = self.key_path(&text);
                            map.next_value_seed(self.child(&field.shape, path))?;
                        }
                        None => {
                            self.unknown(fields, &Spanned::new(text, key.referenced, key.defined));
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Shape::Map(inner) => {
                    let path = format!("{}.{text}", self.path);
                    map.next_value_seed(self.child(inner, path))?;
                }
                // A mapping where the shape wants something else: the typed parse reports it.
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let Shape::List(inner) = self.shape else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let mut i = 0usize;
        loop {
            let path = format!("{}[{i}]", self.path);
            if seq.next_element_seed(self.child(inner, path))?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
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
