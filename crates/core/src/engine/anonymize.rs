//! `action: anonymize`: read the selected jobs, scrub their PII in the client, and write the
//! new values back with a compare-and-set script that also marks each job, so a job is
//! scrubbed at most once and a job that changed in between is left for a later run.

use super::actions::AnonymizeJobs;
use super::batch::{BatchSizer, run_batches};
use super::report::Skipped;
use super::work::StateWork;
use crate::audit::AuditAction;
use crate::bullmq::fingerprint::scrub_fingerprint;
use crate::bullmq::{QueueKeys, ScrubbedJob};
use crate::error::Result;
use bullsweep_policy::{PiiRules, Selection, Unreadable};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// The field that marks a scrubbed job, holding when it was scrubbed (ms since the epoch).
/// BullMQ reads job hashes by field name and ignores fields it does not know.
pub const ANONYMIZED_MARKER: &str = "bullsweepAnonymizedAt";

/// A job still to scrub: its id, its score, and its parent's key when it has one.
type ToScrub<'r> = (&'r str, i64, Option<String>);

/// Jobs read per pipelined round trip.
const READ_JOBS: usize = 100;
/// Selected jobs listed per page of a prefix.
const PAGE_JOBS: u64 = 1_000;

/// The fields the fingerprint covers, in its order.
const SCRUBBED_FIELDS: [&str; 4] = ["data", "returnvalue", "failedReason", "stacktrace"];

/// The scrubbed job for what was read: new values only for what changed. [`Unreadable`]
/// when the paths cannot be applied to its `data`, `returnvalue` or a copy of its return
/// value (counted as malformed): such a job is left unwritten and unmarked, never marked as
/// scrubbed.
fn scrub(
    rules: &PiiRules,
    id: &str,
    score: i64,
    fields: Vec<Option<String>>,
    logs: Vec<String>,
    copies: Vec<(String, String, Option<String>)>,
) -> Result<ScrubbedJob, Unreadable> {
    let mut job = ScrubbedJob {
        id: id.to_string(),
        score,
        ..ScrubbedJob::default()
    };
    for (name, value) in SCRUBBED_FIELDS.iter().zip(&fields) {
        let Some(value) = value else { continue };
        if let Some(new) = rules.scrub_field(name, value)? {
            job.fields.push((name.to_string(), new));
        }
    }
    let scrubbed_logs: Vec<Option<String>> = logs.iter().map(|l| rules.scrub_text(l)).collect();
    if scrubbed_logs.iter().any(Option::is_some) {
        job.logs = Some(
            scrubbed_logs
                .into_iter()
                .zip(&logs)
                .map(|(new, old)| new.unwrap_or_else(|| old.clone()))
                .collect(),
        );
    }
    // Copies are fingerprinted only when written, so an unrelated copy cannot block the job.
    let mut written_copies = Vec::new();
    for (key, field, value) in copies {
        let new = match value.as_deref() {
            Some(v) if QueueKeys::is_processed_copy(&key) => rules.scrub_json(v)?,
            Some(v) => rules.scrub_text(v),
            None => None,
        };
        if let Some(new) = new {
            written_copies.push(value);
            job.copies.push((key, field, new));
        }
    }
    job.fingerprint = scrub_fingerprint(&fields, &logs, &written_copies);
    Ok(job)
}

impl StateWork<'_> {
    /// Anonymizes the selected prefix of the set (the oldest jobs), page by page. Jobs stay
    /// in the set, so pages move forward by index.
    pub(super) async fn anonymize_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        rules: &PiiRules,
        sel: &Selection,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let (mut offset, mut done) = (0u64, 0u64);
        loop {
            let rows = self.text_page(con, sel, offset, PAGE_JOBS).await?;
            if rows.is_empty() || self.opts.stopping() {
                return Ok(done);
            }
            done += self.anonymize_rows(con, rules, &rows, skipped).await?;
            offset += rows.len() as u64;
        }
    }

    /// How many jobs of the selected prefix an earlier run scrubbed (they carry the
    /// marker), so that a plan does not count them.
    pub(super) async fn count_anonymized<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
    ) -> RedisResult<u64> {
        let (mut offset, mut marked) = (0u64, 0u64);
        loop {
            let rows = self.text_page(con, sel, offset, PAGE_JOBS).await?;
            if rows.is_empty() {
                return Ok(marked);
            }
            let ids: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
            marked += self.count_marked(con, &ids).await?;
            offset += rows.len() as u64;
        }
    }

    /// How many of the given jobs carry the anonymized marker.
    pub(super) async fn count_marked<C: ConnectionLike>(
        &self,
        con: &mut C,
        ids: &[&str],
    ) -> RedisResult<u64> {
        let mut marked = 0;
        for chunk in ids.chunks(READ_JOBS) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.hexists(self.keys.job(id), ANONYMIZED_MARKER);
            }
            let seen: Vec<bool> = with_retry!(pipe.query_async::<Vec<bool>>(con))?;
            marked += seen.into_iter().filter(|m| *m).count() as u64;
        }
        Ok(marked)
    }

    /// Reads, scrubs and writes back the given jobs. Returns how many were scrubbed.
    pub(super) async fn anonymize_rows<C: ConnectionLike>(
        &self,
        con: &mut C,
        rules: &PiiRules,
        rows: &[(String, i64)],
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let audit_ctx = self
            .audit
            .clone()
            .with_action(AuditAction::Anonymize)
            .to_json();
        let mut sizer = BatchSizer::new(self.opts.budget_us);
        let mut done = 0;
        for chunk in rows.chunks(READ_JOBS) {
            let todo = self.still_to_scrub(con, chunk, skipped).await?;
            if todo.is_empty() {
                continue;
            }
            let jobs = self.read_and_scrub(con, rules, todo, skipped).await?;
            done += self
                .write_scrubbed(con, &jobs, &audit_ctx, &mut sizer, skipped)
                .await?;
        }
        Ok(done)
    }

    /// The cheap look first (marker, lock and parent), so that jobs scrubbed by an earlier run
    /// cost one small read: the jobs of `chunk` still to scrub, with their parent's key; the
    /// others counted in `skipped`.
    async fn still_to_scrub<'r, C: ConnectionLike>(
        &self,
        con: &mut C,
        chunk: &'r [(String, i64)],
        skipped: &mut Skipped,
    ) -> Result<Vec<ToScrub<'r>>> {
        let mut pipe = redis::pipe();
        for (id, _) in chunk {
            pipe.cmd("HMGET")
                .arg(self.keys.job(id))
                .arg("finishedOn")
                .arg("parentKey")
                .arg(ANONYMIZED_MARKER)
                .exists(self.keys.lock(id));
        }
        type Head = (Vec<Option<String>>, bool);
        let heads: Vec<Head> = with_retry!(pipe.query_async::<Vec<Head>>(con))?;
        let mut todo = Vec::new();
        for ((id, score), (head, locked)) in chunk.iter().zip(heads) {
            let mut head = head.into_iter();
            let (finished, parent, marked) = (head.next(), head.next(), head.next());
            if locked {
                skipped.locked += 1;
            } else if marked.flatten().is_some() {
                skipped.already_anonymized += 1;
            } else if finished.flatten().is_none() {
                skipped.malformed += 1;
            } else {
                todo.push((
                    id.as_str(),
                    *score,
                    parent.flatten().filter(|p| !p.is_empty()),
                ));
            }
        }
        Ok(todo)
    }

    /// Reads the jobs to scrub whole (fields, logs, the copies in their parent) and scrubs
    /// them; a job whose data cannot be scrubbed is counted `malformed` and left as it is.
    async fn read_and_scrub<C: ConnectionLike>(
        &self,
        con: &mut C,
        rules: &PiiRules,
        todo: Vec<ToScrub<'_>>,
        skipped: &mut Skipped,
    ) -> Result<Vec<ScrubbedJob>> {
        let mut pipe = redis::pipe();
        for (id, _, parent) in &todo {
            let key = self.keys.job(id);
            pipe.cmd("HMGET")
                .arg(&key)
                .arg(&SCRUBBED_FIELDS[..])
                .lrange(self.keys.logs(id), 0, -1);
            if let Some(parent) = parent {
                let copies = QueueKeys::copies_in_parent(parent);
                pipe.hget(&copies[0], &key).hget(&copies[1], &key);
            }
        }
        let mut replies: std::collections::VecDeque<redis::Value> =
            with_retry!(pipe.query_async::<Vec<redis::Value>>(con))?.into();
        let mut jobs = Vec::with_capacity(todo.len());
        for (id, score, parent) in todo {
            let fields: Vec<Option<String>> = take_reply(&mut replies)?;
            let logs: Vec<String> = take_reply(&mut replies)?;
            let mut copies = Vec::new();
            if let Some(parent) = parent {
                for copy_key in QueueKeys::copies_in_parent(&parent) {
                    let value: Option<String> = take_reply(&mut replies)?;
                    copies.push((copy_key, self.keys.job(id), value));
                }
            }
            match scrub(rules, id, score, fields, logs, copies) {
                Ok(job) => jobs.push(job),
                // Left as it is, unmarked, and counted: never taken as scrubbed.
                Err(Unreadable) => skipped.malformed += 1,
            }
        }
        Ok(jobs)
    }

    /// Writes the scrubbed jobs back, each under its compare-and-set, through the batch
    /// loop. Returns how many were written.
    async fn write_scrubbed<C: ConnectionLike>(
        &self,
        con: &mut C,
        jobs: &[ScrubbedJob],
        audit_ctx: &str,
        sizer: &mut BatchSizer,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let mut action = AnonymizeJobs {
            keys: self.keys,
            state: self.state,
            audit_ctx,
            marker: (ANONYMIZED_MARKER, self.opts.now_ms),
        };
        let run = self.opts.batching(self.observer);
        let done = run_batches(con, jobs, sizer, run, skipped, &mut action).await?;
        Ok(done)
    }
}

/// The next reply of a pipeline whose shape varies per job.
fn take_reply<T: redis::FromRedisValue>(
    replies: &mut std::collections::VecDeque<redis::Value>,
) -> RedisResult<T> {
    let value = replies.pop_front().ok_or_else(|| {
        redis::RedisError::from((redis::ErrorKind::Client, "pipeline reply missing"))
    })?;
    Ok(redis::from_redis_value(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bullsweep_policy::{JsonPath, TextPattern};

    fn rules() -> PiiRules {
        PiiRules {
            paths: vec![JsonPath::new("user.email").expect("valid")],
            patterns: vec![TextPattern::Email],
            replacement: "[X]".into(),
        }
    }

    #[test]
    fn only_changed_values_are_written() {
        let job = scrub(
            &rules(),
            "1",
            5,
            vec![
                Some(r#"{"user":{"email":"a@b.co"}}"#.into()),
                Some(r#"{"ok":true}"#.into()),
                Some("no mail for a@b.co".into()),
                None,
            ],
            vec!["sent".into(), "to a@b.co".into()],
            vec![
                (
                    "bull:p:9:processed".into(),
                    "bull:q:1".into(),
                    Some(r#"{"ok":true}"#.into()),
                ),
                ("bull:p:9:failed".into(), "bull:q:1".into(), None),
            ],
        )
        .expect("readable");
        assert_eq!(
            job.fields,
            vec![
                (
                    "data".to_string(),
                    r#"{"user":{"email":"[X]"}}"#.to_string()
                ),
                ("failedReason".to_string(), "no mail for [X]".to_string()),
            ]
        );
        assert_eq!(job.logs, Some(vec!["sent".into(), "to [X]".into()]));
        assert!(job.copies.is_empty(), "an unchanged copy is not written");
    }
}
