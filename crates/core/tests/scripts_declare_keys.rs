//! Every script bullsweep runs declares at least one key, as ElastiCache Serverless (and, in
//! the next step, Redis Cluster routing) requires: each script's header names its `KEYS[1]`,
//! and each typed call passes a key. A script added without one fails here.

use std::path::Path;

#[test]
fn every_script_declares_a_key() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bullmq");
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("lua"))
        .expect("lua dir")
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "lua") {
            continue;
        }
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let lua = std::fs::read_to_string(&path).expect("lua");
        let header = lua.split("]]").next().unwrap_or_default();
        assert!(
            header.contains("KEYS[1]"),
            "{stem}.lua: its header names no KEYS[1]"
        );
        let wrapper = &stem;
        let rust = std::fs::read_to_string(root.join("scripts").join(format!("{wrapper}.rs")))
            .unwrap_or_else(|_| panic!("{stem}.lua has no scripts/{wrapper}.rs"));
        assert!(
            rust.contains(".key(")
                || rust.contains("audited(")
                || rust.contains(".invoke(con, &[")
                || rust.contains(".invoke(con, &keys"),
            "scripts/{wrapper}.rs passes no key to {stem}.lua"
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} scripts found");
}
