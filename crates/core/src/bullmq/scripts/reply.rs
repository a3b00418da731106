//! A script's reply read by its layout: the fields in the order the script's header lists
//! them, each of the type it names. A reply of another shape (not an array, too short or too
//! long, a field of another type, a negative count) is an error naming the script and the
//! field, never a 0.

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// The error for a reply of `script` that does not fit its layout, as `detail` says.
pub(super) fn wrong_shape(script: &str, detail: &str) -> RedisError {
    RedisError::from((
        ErrorKind::UnexpectedReturnType,
        "script reply of the wrong shape",
        format!("{script}: {detail}"),
    ))
}

/// The error for a field of a reply that is not what the layout says.
fn misfit(script: &str, field: &str, expected: &str, got: &Value) -> RedisError {
    let detail = format!("`{field}` should be {expected}, got {}", shape(got));
    wrong_shape(script, &detail)
}

/// A short name of a value's type, for errors (never its content, which may be large).
fn shape(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Int(i) => format!("the integer {i}"),
        Value::BulkString(_) | Value::SimpleString(_) | Value::VerbatimString { .. } => {
            "a string".into()
        }
        Value::Array(items) => format!("an array of {}", items.len()),
        Value::Boolean(b) => format!("the boolean {b}"),
        _ => "another type".into(),
    }
}

/// One value of a reply, with where it sits (for errors).
pub(super) struct Field {
    /// The script that replied.
    script: &'static str,
    /// The field's name, as the script's header gives it.
    name: String,
    /// The value.
    value: Value,
}

impl Field {
    /// The whole reply of `script`, as one field named `name`.
    pub(super) fn whole(script: &'static str, name: &str, value: Value) -> Self {
        Field {
            script,
            name: name.to_string(),
            value,
        }
    }

    fn misfit(&self, expected: &str) -> RedisError {
        misfit(self.script, &self.name, expected, &self.value)
    }

    /// A count: an integer, not negative.
    pub(super) fn count(self) -> RedisResult<u64> {
        match self.value {
            Value::Int(i) if i >= 0 => Ok(i as u64),
            _ => Err(self.misfit("a count (an integer, not negative)")),
        }
    }

    /// Whether the value is the integer -1 (a script's "none" beside counts).
    pub(super) fn is_minus_one(&self) -> bool {
        matches!(self.value, Value::Int(-1))
    }

    /// A flag: the integer 0 or 1.
    pub(super) fn flag(self) -> RedisResult<bool> {
        match self.value {
            Value::Int(0) => Ok(false),
            Value::Int(1) => Ok(true),
            _ => Err(self.misfit("0 or 1")),
        }
    }

    /// A string, as bytes.
    pub(super) fn bytes(self) -> RedisResult<Vec<u8>> {
        match self.value {
            Value::BulkString(b) => Ok(b),
            Value::SimpleString(s) => Ok(s.into_bytes()),
            _ => Err(self.misfit("a string")),
        }
    }

    /// A UTF-8 string.
    pub(super) fn text(self) -> RedisResult<String> {
        let (script, name) = (self.script, self.name.clone());
        let bytes = self.bytes()?;
        String::from_utf8(bytes).map_err(|e| {
            let got = Value::BulkString(e.into_bytes());
            misfit(script, &name, "a UTF-8 string", &got)
        })
    }

    /// A UTF-8 string, or `None` for Lua's `false` (nil).
    pub(super) fn optional_text(self) -> RedisResult<Option<String>> {
        match self.value {
            Value::Nil | Value::Boolean(false) => Ok(None),
            _ => self.text().map(Some),
        }
    }

    /// An array of strings.
    pub(super) fn texts(self) -> RedisResult<Vec<String>> {
        self.list()?.into_iter().map(Field::text).collect()
    }

    /// An array of strings, as bytes.
    pub(super) fn byte_strings(self) -> RedisResult<Vec<Vec<u8>>> {
        self.list()?.into_iter().map(Field::bytes).collect()
    }

    /// An array, as its values (each named `<name>[i]`, from 1 as in Lua).
    fn list(self) -> RedisResult<Vec<Field>> {
        let Value::Array(items) = self.value else {
            return Err(self.misfit("an array"));
        };
        let (script, name) = (self.script, self.name);
        Ok(items
            .into_iter()
            .enumerate()
            .map(|(i, value)| Field {
                script,
                name: format!("{name}[{}]", i + 1),
                value,
            })
            .collect())
    }

    /// A flat array of rows of `width` values each (`{a1, b1, a2, b2, …}`), each row read
    /// with `names` (one per value).
    pub(super) fn rows(self, names: &[&'static str]) -> RedisResult<Vec<Fields>> {
        let width = names.len();
        let items = match self.value {
            Value::Array(items) if items.len() % width == 0 => items,
            _ => return Err(self.misfit(&format!("an array of rows of {width} values"))),
        };
        let mut values = items.into_iter();
        let mut rows = Vec::new();
        loop {
            let row: Vec<Value> = values.by_ref().take(width).collect();
            if row.is_empty() {
                return Ok(rows);
            }
            rows.push(Fields::new(self.script, names, row));
        }
    }

    /// An array of exactly `names.len()` values, read in order with those names.
    pub(super) fn fields(self, names: &[&'static str]) -> RedisResult<Fields> {
        match self.value {
            Value::Array(items) if items.len() == names.len() => {
                Ok(Fields::new(self.script, names, items))
            }
            _ => Err(self.misfit(&format!("an array of {}", names.len()))),
        }
    }
}

/// The values of one array reply (or one row of it), read in order under their names.
pub(super) struct Fields {
    /// The script that replied.
    script: &'static str,
    /// The layout: one name per value.
    names: Vec<&'static str>,
    /// The values not read yet.
    values: std::vec::IntoIter<Value>,
}

impl Fields {
    /// The reply of `script`, which must be an array with one value per name in `names`.
    pub(super) fn of(
        script: &'static str,
        names: &[&'static str],
        reply: Value,
    ) -> RedisResult<Self> {
        Field::whole(script, "reply", reply).fields(names)
    }

    fn new(script: &'static str, names: &[&'static str], items: Vec<Value>) -> Self {
        Fields {
            script,
            names: names.to_vec(),
            values: items.into_iter(),
        }
    }

    /// The next value, which must be the one named `name` (the layout's order).
    pub(super) fn next(&mut self, name: &str) -> Field {
        let listed = self.names.len() - self.values.len();
        match self.values.next() {
            Some(value) if self.names.get(listed) == Some(&name) => {
                Field::whole(self.script, name, value)
            }
            // A decoder that reads fields out of the layout's order: a bug, caught by the
            // decoders' tests; reported as a misfit rather than a panic.
            _ => Field::whole(self.script, &format!("{name} (out of order)"), Value::Nil),
        }
    }
}

/// Replies to feed the decoders' tests.
#[cfg(test)]
pub(super) mod sample {
    use redis::Value;

    /// A string.
    pub fn text(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// An array of integers.
    pub fn ints(values: &[i64]) -> Value {
        Value::Array(values.iter().map(|&i| Value::Int(i)).collect())
    }

    /// An array of strings.
    pub fn texts(values: &[&str]) -> Value {
        Value::Array(values.iter().map(|s| text(s)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::sample::text;
    use super::*;

    fn int(i: i64) -> Value {
        Value::Int(i)
    }

    const PAIR: &[&str] = &["a", "b"];

    #[test]
    fn a_reply_of_the_layouts_length_reads_in_order() {
        let mut f = Fields::of("t", PAIR, Value::Array(vec![int(3), text("x")])).unwrap();
        assert_eq!(f.next("a").count().unwrap(), 3);
        assert_eq!(f.next("b").text().unwrap(), "x");
    }

    #[test]
    fn a_short_or_long_reply_or_no_array_is_an_error_naming_the_script() {
        for reply in [
            Value::Array(vec![int(1)]),
            Value::Array(vec![int(1), int(2), int(3)]),
            int(1),
            Value::Nil,
        ] {
            let e = Fields::of("remove_ids", PAIR, reply).err().unwrap();
            assert_eq!(e.kind(), ErrorKind::UnexpectedReturnType);
            assert!(e.to_string().contains("remove_ids"), "{e}");
        }
    }

    #[test]
    fn a_field_of_another_type_is_an_error_naming_it() {
        let mut f = Fields::of("t", PAIR, Value::Array(vec![text("1"), int(-1)])).unwrap();
        let e = f.next("a").count().unwrap_err();
        assert!(e.to_string().contains("t: `a`"), "{e}");
        let e = f.next("b").count().unwrap_err();
        assert!(e.to_string().contains("`b`"), "{e}");
        assert!(Field::whole("t", "x", int(2)).flag().is_err());
        assert!(Field::whole("t", "x", int(1)).text().is_err());
        assert!(Field::whole("t", "x", text("1")).texts().is_err());
        let not_utf8 = Value::BulkString(vec![0xff]);
        assert!(Field::whole("t", "x", not_utf8).text().is_err());
    }

    #[test]
    fn reading_out_of_the_layouts_order_is_an_error() {
        let mut f = Fields::of("t", PAIR, Value::Array(vec![int(1), int(2)])).unwrap();
        assert!(f.next("b").count().is_err());
    }

    #[test]
    fn optional_text_is_none_for_nil_only() {
        let none = Field::whole("t", "x", Value::Nil).optional_text().unwrap();
        assert_eq!(none, None);
        let some = Field::whole("t", "x", text("7")).optional_text().unwrap();
        assert_eq!(some.as_deref(), Some("7"));
        assert!(Field::whole("t", "x", int(0)).optional_text().is_err());
    }

    #[test]
    fn rows_need_whole_rows() {
        const ROW: &[&str] = &["id", "n"];
        let flat = Value::Array(vec![text("a"), int(1), text("b"), int(2)]);
        let rows = Field::whole("t", "rows", flat).rows(ROW).unwrap();
        assert_eq!(rows.len(), 2);
        let ragged = Value::Array(vec![text("a"), int(1), text("b")]);
        assert!(Field::whole("t", "rows", ragged).rows(ROW).is_err());
        let empty = Field::whole("t", "rows", Value::Array(vec![]));
        assert!(empty.rows(ROW).unwrap().is_empty());
    }
}
