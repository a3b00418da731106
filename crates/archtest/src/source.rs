//! A crate's source files and the module path each one holds.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// One parsed source file of a crate.
pub struct SourceFile {
    /// Path relative to the workspace root, e.g. `crates/core/src/engine/batch.rs`.
    pub rel: String,
    /// Module path inside its crate, e.g. `["engine", "batch"]`; empty for the crate root.
    pub module: Vec<String>,
    /// The parsed file.
    pub ast: syn::File,
}

/// The workspace root (two levels above this crate's manifest).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Parses one file; a file that does not parse fails the check with its name.
pub fn parse(root: &Path, path: &Path) -> (String, syn::File) {
    let rel = path
        .strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned();
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    (rel, ast)
}

/// The library (or binary) modules of one crate, by module path. Files under `src/bin/` are
/// left out: each is a crate of its own.
pub fn crate_modules(root: &Path, crate_dir: &str) -> BTreeMap<Vec<String>, SourceFile> {
    let src = root.join(crate_dir).join("src");
    let mut out = BTreeMap::new();
    for path in rust_files(&src) {
        let inner = path.strip_prefix(&src).unwrap_or(&path);
        let mut parts: Vec<String> = inner
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if parts.first().is_some_and(|p| p == "bin") {
            continue;
        }
        let file = parts.pop().unwrap_or_default();
        match file.as_str() {
            "lib.rs" | "main.rs" if parts.is_empty() => {}
            "mod.rs" => {}
            other => parts.push(other.trim_end_matches(".rs").to_string()),
        }
        let (rel, ast) = parse(root, &path);
        out.insert(
            parts.clone(),
            SourceFile {
                rel,
                module: parts,
                ast,
            },
        );
    }
    out
}
