//! The kinds a level of the policy file's shape is made of: a mapping's fields, lists, one of
//! several shapes, and typed values, with the constructors the key tree in [`super`] uses.

use crate::duration::BareUnit;

/// What a level of the file may hold.
#[derive(Clone, Copy)]
pub(crate) enum Shape {
    /// A mapping with these keys.
    Fields(&'static [Field]),
    /// A mapping with these keys, exactly one of which is set (not null).
    OneOf(&'static [Field]),
    /// A list of these.
    List(&'static Shape),
    /// A mapping with free keys (names chosen by the user) of these.
    Map(&'static Shape),
    /// A shape used in several places, under a name (the JSON Schema's `$defs`).
    Named(&'static str, &'static Shape),
    /// A value, read by the typed parse and checked by `compile`.
    Value(Value),
}

/// One key of a mapping.
#[derive(Clone, Copy)]
pub(crate) struct Field {
    /// The key as written.
    pub name: &'static str,
    /// What its value may be.
    pub shape: Shape,
    /// Whether it may be left out, and whether null stands for "left out".
    pub presence: Presence,
    /// What it means, for people (the JSON Schema's `description`).
    pub doc: &'static str,
}

/// Whether a key may be left out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// It may be left out, or written as null (an `Option` in the raw type).
    Optional,
    /// It may be left out; a null is refused (a list, mapping or flag with a default).
    Defaulted,
    /// `check` refuses the level without it, or with a null.
    Required,
}

/// The type of a value.
#[derive(Clone, Copy)]
pub(crate) enum Value {
    /// Text. The YAML reader takes a number or a boolean written plainly as its text.
    Text,
    /// `true` or `false` (YAML 1.1's `yes`, `no`, `on` and `off` too).
    Bool,
    /// A number.
    Number,
    /// The file format's version.
    Version,
    /// A duration such as `7d`; a bare number is read in this unit.
    Duration(BareUnit),
    /// A whole number, at least this.
    Count(u64),
    /// When something runs: a duration, milliseconds, `CRON …` or `auto`.
    Schedule,
    /// One of the names this function lists.
    Name(fn() -> Vec<&'static str>),
    /// One of the names this function lists, spaces around it allowed.
    TrimmedName(fn() -> Vec<&'static str>),
    /// Any value at all.
    Any,
}

/// A key that may be left out or null.
pub(super) const fn opt(name: &'static str, shape: Shape, doc: &'static str) -> Field {
    Field {
        name,
        shape,
        presence: Presence::Optional,
        doc,
    }
}

/// A key that may be left out, but not null.
pub(super) const fn def(name: &'static str, shape: Shape, doc: &'static str) -> Field {
    Field {
        name,
        shape,
        presence: Presence::Defaulted,
        doc,
    }
}

/// A key that must be written.
pub(super) const fn req(name: &'static str, shape: Shape, doc: &'static str) -> Field {
    Field {
        name,
        shape,
        presence: Presence::Required,
        doc,
    }
}

pub(super) const TEXT: Shape = Shape::Value(Value::Text);
pub(super) const TEXTS: Shape = Shape::List(&TEXT);
pub(super) const BOOL: Shape = Shape::Value(Value::Bool);
pub(super) const NUMBER: Shape = Shape::Value(Value::Number);
pub(super) const SECONDS: Shape = Shape::Value(Value::Duration(BareUnit::Seconds));
pub(super) const MILLISECONDS: Shape = Shape::Value(Value::Duration(BareUnit::Milliseconds));
pub(super) const SCHEDULE: Shape = Shape::Value(Value::Schedule);
