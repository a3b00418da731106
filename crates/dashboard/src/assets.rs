//! The stylesheet and script, embedded in the binary and served under a name holding the
//! hash of their content, cached for a year: a new build's pages name new files.

use bullsweep_core::daemon::http::Response;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// One embedded file.
struct Asset {
    stem: &'static str,
    ext: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: [Asset; 2] = [
    Asset {
        stem: "dashboard",
        ext: "css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/dashboard.css"),
    },
    Asset {
        stem: "dashboard",
        ext: "js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/dashboard.js"),
    },
];

fn paths() -> &'static [String; 2] {
    static PATHS: OnceLock<[String; 2]> = OnceLock::new();
    PATHS.get_or_init(|| {
        ASSETS.each_ref().map(|a| {
            let digest = Sha256::digest(a.body.as_bytes());
            let hash: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
            format!("/assets/{}.{hash}.{}", a.stem, a.ext)
        })
    })
}

/// The stylesheet's path.
pub fn css() -> &'static str {
    &paths()[0]
}

/// The script's path.
pub fn js() -> &'static str {
    &paths()[1]
}

/// The asset at `path`, if it is one.
pub fn serve(path: &str) -> Option<Response> {
    let i = paths().iter().position(|p| p == path)?;
    let a = &ASSETS[i];
    Some(
        Response::new(200, a.content_type, a.body)
            .with("cache-control", "public, max-age=31536000, immutable")
            .with("x-content-type-options", "nosniff"),
    )
}
