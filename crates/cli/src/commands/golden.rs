//! `test`: each test file's cases run against its policy file, with no Redis; `--init`
//! writes a starter file from the queues a Redis holds.

use super::{connection, load_policies};
use crate::args::{Cli, TestArgs};
use crate::error::{CliError, EXIT_FAILURE};
use crate::output::{print_out, print_text};
use crate::render::{self, FileResults};
use bullsweep_base::clock::now_ms;
use bullsweep_core::engine::Unmanaged;
use bullsweep_core::ops;
use std::path::{Path, PathBuf};

/// Runs `bullsweep test`.
pub async fn run(cli: &Cli, args: &TestArgs) -> Result<i32, CliError> {
    if args.init {
        return init(cli).await;
    }
    let now = now_ms();
    let mut results = Vec::new();
    for file in &args.files {
        let golden = ops::load_golden_file(file)?;
        let policy = policy_path(file, golden.policy.as_deref(), &cli.config);
        let set = ops::load_policy_file(&policy).map_err(|e| match &golden.policy {
            // Named by the test file: say so, rather than point at --config.
            Some(named) => {
                let mut e = CliError::from(e);
                e.error.message =
                    format!("{}: `policy: {named}`: {}", file.display(), e.error.message);
                e.with_hint("`policy:` is relative to the test file's folder")
            }
            None => CliError::from(e),
        })?;
        let cases = bullsweep_policy::run_cases(&set, &golden, cli.env.as_deref(), now);
        results.push(FileResults {
            file: file.display().to_string(),
            policy: policy.display().to_string(),
            cases,
        });
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, render::golden_junit(&results))
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    print_out(cli.json, &render::golden_json(&results), || {
        render::golden_text(&results)
    })?;
    let failed = results.iter().flat_map(|r| &r.cases).any(|c| !c.passed());
    Ok(if failed { EXIT_FAILURE } else { 0 })
}

/// The policy file a test file tests: its `policy:`, relative to the test file's folder,
/// else `--config`.
fn policy_path(test_file: &Path, named: Option<&str>, config: &Path) -> PathBuf {
    match named {
        Some(p) => test_file.parent().unwrap_or(Path::new(".")).join(p),
        None => config.to_path_buf(),
    }
}

/// `test --init`: one case per queue found in Redis.
async fn init(cli: &Cli) -> Result<i32, CliError> {
    let set = load_policies(cli)?;
    let mut con = connection::connect(cli, "test").await?;
    let inventory = ops::discover(&mut con, cli.redis_url(), &set, cli.env.as_deref()).await?;
    // Queues left out for a reason of their own (a Cluster prefix with no hash tag) are
    // matched by a layout: only those no layout matches are `unmanaged` to a test.
    let unmatched: Vec<String> = inventory
        .unmanaged
        .into_iter()
        .filter(|u| u.why == Unmanaged::NoLayout)
        .map(|u| u.base)
        .collect();
    let config = cli.config.display().to_string();
    let text = render::golden_starter(
        &set,
        &config,
        cli.env.as_deref(),
        &inventory.managed,
        &unmatched,
    );
    print_text(&text)?;
    Ok(0)
}
