//! Which of the workspace's own crates each crate depends on, read from its `Cargo.toml`.

use std::collections::BTreeSet;
use std::path::Path;

/// The workspace crates (`bullsweep-*`) that `crate_dir`'s `[dependencies]` name; dev- and
/// build-dependencies are left out, since they do not make a layer.
pub fn own_dependencies(root: &Path, crate_dir: &str) -> BTreeSet<String> {
    let path = root.join(crate_dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut section = String::new();
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_string();
        } else if section == "dependencies"
            && let Some((name, _)) = line.split_once('=')
            && name.trim().starts_with("bullsweep")
        {
            out.insert(
                name.trim()
                    .split('.')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    out
}
