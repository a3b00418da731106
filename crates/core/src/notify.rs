//! Delivering `action: notify` notices: to the log (stderr) and/or a webhook, as JSON, with
//! retries and exponential backoff. Only a run delivers (`ops::run`, after its sweep): a
//! notice exists only where a run claimed its jobs in the queue's record of noticed jobs,
//! which a read's connection cannot write.

use crate::audit::AuditContext;
use crate::bullmq::NoticeClaim;
use crate::error::Error;
use bullsweep_policy::{NotifyTargets, Webhook};
use serde::Serialize;
use std::time::Duration;

/// What `action: notify` tells about one state of one queue: the jobs past retention that
/// no notice has named yet (or whose reminder is due), which stay in place. Its JSON is the
/// audit context (policy, version, queue, tenant, environment, action, state, compliance tag,
/// run) followed by the count and the jobs.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// Who and what the notice is about, as its audit event records it.
    #[serde(flatten)]
    pub context: AuditContext,
    /// How many jobs the notice names (each listed in `jobs`).
    pub count: u64,
    /// The jobs (at most 1,000), with their ids and failure reasons as the queue's `pii:`
    /// rules let a viewer see them.
    pub jobs: Vec<NoticeJob>,
    /// The run's claims on the jobs in the queue's record, settled once the notice is
    /// delivered (or could not be).
    #[serde(skip)]
    pub claims: Vec<NoticeClaim>,
    /// The state of the queue's report it counts in (`failed`, `delayed`,
    /// `failed:source`), also the place of its jobs in the record.
    #[serde(skip)]
    pub place: String,
}

impl Notice {
    /// The ids of the jobs the notice names, as they are, in the order of `jobs` (which shows
    /// them as the queue's `pii:` rules let a viewer read them): what its audit event records.
    pub fn job_ids(&self) -> Vec<String> {
        self.claims.iter().map(|c| c.id.clone()).collect()
    }
}

/// One job in a notice.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NoticeJob {
    /// Its id as the queue's `pii:` rules let a viewer read free text: the patterns and the
    /// values the paths find in its `data` and `returnvalue` replaced where they stand, the
    /// rest kept (as it is on a queue without rules; [`Notice::job_ids`] has it as it is).
    pub id: String,
    /// Its `failedReason` as a viewer sees it (`[redacted]` on a queue without `pii:`
    /// rules), or for source-linked cleanup why its source let it go; left out when it has
    /// none (a pending job that never failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_reason: Option<String>,
    /// When it finished, or for a pending job when it was added.
    #[serde(flatten)]
    pub at: NoticeTime,
}

/// The time a notice gives a job, by the field BullMQ keeps it in.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum NoticeTime {
    /// A finished job's `finishedOn`.
    FinishedOn(i64),
    /// A pending job's `timestamp` (when it was added; it has no `finishedOn`).
    Timestamp(i64),
}

/// Attempts per webhook delivery.
const ATTEMPTS: u32 = 4;

/// Sends one notice to every configured target; the error says what failed. The webhook
/// goes first: a notice it did not take is noticed again by the next run, so the log line is
/// written only once the webhook has it (each job is logged once, as it is posted once).
pub(crate) async fn deliver(notice: &Notice, targets: &NotifyTargets) -> Result<(), Error> {
    let body = serde_json::to_string(notice).map_err(Error::notify)?;
    let body = match targets.webhook.clone() {
        Some(hook) => {
            tokio::task::spawn_blocking(move || post_with_retries(&hook, &body).map(|()| body))
                .await
                .map_err(|e| Error::notify(format!("webhook delivery stopped: {e}")))?
                .map_err(Error::notify)?
        }
        None => body,
    };
    if targets.log {
        eprintln!("notify: {body}");
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
