//! The fingerprints that prove a job unchanged between the moment bullsweep read it and the
//! script that acts on it. Each is computed here from what was read and recomputed in Redis
//! by its twin in `lua/prelude/fingerprint.lua`; the two must agree byte for byte.

/// The fingerprint the delete script recomputes to prove a job is unchanged since it was read:
/// SHA-1 of the job hash's `DUMP` serialization, a NUL byte, and the number of log lines.
/// `dumpFingerprint` in `lua/prelude/fingerprint.lua` computes the same.
pub fn job_fingerprint(dump: &[u8], log_count: usize) -> String {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(dump);
    sha.update(b"\0");
    sha.update(log_count.to_string().as_bytes());
    sha.digest().to_string()
}

/// The check `job_remove.lua` makes of a source-linked job before removing it: `data:` and
/// the SHA-1 of its `data` field as read, so that a job whose data (and so its key) changed
/// since its source was asked is left alone.
pub fn data_check(data: &[u8]) -> String {
    format!("data:{}", sha1_smol::Sha1::from(data).digest())
}

/// The change check for an oversized job, whose `DUMP` would hold Redis too long:
/// `shape:` + SHA-1 of its field names (sorted by bytes) with their lengths, and its log
/// count. `shapeFingerprint` in `lua/prelude/fingerprint.lua` computes the same.
pub fn shape_fingerprint(fields: &[(String, usize)], log_count: u64) -> String {
    let mut sorted: Vec<&(String, usize)> = fields.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut parts: Vec<String> = sorted.iter().map(|(k, n)| format!("{k}={n}")).collect();
    parts.push(format!("logs={log_count}"));
    format!("shape:{}", sha1_smol::Sha1::from(parts.join("\n")).digest())
}

/// SHA-1 over the values a scrub was computed from, in the encoding `scrubFingerprint` in
/// `lua/prelude/fingerprint.lua` recomputes: each value as `<byte length>:<bytes>` or `-`,
/// then the log count and lines, then each copy, joined by `|`.
pub fn scrub_fingerprint(
    fields: &[Option<String>],
    logs: &[String],
    copies: &[Option<String>],
) -> String {
    fn piece(v: Option<&str>) -> String {
        v.map_or_else(|| "-".to_string(), |v| format!("{}:{v}", v.len()))
    }
    let mut parts: Vec<String> = fields.iter().map(|f| piece(f.as_deref())).collect();
    parts.push(logs.len().to_string());
    parts.extend(logs.iter().map(|l| piece(Some(l))));
    parts.extend(copies.iter().map(|c| piece(c.as_deref())));
    sha1_smol::Sha1::from(parts.join("|")).digest().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_fingerprints_follow_content_and_log_count() {
        assert_eq!(job_fingerprint(b"abc", 0), job_fingerprint(b"abc", 0));
        assert_ne!(job_fingerprint(b"abc", 0), job_fingerprint(b"abc", 1));
        assert_ne!(job_fingerprint(b"abc", 0), job_fingerprint(b"abd", 0));
        // The Lua side hashes DUMP, a NUL byte and the log count the same way.
        assert_eq!(
            job_fingerprint(b"abc", 0),
            sha1_smol::Sha1::from(b"abc\x000").digest().to_string()
        );
    }

    #[test]
    fn fingerprint_encoding_is_unambiguous() {
        let a = scrub_fingerprint(&[Some("a|1:b".into()), None], &[], &[]);
        let b = scrub_fingerprint(&[Some("a".into()), Some("b".into())], &[], &[]);
        assert_ne!(a, b);
        assert_ne!(
            scrub_fingerprint(&[None], &["x".into()], &[]),
            scrub_fingerprint(&[None], &[], &[Some("x".into())])
        );
    }
}
