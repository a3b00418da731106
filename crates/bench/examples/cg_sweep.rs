//! The bench's bullsweep contender (`engine::sweep` with the bench policy, as `bullsweep run`
//! does it) with a chosen time budget per call, for instruction counts under callgrind:
//! `cargo run -p bullsweep-bench --example cg_sweep -- redis://127.0.0.1:PORT 2000`.
//! Why a budget: under callgrind Redis runs ~50x slower, so with the default 2 ms the batch
//! sizer falls to its 16-job floor and each job carries ~1/16 of a call's fixed cost, where a
//! native run makes calls of ~200 jobs. A budget scaled by the slowdown gives native-sized calls.
use bullsweep_core::engine::{self, Mode, SweepOptions};

const POLICY: &str = "version: 1\npolicies:\n  - { name: bench, queueNamePattern: bench, rules: { completed: { maxAge: 1ms } } }\n";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).map_or("redis://127.0.0.1:6379", String::as_str);
    let budget_us: u64 = args.get(2).map_or(Ok(2_000), |s| s.parse())?;
    let mut con = bullsweep_base::connect::connect_url(url, "bullsweep-cg").await?;
    let set = bullsweep_policy::compile("bench", POLICY)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    let opts = SweepOptions::at(now, budget_us, "cg");
    let report = engine::sweep(&mut con, &set, &opts, Mode::Run, &engine::NoObserver).await?;
    println!("removed {}", report.done());
    Ok(())
}
