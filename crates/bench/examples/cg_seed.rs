//! Seeds the bench queue (`bull:bench`) of a Redis with `bullsweep bench`'s own seeder, for
//! instruction counts under callgrind: `cargo run -p bullsweep-bench --example cg_seed --
//! redis://127.0.0.1:PORT 20000 1500`. Nothing else runs, so a seed-only run is this alone.
use bullsweep_testkit::{SeedSpec, seed_queue};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).map_or("redis://127.0.0.1:6379", String::as_str);
    let jobs: u64 = args.get(2).map_or(Ok(20_000), |s| s.parse())?;
    let job_bytes: usize = args.get(3).map_or(Ok(1_500), |s| s.parse())?;
    let client = redis::Client::open(url)?;
    let mut con = client.get_multiplexed_async_connection().await?;
    // As the bench seeds: finished over the hour before, one second ago at the latest.
    let spec = SeedSpec {
        base: "bull:bench".into(),
        completed: jobs,
        failed: 0,
        spread_ms: 3_600_000,
        names: vec!["bench-job".into()],
        job_bytes,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    seed_queue(&mut con, &spec, now - 1_000).await?;
    Ok(())
}
