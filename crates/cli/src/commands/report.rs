//! `report`: the memory and cost table (or JSON), the biggest saving first, with the plan's
//! warnings on stderr.

use crate::args::{Cli, ReportArgs};
use crate::error::{CliError, EXIT_FAILURE};
use crate::output::{print_out, print_text};
use crate::render::{self, table};
use bullsweep_core::ops::report::{MemoryReport, memory_report};
use bullsweep_core::text::mib;

/// `report`: exit 1 when a queue could not be measured.
pub async fn report(cli: &Cli, args: &ReportArgs) -> Result<i32, CliError> {
    let (set, scope, con) = super::survey(cli, &args.queues, "report").await?;
    let report = memory_report(&con, cli.redis_url(), &set, scope).await?;
    super::warn_survey(cli.json, &report.warnings, &report.errors);
    if args.csv {
        print_text(&csv(&report))?;
    } else {
        print_out(cli.json, &report, || text(&report))?;
    }
    Ok(if report.errors.is_empty() {
        0
    } else {
        EXIT_FAILURE
    })
}

fn text(report: &MemoryReport) -> String {
    let mut t = table(&[
        "#",
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
    for (rank, q) in report.queues.iter().enumerate() {
        t.add_row(vec![
            (rank + 1).to_string(),
            render::queue_label(&q.key, q.backend),
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
        String::new(),
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
        "{t}\n{}; ± is the bound of the sampling error",
        priced(report)
    )
}

/// How the report priced its bytes, in words.
fn priced(report: &MemoryReport) -> String {
    let p = &report.price;
    let source = match (&p.preset, &p.as_of) {
        (Some(name), Some(as_of)) => format!("cost.preset {name}, price as of {as_of}"),
        _ => "cost.perGbMonth".to_string(),
    };
    let copies = match p.replicas {
        0 => String::new(),
        1 => ", times 2 for the primary and its replica (cost.replicas)".to_string(),
        n => format!(
            ", times {} for the primary and its {n} replicas (cost.replicas)",
            n + 1
        ),
    };
    format!(
        "priced at {:.2} per GiB and month ({source}){copies}",
        p.per_gb_month
    )
}

/// The classes of key the CSV has a column for, in order.
const CSV_CLASSES: [&str; 8] = [
    "jobs",
    "logs",
    "dedup",
    "sets",
    "events",
    "schedulers",
    "metrics",
    "queue",
];

/// One row per queue, in the report's order, with every size in bytes.
fn csv(report: &MemoryReport) -> String {
    let mut header: Vec<String> = [
        "rank",
        "key",
        "queue",
        "tenant",
        "env",
        "policy",
        "bytes",
        "errorBytes",
        "reclaimableBytes",
        "monthlyCost",
        "reclaimableMonthlyCost",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    header.extend(CSV_CLASSES.iter().map(|c| format!("{c}Bytes")));
    let mut out = header.join(",");
    out.push('\n');
    for (rank, q) in report.queues.iter().enumerate() {
        let mut row = vec![
            (rank + 1).to_string(),
            field(&q.key),
            field(&q.queue),
            field(q.tenant.as_deref().unwrap_or_default()),
            field(q.env.as_deref().unwrap_or_default()),
            field(&q.policy),
            format!("{:.0}", q.bytes),
            format!("{:.0}", q.error_bytes),
            format!("{:.0}", q.reclaimable_bytes),
            format!("{:.4}", q.monthly_cost),
            format!("{:.4}", q.reclaimable_monthly_cost),
        ];
        for class in CSV_CLASSES {
            let bytes = q.memory.classes.get(class).map_or(0.0, |e| e.bytes);
            row.push(format!("{bytes:.0}"));
        }
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}
