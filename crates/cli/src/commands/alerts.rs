//! `alerts`: the firing and pending alerts as a table (or a JSON list), what could not be
//! evaluated on stderr; exit 1 when any fires, for cron jobs and CI. It reads only, unless
//! `--save-readings` asks it to save the readings it took.

use crate::args::{AlertsArgs, Cli};
use crate::error::{CliError, EXIT_FAILURE};
use crate::output::print_out;
use crate::render::table;
use bullsweep_core::health::rules::{AlertState, Finding};
use bullsweep_core::ops::alerts::{alerts as evaluate, save_readings};

/// `alerts`: exit 1 when an alert fires or a queue could not be measured.
pub async fn alerts(cli: &Cli, args: &AlertsArgs) -> Result<i32, CliError> {
    let (set, scope, mut con) = super::survey(cli, &args.queues, "alerts").await?;
    let mut found = evaluate(&con, cli.redis_url(), &set, scope).await?;
    if args.save_readings
        && let Err(e) = save_readings(&mut con, cli.redis_url(), &found).await
    {
        found.notes.push(format!(
            "the readings were not saved ({}): evictions, memory and cost growth are judged from earlier readings only",
            e.message
        ));
    }
    super::warn_survey(cli.json, &found.notes, &found.errors);
    print_out(cli.json, &found.alerts, || text(&found.alerts))?;
    let firing = found.alerts.iter().any(|a| a.state == AlertState::Firing);
    Ok(if firing || !found.errors.is_empty() {
        EXIT_FAILURE
    } else {
        0
    })
}

fn text(alerts: &[Finding]) -> String {
    if alerts.is_empty() {
        return "no alert fires or is pending".to_string();
    }
    let mut t = table(&["state", "alert", "where", "value", "threshold", "summary"]);
    for a in alerts {
        t.add_row(vec![
            match a.state {
                AlertState::Firing => "firing".to_string(),
                AlertState::Pending => "pending".to_string(),
            },
            a.alert.to_string(),
            a.queue
                .clone()
                .or_else(|| a.node.clone())
                .unwrap_or_default(),
            short(a.value),
            short(a.threshold),
            a.summary.clone(),
        ]);
    }
    t.to_string()
}

/// A number as a person reads it: whole when it is, else four significant decimals.
fn short(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}
