//! The architecture as tests: crates and modules import only downwards, no file imports in a
//! circle, no function is over 100 lines (80 in the daemon), no struct has over 15 fields
//! unless docs/ARCHITECTURE.md says why, and nothing tests a backend for equality. Each failure names the file and line to change.

use bullsweep_archtest::{comparisons, graph, imports, manifest, sizes, source};
use std::collections::BTreeSet;

/// The workspace's crates, each with the crates of ours it may depend on.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("crates/base", "bullsweep-base", &[]),
    ("crates/policy", "bullsweep-policy", &[]),
    (
        "crates/core",
        "bullsweep-core",
        &["bullsweep-base", "bullsweep-policy"],
    ),
    (
        "crates/testkit",
        "bullsweep-testkit",
        &["bullsweep-core", "bullsweep-base", "bullsweep-policy"],
    ),
    (
        "crates/bench",
        "bullsweep-bench",
        &[
            "bullsweep-core",
            "bullsweep-testkit",
            "bullsweep-base",
            "bullsweep-policy",
        ],
    ),
    (
        "crates/dashboard",
        "bullsweep-dashboard",
        &["bullsweep-core", "bullsweep-base", "bullsweep-policy"],
    ),
    (
        "crates/cli",
        "bullsweep",
        &[
            "bullsweep-core",
            "bullsweep-dashboard",
            "bullsweep-bench",
            "bullsweep-testkit",
            "bullsweep-base",
            "bullsweep-policy",
        ],
    ),
    ("crates/archtest", "bullsweep-archtest", &[]),
];

/// `bullsweep-core`'s top modules from the bottom up; a module may import its own layer's
/// files and any layer below, never one above. Modules on one line are one layer and may not
/// import each other unless `SIDEWAYS` allows it. Under them all is `bullsweep-base` (the
/// error type, the connection, the clock, cancellation, log lines, `text`), which the crate
/// root re-exports in part (`crate::error`, `crate::cancel`, `crate::text`).
const CORE_LAYERS: &[&[&str]] = &[
    &[""],
    &["bullmq", "postgres"],
    &["lock"],
    &["archive", "audit", "source"],
    &["bullmq_postgres"],
    &["notify"],
    &["engine", "health"],
    &["ops"],
    &["daemon"],
];

/// Imports between modules of one layer that the design allows.
const SIDEWAYS: &[(&str, &str)] = &[];

#[test]
fn crates_depend_only_downwards() {
    let root = source::workspace_root();
    let mut wrong = Vec::new();
    for (dir, name, allowed) in CRATES {
        for dep in manifest::own_dependencies(&root, dir) {
            if !allowed.contains(&dep.as_str()) {
                wrong.push(format!("{dir}/Cargo.toml: {name} depends on {dep}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_file_imports_in_a_circle() {
    let root = source::workspace_root();
    let mut found = Vec::new();
    for (dir, _, _) in CRATES {
        let edges = imports::edges(&source::crate_modules(&root, dir));
        for circle in graph::circles(&edges) {
            found.push(circle.join(" ⇄ "));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

fn layer_of(file: &str) -> Option<(usize, &'static str)> {
    let inner = file.strip_prefix("crates/core/src/")?;
    let top = inner.split('/').next().unwrap_or("");
    let top = top.trim_end_matches(".rs");
    let top = if top == "lib" { "" } else { top };
    CORE_LAYERS
        .iter()
        .enumerate()
        .find_map(|(i, l)| l.iter().find(|m| **m == top).map(|m| (i, *m)))
}

#[test]
fn core_modules_import_only_downwards() {
    let root = source::workspace_root();
    let edges = imports::edges(&source::crate_modules(&root, "crates/core"));
    let mut wrong = Vec::new();
    for (from, targets) in &edges {
        let Some((lf, mf)) = layer_of(from) else {
            wrong.push(format!("{from}: its module is in no layer of CORE_LAYERS"));
            continue;
        };
        // The crate root declares every module; its `pub use` re-exports point down anyway.
        if mf.is_empty() {
            continue;
        }
        for to in targets {
            let Some((lt, mt)) = layer_of(to) else {
                continue;
            };
            let upward = lt > lf || (lt == lf && mt != mf && !SIDEWAYS.contains(&(mf, mt)));
            if upward {
                wrong.push(format!("{from} imports {to} ({mf} → {mt})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

/// Every Rust file of the workspace: sources, tests, benches and binaries.
fn all_files() -> Vec<(String, syn::File)> {
    let root = source::workspace_root();
    source::rust_files(&root.join("crates"))
        .iter()
        .map(|p| source::parse(&root, p))
        .collect()
}

#[test]
fn no_function_is_over_100_lines_or_80_in_the_daemon() {
    let mut long = Vec::new();
    for (rel, ast) in all_files() {
        let limit = if rel.starts_with("crates/core/src/daemon/") {
            80
        } else {
            100
        };
        for f in sizes::measure(&ast).0 {
            if f.lines > limit {
                long.push(format!(
                    "{rel}:{}: fn {} is {} lines (limit {limit})",
                    f.line, f.name, f.lines
                ));
            }
        }
    }
    assert!(long.is_empty(), "functions too long:\n{}", long.join("\n"));
}

#[test]
fn no_struct_has_over_15_fields_unless_documented() {
    let root = source::workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap_or_default();
    let excused: BTreeSet<&str> = doc
        .split("## Structs over 15 fields")
        .nth(1)
        .map(|s| s.split("\n## ").next().unwrap_or(""))
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.strip_prefix("- `")?.split('`').next())
        .collect();
    let mut big = Vec::new();
    for (rel, ast) in all_files() {
        for s in sizes::measure(&ast).1 {
            if s.fields > 15 && !excused.contains(s.name.as_str()) {
                big.push(format!(
                    "{rel}:{}: struct {} has {} fields",
                    s.line, s.name, s.fields
                ));
            }
        }
    }
    assert!(
        big.is_empty(),
        "structs over 15 fields (split them, or say why under \"## Structs over 15 fields\" in docs/ARCHITECTURE.md):\n{}",
        big.join("\n")
    );
}

/// The queue library's Lua contracts and discovery (`bullmq::scripts`, `bullmq::discovery`)
/// are reached from the rest of core only through what `bullmq/mod.rs` exports (`scripts()`,
/// the typed outcomes, `discover_queues`): that surface is the seam a second backend
/// implements. Key names (`bullmq::keys`) stay one module everyone may name: their one home.
#[test]
fn the_queue_library_is_reached_through_one_seam() {
    let root = source::workspace_root();
    let modules = source::crate_modules(&root, "crates/core");
    let mut wrong = Vec::new();
    for (m, f) in &modules {
        if m.first().is_some_and(|t| t == "bullmq") {
            continue;
        }
        for path in imports::named_paths(&modules, m, &f.ast) {
            let inner = path.len() > 2
                && path[0] == "bullmq"
                && (path[1] == "scripts" || path[1] == "discovery");
            if inner {
                wrong.push(format!("{}: names {}", f.rel, path.join("::")));
            }
        }
    }
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "paths past bullmq's seam (export the item from bullmq/mod.rs and name it there):\n{}",
        wrong.join("\n")
    );
}

/// The file where a backend's capabilities are decided, by exhaustive matches.
const BACKEND_HOME: &str = "crates/policy/src/backend.rs";

/// Nothing outside [`BACKEND_HOME`] tests a backend for equality (`== Backend::Bull`,
/// `matches!(b, Backend::Bull)`): code asks a capability (`Backend::events`,
/// `Backend::is_default`, `Backend::library`) or matches every backend, so a new backend is a
/// compile error wherever it must be handled, and never silently taken for another.
#[test]
fn nothing_tests_a_backend_for_equality() {
    let root = source::workspace_root();
    let mut wrong = Vec::new();
    for path in source::rust_files(&root.join("crates")) {
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .to_string();
        if rel == BACKEND_HOME {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in comparisons::backend_comparisons(&text) {
            wrong.push(format!("{rel}:{line}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "equality tests on a backend (ask a capability in {BACKEND_HOME}, or match every backend):\n{}",
        wrong.join("\n")
    );
}
