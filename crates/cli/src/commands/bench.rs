//! `bench`: the harness in `bullsweep-bench`, on the Redis of `--redis` or a private one.

use crate::args::{BenchArgs, Cli, StrategyArg};
use crate::error::CliError;
use crate::output::print_text;
use bullsweep_bench::{BenchConfig, Strategy};

/// Runs the bench and prints its table (or JSON).
pub async fn run(cli: &Cli, args: &BenchArgs) -> Result<i32, CliError> {
    let strategy = match args.strategy {
        StrategyArg::Sweep => Strategy::Sweep,
        StrategyArg::Bull => Strategy::Bull,
        StrategyArg::Archive => Strategy::Archive,
        StrategyArg::Forget => Strategy::Forget,
        StrategyArg::Event => Strategy::Event,
        StrategyArg::BullEvent => Strategy::BullEvent,
        StrategyArg::Scale => Strategy::Scale,
        StrategyArg::Cluster => Strategy::Cluster,
        StrategyArg::DaemonCluster => Strategy::DaemonCluster,
        StrategyArg::Report => Strategy::Report,
        StrategyArg::Pending => Strategy::Pending,
        StrategyArg::Source => Strategy::Source,
        StrategyArg::Trim => Strategy::Trim,
        StrategyArg::Postgres => Strategy::Postgres,
        StrategyArg::PostgresRetention => Strategy::PostgresRetention,
        StrategyArg::PostgresForget => Strategy::PostgresForget,
        StrategyArg::Doctor => Strategy::Doctor,
        StrategyArg::Expire => Strategy::Expire,
    };
    let config = BenchConfig {
        jobs: args.jobs.unwrap_or(strategy.default_jobs()),
        job_bytes: args.job_bytes,
        strategy,
        rounds: args.rounds,
        rate: args.rate,
        seconds: args.seconds.unwrap_or(strategy.default_seconds()),
        compat_dir: args.compat_dir.clone(),
        redis: cli.redis.clone(),
        reload: args.reload,
        clean_limits: args.clean_limits.clone(),
        json: cli.json,
    };
    print_text(&bullsweep_bench::run(&config).await?)?;
    Ok(0)
}
