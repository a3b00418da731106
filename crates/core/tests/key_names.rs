//! One home for key names: nothing outside `crates/core/src/bullmq/` builds or parses a BullMQ
//! key (or one of bullsweep's own `bullsweep:` keys) by hand. This test reads the source of
//! every crate and fails on the fragments such code is made of.

use std::path::{Path, PathBuf};

/// Sub-key and state names, as they appear at the start (`":lock"`) or the end (`"{id}:lock"`)
/// of a string that builds or parses a key.
const NAMES: [&str; 12] = [
    "lock",
    "logs",
    "meta",
    "events",
    "processed",
    "failed",
    "completed",
    "dependencies",
    "unsuccessful",
    "wait",
    "active",
    "id",
];
/// Prefixes of key names inside a queue, and of bullsweep's own keys.
const PREFIXES: [&str; 4] = ["dn:", "de:", "repeat:", "bullsweep:"];

/// Whether a line of code builds or parses a key by hand.
fn builds_a_key(code: &str) -> bool {
    NAMES
        .iter()
        .any(|n| code.contains(&format!("\":{n}")) || code.contains(&format!(":{n}\"")))
        || PREFIXES
            .iter()
            .any(|p| code.contains(&format!("\"{p}")) || code.contains(&format!("}}{p}")))
        || (code.contains("format!(") && code.contains("job_prefix()"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_key_is_built_outside_bullmq() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let own = crates.join("core/src/bullmq");
    let mut files = Vec::new();
    for krate in ["base", "core", "cli", "bench", "testkit", "policy"] {
        rust_files(&crates.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 20, "the sources were found");
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&own)) {
        let text = std::fs::read_to_string(file).expect("readable source");
        // Unit tests may spell keys out as data.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let code_part = line.split("//").next().unwrap_or_default();
            if builds_a_key(code_part) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "key names built outside crates/core/src/bullmq (use bullmq::keys):\n{}",
        found.join("\n")
    );
}
