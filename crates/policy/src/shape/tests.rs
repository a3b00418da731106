//! The shape against the raw serde types: each level's keys are its type's fields, and every
//! key has its sentence.

use super::*;
use crate::raw::*;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;

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

/// The mapping a shape is, through names, lists and maps.
fn fields_of(shape: &Shape) -> &'static [Field] {
    match *shape {
        Shape::Fields(fields) | Shape::OneOf(fields) => fields,
        Shape::Named(_, inner) | Shape::List(inner) | Shape::Map(inner) => fields_of(inner),
        Shape::Value(_) => panic!("not a mapping"),
    }
}

fn keys(shape: &Shape) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = fields_of(shape).iter().map(|f| f.name).collect();
    out.sort_unstable();
    out
}

fn at(shape: &Shape, key: &str) -> Shape {
    match fields_of(shape).iter().find(|f| f.name == key) {
        Some(field) => field.shape,
        None => panic!("no key {key}"),
    }
}

#[test]
fn every_level_allows_exactly_its_raw_types_fields() {
    let policy = at(&FILE, "policies");
    let rules = at(&policy, "rules");
    let sources = at(&FILE, "sources");
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        ("file", keys(&FILE), fields::<RawPolicyFile>()),
        ("cost", keys(&at(&FILE, "cost")), fields::<RawCost>()),
        (
            "discovery",
            keys(&at(&FILE, "discovery")),
            fields::<RawDiscovery>(),
        ),
        ("audit", keys(&at(&FILE, "audit")), fields::<RawAudit>()),
        (
            "archive",
            keys(&at(&FILE, "archive")),
            fields::<RawArchive>(),
        ),
        ("notify", keys(&at(&FILE, "notify")), fields::<RawNotify>()),
        ("doctor", keys(&at(&FILE, "doctor")), fields::<RawDoctor>()),
        (
            "bullBoard",
            keys(&at(&FILE, "bullBoard")),
            fields::<RawBullBoard>(),
        ),
        (
            "webhook",
            keys(&at(&at(&FILE, "notify"), "webhook")),
            fields::<RawWebhook>(),
        ),
        ("pii", keys(&at(&FILE, "pii")), fields::<RawPii>()),
        (
            "subjects",
            keys(&at(&FILE, "subjects")),
            fields::<RawSubject>(),
        ),
        ("sources", keys(&sources), fields::<RawSource>()),
        (
            "postgres",
            keys(&at(&sources, "postgres")),
            fields::<RawPostgresSource>(),
        ),
        (
            "redis",
            keys(&at(&sources, "redis")),
            fields::<RawRedisSource>(),
        ),
        ("policy", keys(&policy), fields::<RawPolicy>()),
        ("rules", keys(&rules), fields::<RawStateRules>()),
        (
            "rule",
            keys(&at(&rules, "completed")),
            fields::<RawStateRule>(),
        ),
        (
            "keepIf",
            keys(&at(&at(&rules, "completed"), "keepIf")),
            fields::<RawKeepIf>(),
        ),
        (
            "stalled",
            keys(&at(&rules, "stalled")),
            fields::<RawStalled>(),
        ),
        ("jobs", keys(&at(&policy, "jobs")), fields::<RawJobRule>()),
        (
            "source",
            keys(&at(&policy, "source")),
            fields::<RawSourceLink>(),
        ),
        (
            "events",
            keys(&at(&policy, "events")),
            fields::<RawEvents>(),
        ),
        ("sla", keys(&at(&policy, "sla")), fields::<RawSla>()),
        (
            "deadLetter",
            keys(&at(&policy, "deadLetter")),
            fields::<RawDeadLetter>(),
        ),
        (
            "tenants",
            keys(&at(&FILE, "tenants")),
            fields::<RawTenant>(),
        ),
    ];
    for (level, schema, serde) in cases {
        assert!(!serde.is_empty(), "{level}: serde's fields were read");
        assert_eq!(
            schema, serde,
            "{level}: the shape and the raw type disagree"
        );
    }
}

#[test]
fn every_key_says_what_it_means() {
    fn walk(shape: &Shape, path: &str, out: &mut Vec<String>) {
        match *shape {
            Shape::Fields(fields) | Shape::OneOf(fields) => {
                for f in fields {
                    let at = format!("{path}.{}", f.name);
                    if f.doc.trim().is_empty() || !f.doc.ends_with('.') {
                        out.push(at.clone());
                    }
                    walk(&f.shape, &at, out);
                }
            }
            Shape::Named(_, inner) | Shape::List(inner) | Shape::Map(inner) => {
                walk(inner, path, out)
            }
            Shape::Value(_) => {}
        }
    }
    let mut missing = Vec::new();
    walk(&FILE, "", &mut missing);
    assert!(missing.is_empty(), "keys without a sentence: {missing:?}");
}
