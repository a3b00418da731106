//! Delivering `action: notify` notices: to the log (stderr) and/or a webhook, as JSON, with
//! retries and exponential backoff.

use crate::audit::AuditContext;
use crate::error::Error;
use bullsweep_policy::{NotifyTargets, Webhook};
use serde::Serialize;
use std::time::Duration;

/// What `action: notify` tells about one queue: the jobs past retention, which stay in place.
/// Its JSON is the audit context (policy, version, queue, tenant, environment, action, state,
/// compliance tag, run) followed by the count and the jobs.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// Who and what the notice is about, as its audit event records it.
    #[serde(flatten)]
    pub context: AuditContext,
    /// How many jobs are past retention.
    pub count: u64,
    /// The oldest of them (at most 1,000), with their failure reasons.
    pub jobs: Vec<NoticeJob>,
}

/// One job in a notice.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NoticeJob {
    /// Job id.
    pub id: String,
    /// Its `failedReason`, if any.
    pub failed_reason: Option<String>,
    /// Its `finishedOn`.
    pub finished_on: i64,
}

/// Attempts per webhook delivery.
const ATTEMPTS: u32 = 4;

/// Sends one notice to every configured target; the error says what failed.
pub async fn deliver(notice: &Notice, targets: &NotifyTargets) -> Result<(), Error> {
    let body = serde_json::to_string(notice).map_err(Error::notify)?;
    if targets.log {
        eprintln!("notify: {body}");
    }
    if let Some(hook) = targets.webhook.clone() {
        tokio::task::spawn_blocking(move || post_with_retries(&hook, &body))
            .await
            .map_err(|e| Error::notify(format!("webhook delivery stopped: {e}")))?
            .map_err(Error::notify)?;
    }
    Ok(())
}

/// POSTs the JSON body; a failed attempt (connection error or non-2xx) is retried after
/// 400 ms, 800 ms, 1.6 s.
fn post_with_retries(hook: &Webhook, body: &str) -> Result<(), String> {
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(true)
        .build()
        .new_agent();
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(200 << attempt));
        }
        let mut request = agent
            .post(&hook.url)
            .header("Content-Type", "application/json");
        for (name, value) in &hook.headers {
            request = request.header(name, value);
        }
        match request.send(body) {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!(
        "webhook {} failed after {ATTEMPTS} attempts: {last}",
        hook.url
    ))
}
