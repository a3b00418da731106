//! `report`: the memory and cost table (or JSON), the biggest saving first, with the plan's
//! warnings on stderr.

use super::{load_policies, queue_glob};
use crate::args::{Cli, ReportArgs};
use crate::error::{CliError, EXIT_FAILURE};
use crate::output::{print_out, warn};
use crate::render::table;
use bullsweep_core::ops::RunScope;
use bullsweep_core::ops::report::{MemoryReport, memory_report};

/// `report`: exit 1 when a queue could not be measured.
pub async fn report(cli: &Cli, args: &ReportArgs) -> Result<i32, CliError> {
    let set = load_policies(cli)?;
    let scope = RunScope {
        env: cli.env.clone(),
        queue_glob: queue_glob(args.queues.queue.as_deref())?,
        ..RunScope::default()
    };
    let mut con = super::connection::connect(cli, "report").await?;
    let report = memory_report(&mut con, cli.redis_url(), &set, scope).await?;
    for warning in &report.warnings {
        warn(cli.json, warning);
    }
    for (queue, error) in &report.errors {
        warn(cli.json, &format!("{queue}: {error}"));
    }
    print_out(cli.json, &report, || text(&report))?;
    Ok(if report.errors.is_empty() {
        0
    } else {
        EXIT_FAILURE
    })
}

/// Bytes as MiB with two decimals.
fn mib(bytes: f64) -> String {
    format!("{:.2}", bytes / 1_048_576.0)
}

fn text(report: &MemoryReport) -> String {
    let mut t = table(&[
        "queue",
        "tenant",
        "env",
        "policy",
        "MiB",
        "± MiB",
        "reclaimable MiB",
        "per month",
        "saved per month",
    ]);
    for q in &report.queues {
        t.add_row(vec![
            q.key.clone(),
            q.tenant.clone().unwrap_or_default(),
            q.env.clone().unwrap_or_default(),
            q.policy.clone(),
            mib(q.bytes),
            mib(q.error_bytes),
            mib(q.reclaimable_bytes),
            format!("{:.2}", q.monthly_cost),
            format!("{:.2}", q.reclaimable_monthly_cost),
        ]);
    }
    let tot = &report.totals;
    t.add_row(vec![
        "total".to_string(),
        String::new(),
        String::new(),
        String::new(),
        mib(tot.bytes),
        mib(tot.error_bytes),
        mib(tot.reclaimable_bytes),
        format!("{:.2}", tot.monthly_cost),
        format!("{:.2}", tot.reclaimable_monthly_cost),
    ]);
    format!(
        "{t}\npriced at {:.2} per GiB and month (cost.perGbMonth); ± is the bound of the sampling error",
        report.per_gb_month
    )
}
