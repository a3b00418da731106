//! A JSON text read as a stream of events, with no recursion: the nesting lives in a `Vec`, so
//! a document of any depth is read in constant stack. A recursive parser has to stop
//! somewhere (serde_json stops at 128 levels), and data that stops the reader must not stop an
//! erasure: job data is whatever the producer wrote.

/// One step from a container to a member: an object's key or an array's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg<'a> {
    /// An object member's key (unescaped).
    Key(&'a str),
    /// An array element's index.
    Index(usize),
}

/// A value that holds no other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar<'a> {
    /// A string (unescaped).
    Str(&'a str),
    /// A number, written as serde_json writes it (so `1.0e2` reads `100.0`, as a parsed value
    /// prints).
    Num(&'a str),
    /// `true`, `false` or `null`.
    Other,
}

/// What a walk tells its reader, in document order.
pub trait Visit {
    /// A member starts: its value follows (its scalar, or its own members), then `leave`.
    fn enter(&mut self, seg: Seg<'_>);
    /// A value that holds no other.
    fn scalar(&mut self, value: Scalar<'_>);
    /// The member last entered ends.
    fn leave(&mut self);
}

/// The text is not one JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

/// An open container.
enum Frame {
    Object,
    /// The index of the element being read.
    Array(usize),
}

/// Reads `text` as one JSON value (whitespace around it allowed), telling `visit` what it
/// holds; fails on anything that is not exactly one JSON value.
pub fn walk(text: &[u8], visit: &mut impl Visit) -> Result<(), Malformed> {
    let text = std::str::from_utf8(text).map_err(|_| Malformed)?.as_bytes();
    let mut r = Reader {
        text,
        at: 0,
        buf: String::new(),
    };
    let mut stack: Vec<Frame> = Vec::new();
    'value: loop {
        r.skip_ws();
        match r.peek()? {
            b'{' => {
                r.at += 1;
                r.skip_ws();
                if r.peek()? == b'}' {
                    r.at += 1;
                } else {
                    stack.push(Frame::Object);
                    r.member_key(visit)?;
                    continue 'value;
                }
            }
            b'[' => {
                r.at += 1;
                r.skip_ws();
                if r.peek()? == b']' {
                    r.at += 1;
                } else {
                    stack.push(Frame::Array(0));
                    visit.enter(Seg::Index(0));
                    continue 'value;
                }
            }
            b'"' => {
                let s = r.string()?;
                visit.scalar(Scalar::Str(s));
            }
            b'-' | b'0'..=b'9' => {
                let n = r.number()?;
                visit.scalar(Scalar::Num(&n));
            }
            _ => {
                r.literal()?;
                visit.scalar(Scalar::Other);
            }
        }
        // A value ended: close what it ends, until the next member starts.
        loop {
            let Some(top) = stack.last_mut() else {
                r.skip_ws();
                return if r.at == r.text.len() {
                    Ok(())
                } else {
                    Err(Malformed)
                };
            };
            visit.leave();
            r.skip_ws();
            match (top, r.peek()?) {
                (Frame::Object, b',') => {
                    r.at += 1;
                    r.skip_ws();
                    r.member_key(visit)?;
                    continue 'value;
                }
                (Frame::Array(i), b',') => {
                    r.at += 1;
                    *i += 1;
                    visit.enter(Seg::Index(*i));
                    continue 'value;
                }
                (Frame::Object, b'}') | (Frame::Array(_), b']') => {
                    r.at += 1;
                    stack.pop();
                }
                _ => return Err(Malformed),
            }
        }
    }
}

/// The text and where reading stands.
struct Reader<'t> {
    text: &'t [u8],
    at: usize,
    /// Where an escaped string is unescaped.
    buf: String,
}

impl Reader<'_> {
    fn peek(&self) -> Result<u8, Malformed> {
        self.text.get(self.at).copied().ok_or(Malformed)
    }

    fn skip_ws(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// `"key"` and `:`, then tells `visit` the member starts.
    fn member_key(&mut self, visit: &mut impl Visit) -> Result<(), Malformed> {
        if self.peek()? != b'"' {
            return Err(Malformed);
        }
        let key = self.string()?.to_string();
        self.skip_ws();
        if self.peek()? != b':' {
            return Err(Malformed);
        }
        self.at += 1;
        visit.enter(Seg::Key(&key));
        Ok(())
    }

    /// A string starting at the opening quote, unescaped.
    fn string(&mut self) -> Result<&str, Malformed> {
        self.at += 1;
        let start = self.at;
        // The common case: no escape, the text itself (already checked to be UTF-8).
        while let Some(&b) = self.text.get(self.at) {
            match b {
                b'"' => {
                    self.at += 1;
                    return std::str::from_utf8(&self.text[start..self.at - 1])
                        .map_err(|_| Malformed);
                }
                b'\\' => break,
                0..=0x1f => return Err(Malformed),
                _ => self.at += 1,
            }
        }
        self.buf.clear();
        self.buf
            .push_str(std::str::from_utf8(&self.text[start..self.at]).map_err(|_| Malformed)?);
        loop {
            let b = self.peek()?;
            self.at += 1;
            match b {
                b'"' => return Ok(&self.buf),
                b'\\' => {
                    let e = self.peek()?;
                    self.at += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(Malformed),
                    };
                    self.buf.push(c);
                }
                0..=0x1f => return Err(Malformed),
                _ => {
                    // Copy the whole UTF-8 sequence this byte starts.
                    let len = match b {
                        0xf0.. => 4,
                        0xe0.. => 3,
                        0xc0.. => 2,
                        _ => 1,
                    };
                    let from = self.at - 1;
                    let piece = self.text.get(from..from + len).ok_or(Malformed)?;
                    self.buf
                        .push_str(std::str::from_utf8(piece).map_err(|_| Malformed)?);
                    self.at = from + len;
                }
            }
        }
    }

    /// The four hex digits after `\u` (and a low surrogate's escape after a high one).
    fn unicode_escape(&mut self) -> Result<char, Malformed> {
        let first = self.hex4()?;
        let code = match first {
            0xd800..=0xdbff => {
                if self.text.get(self.at..self.at + 2) != Some(b"\\u") {
                    return Err(Malformed);
                }
                self.at += 2;
                let low = self.hex4()?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return Err(Malformed);
                }
                0x10000 + ((first - 0xd800) << 10) + (low - 0xdc00)
            }
            0xdc00..=0xdfff => return Err(Malformed),
            c => c,
        };
        char::from_u32(code).ok_or(Malformed)
    }

    fn hex4(&mut self) -> Result<u32, Malformed> {
        let digits = self.text.get(self.at..self.at + 4).ok_or(Malformed)?;
        let text = std::str::from_utf8(digits).map_err(|_| Malformed)?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Malformed);
        }
        self.at += 4;
        u32::from_str_radix(text, 16).map_err(|_| Malformed)
    }

    /// A number, checked against JSON's grammar, as serde_json writes its value.
    fn number(&mut self) -> Result<String, Malformed> {
        let start = self.at;
        let digits = |r: &mut Self| {
            let from = r.at;
            while matches!(r.text.get(r.at), Some(b'0'..=b'9')) {
                r.at += 1;
            }
            r.at - from
        };
        if self.text.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let int_start = self.at;
        let int_len = digits(self);
        if int_len == 0 || (int_len > 1 && self.text[int_start] == b'0') {
            return Err(Malformed);
        }
        if self.text.get(self.at) == Some(&b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return Err(Malformed);
            }
        }
        if matches!(self.text.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.text.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return Err(Malformed);
            }
        }
        let token = std::str::from_utf8(&self.text[start..self.at]).map_err(|_| Malformed)?;
        serde_json::from_str::<serde_json::Number>(token)
            .map(|n| n.to_string())
            .map_err(|_| Malformed)
    }

    fn literal(&mut self) -> Result<(), Malformed> {
        for word in [&b"true"[..], b"false", b"null"] {
            if self.text[self.at..].starts_with(word) {
                self.at += word.len();
                return Ok(());
            }
        }
        Err(Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes the events as a flat list, to compare with what serde_json reads.
    #[derive(Default)]
    struct Log {
        path: Vec<String>,
        out: Vec<String>,
    }

    impl Visit for Log {
        fn enter(&mut self, seg: Seg<'_>) {
            self.path.push(match seg {
                Seg::Key(k) => format!(".{k}"),
                Seg::Index(i) => format!("[{i}]"),
            });
        }
        fn scalar(&mut self, value: Scalar<'_>) {
            let v = match value {
                Scalar::Str(s) => format!("{s:?}"),
                Scalar::Num(n) => n.to_string(),
                Scalar::Other => "lit".into(),
            };
            self.out.push(format!("{}={v}", self.path.concat()));
        }
        fn leave(&mut self) {
            self.path.pop();
        }
    }

    /// The same flat list, from serde_json's parse (recursive: for shallow documents only).
    fn flat(v: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => m.iter().for_each(|(k, v)| {
                path.push(format!(".{k}"));
                flat(v, path, out);
                path.pop();
            }),
            serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| {
                path.push(format!("[{i}]"));
                flat(v, path, out);
                path.pop();
            }),
            serde_json::Value::String(s) => out.push(format!("{}={s:?}", path.concat())),
            serde_json::Value::Number(n) => out.push(format!("{}={n}", path.concat())),
            _ => out.push(format!("{}=lit", path.concat())),
        }
    }

    #[test]
    fn reads_what_serde_json_reads() {
        for text in [
            r#"{"user":{"id":"u42","tags":["a","b"]},"n":-1.5e3,"z":0,"t":true,"x":null}"#,
            r#" [ {} , [] , "\u00e9\ud83d\ude00\n\"\\\/" , 10 , 1E2 ] "#,
            r#""top""#,
            "12",
            r#"{"a\u0041":{"":[[[1]]]}}"#,
        ] {
            let mut log = Log::default();
            walk(text.as_bytes(), &mut log).expect(text);
            let mut want = Vec::new();
            flat(
                &serde_json::from_str(text).expect(text),
                &mut Vec::new(),
                &mut want,
            );
            assert_eq!(log.out, want, "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_json() {
        for text in [
            "",
            "{",
            "[1,]",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            "01",
            "1.",
            "-",
            "1e",
            "tru",
            r#""\ud800""#,
            r#""\x""#,
            "\"a\u{1}\"",
            "[1] 2",
            "{1:2}",
            "[1}",
        ] {
            assert_eq!(
                walk(text.as_bytes(), &mut Log::default()),
                Err(Malformed),
                "{text}"
            );
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_err(),
                "{text}"
            );
        }
        assert_eq!(walk(b"\"\xff\"", &mut Log::default()), Err(Malformed));
    }

    #[test]
    fn any_depth_is_read() {
        let depth = 200_000;
        let text = format!(
            "{}{{\"id\":\"u42\"}}{}",
            "{\"a\":[".repeat(depth),
            "]}".repeat(depth)
        );
        let mut log = Log::default();
        walk(text.as_bytes(), &mut log).expect("deep");
        assert_eq!(log.out.len(), 1);
        assert!(log.out[0].ends_with("[0].id=\"u42\""));
        assert!(log.path.is_empty());
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_err());
    }
}
