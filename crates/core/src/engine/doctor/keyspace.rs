//! What a `SCAN` of a queue's keys shows: job hashes in no state (`orphanHashes`), jobs in a
//! live state whose parent is gone (`orphanChildren`; a finished one is what BullMQ's own
//! removal of a finished parent leaves, and no damage), sub-keys of gone jobs (`orphanSubkeys`), scheduler
//! templates with no scheduler (`orphanSchedulers`) and dedup keys that block new jobs
//! (`staleDedup`). `SCAN … COUNT 1000` on the primary serving the queue's slot (every primary
//! for a queue without a hash tag); each step's keys are checked by the probe script and
//! pipelines of single-key reads before the next step.

use super::{Findings, PAGE, Prober, id_hash};
use crate::bullmq::key_classes::{DoctorKey, Shape, doctor_key, resolve_doctor_key};
use crate::bullmq::keys::{QueueKeys, explicit_tag};
use crate::bullmq::{ProbeMode, RepairItem, Topology};
use bullsweep_policy::DoctorKind;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::collections::HashSet;

/// Keys one `SCAN` step asks for.
const SCAN_COUNT: u64 = 1_000;

/// Finds the `SCAN`-based kinds in one queue.
pub(super) async fn scan_queue<C: Topology>(
    con: &mut C,
    probe: &Prober<'_>,
    found: &mut Findings,
) -> RedisResult<()> {
    let keys = probe.keys;
    let lists = list_snapshot(con, keys).await?;
    let pattern = keys.scan_all();
    let prefix_len = keys.job_prefix().len();
    for mut node in nodes_of(con, keys).await? {
        let mut cursor = 0u64;
        loop {
            let (next, step): (u64, Vec<Vec<u8>>) = with_retry!(
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .query_async(&mut node)
            )?;
            found.examined.keys += step.len() as u64;
            let mut sorted = Sorted::of(&step, prefix_len);
            sorted.resolve(con, probe).await?;
            check_jobs(con, probe, &lists, &sorted.jobs, found).await?;
            check_subkeys(con, keys, &sorted.subkeys, found).await?;
            check_dedups(con, keys, &sorted.dedups, found).await?;
            check_schedulers(con, keys, &sorted.schedulers, found).await?;
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(())
}

/// The primaries to scan: the one serving the queue's slot when the queue has a hash tag
/// (all its keys share that slot), every one otherwise.
async fn nodes_of<C: Topology>(con: &C, keys: &QueueKeys) -> RedisResult<Vec<C>> {
    let mut nodes = con.primaries().await?;
    if con.cluster() && explicit_tag(keys.base()).is_some() {
        let owner = con.owners(&[keys.meta()]).await?;
        if let Some(&i) = owner.first().filter(|&&i| i < nodes.len()) {
            return Ok(vec![nodes.swap_remove(i)]);
        }
    }
    Ok(nodes)
}

/// Ids of one list read into the snapshot at most; past them the probe's bounded search
/// answers (a job beyond its reach is counted `outOfReach`, never an orphan).
const SNAPSHOT_MAX: usize = 1_000_000;

/// The ids in the queue's lists (`wait`, `paused`, `active`), read in pages before the scan,
/// so that only jobs in none of them cost the probe's bounded list search. A job that moves
/// during the reads is found again by that search.
async fn list_snapshot<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
) -> RedisResult<HashSet<String>> {
    let mut ids = HashSet::new();
    for list in ["wait", "paused", "active"] {
        let key = keys.sub(list);
        let mut start = 0usize;
        loop {
            let page: Vec<Vec<u8>> = with_retry!(
                redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(start)
                    .arg(start + PAGE - 1)
                    .query_async(con)
            )?;
            let n = page.len();
            // An id that is not UTF-8 names no key the scan reads (see `Sorted::of`).
            ids.extend(page.into_iter().filter_map(|id| String::from_utf8(id).ok()));
            start += n;
            if n < PAGE || start >= SNAPSHOT_MAX {
                break;
            }
        }
    }
    Ok(ids)
}

/// One step's keys, sorted by what they are.
#[derive(Default)]
struct Sorted {
    jobs: Vec<String>,
    subkeys: Vec<(String, &'static str)>,
    dedups: Vec<String>,
    schedulers: Vec<String>,
    /// Names (under the base) that may be a job's or another key's: sorted by
    /// [`Sorted::resolve`].
    ambiguous: Vec<String>,
}

impl Sorted {
    fn of(step: &[Vec<u8>], prefix_len: usize) -> Self {
        let mut out = Sorted::default();
        for raw in step {
            // A key whose name is not UTF-8 is no key BullMQ writes.
            let Some(rest) = std::str::from_utf8(raw)
                .ok()
                .and_then(|k| k.get(prefix_len..))
            else {
                continue;
            };
            if doctor_key(rest) == DoctorKey::Ambiguous {
                out.ambiguous.push(rest.to_string());
            } else {
                out.push(doctor_key(rest));
            }
        }
        out
    }

    fn push(&mut self, key: DoctorKey<'_>) {
        match key {
            DoctorKey::Job(id) => self.jobs.push(id.to_string()),
            DoctorKey::SubKey(id, suffix) => self.subkeys.push((id.to_string(), suffix)),
            DoctorKey::Dedup(deid) => self.dedups.push(deid.to_string()),
            DoctorKey::Scheduler(sid) => self.schedulers.push(sid.to_string()),
            DoctorKey::Ambiguous | DoctorKey::Other => {}
        }
    }

    /// Sorts the ambiguous names by their keys' shapes (read by the probe): a hash that could
    /// be a job is a job, never a sub-key, dedup key or template.
    async fn resolve<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        probe: &Prober<'_>,
    ) -> RedisResult<()> {
        let names = std::mem::take(&mut self.ambiguous);
        let codes = probe.codes(con, ProbeMode::Shape, &names).await?;
        for (name, code) in names.iter().zip(&codes) {
            self.push(resolve_doctor_key(name, Shape::from_code(code[0])));
        }
        Ok(())
    }
}

fn item(id: &str, detail: &str) -> RepairItem {
    RepairItem {
        id: id.to_string(),
        detail: detail.to_string(),
    }
}

/// Job hashes: in no state (`orphanHashes`), or not finished with a gone parent
/// (`orphanChildren`).
async fn check_jobs<C: ConnectionLike>(
    con: &mut C,
    probe: &Prober<'_>,
    lists: &HashSet<String>,
    ids: &[String],
    found: &mut Findings,
) -> RedisResult<()> {
    let keys = probe.keys;
    let codes = probe.codes(con, ProbeMode::Jobs, ids).await?;
    let mut in_no_set = Vec::new();
    for (id, code) in ids.iter().zip(&codes) {
        if code[0] == b'x' {
            continue;
        }
        if found.hashes_seen.insert(id_hash(id)) {
            found.examined.jobs += 1;
        }
        if code[0] == b'l' && !lists.contains(id) {
            in_no_set.push(id.clone());
        }
        let children = found.of(DoctorKind::OrphanChildren);
        match code[1] {
            b'g' => children.add(keys.job(id), item(id, "-")),
            b'o' => children.skip("otherSlot", 1),
            _ => {}
        }
    }
    let codes = probe.codes(con, ProbeMode::Lists, &in_no_set).await?;
    let orphans = found.of(DoctorKind::OrphanHashes);
    for (id, code) in in_no_set.iter().zip(&codes) {
        match code[0] {
            b'n' => orphans.add(keys.job(id), item(id, "-")),
            b'f' => orphans.skip("outOfReach", 1),
            _ => {}
        }
    }
    Ok(())
}

/// Runs single-key reads in one pipeline (errors read as values), one page at a time.
async fn read<C: ConnectionLike>(con: &mut C, pipe: &redis::Pipeline) -> RedisResult<Vec<Value>> {
    with_retry!(pipe.query_async::<Vec<Value>>(con))
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// Sub-keys whose job hash is gone (a `:lock` only without a TTL).
async fn check_subkeys<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    subkeys: &[(String, &'static str)],
    found: &mut Findings,
) -> RedisResult<()> {
    for page in subkeys.chunks(PAGE) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for (id, suffix) in page {
            pipe.cmd("EXISTS").arg(keys.job(id));
            pipe.cmd("PTTL").arg(keys.job_sub(id, suffix));
        }
        let replies = read(con, &pipe).await?;
        let finding = found.of(DoctorKind::OrphanSubkeys);
        for ((id, suffix), r) in page.iter().zip(replies.chunks(2)) {
            let (exists, ttl) = (int(&r[0]), int(&r[1]));
            let orphan = exists == Some(0)
                && match ttl {
                    Some(-1) => true,
                    Some(t) => t >= 0 && *suffix != "lock",
                    None => false,
                };
            if orphan {
                finding.add(keys.job_sub(id, suffix), item(id, suffix));
            }
        }
    }
    Ok(())
}

/// Dedup keys with no TTL naming a job that is gone or finished.
async fn check_dedups<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    deids: &[String],
    found: &mut Findings,
) -> RedisResult<()> {
    for page in deids.chunks(PAGE) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for deid in page {
            pipe.cmd("GET").arg(keys.dedup(deid));
            pipe.cmd("PTTL").arg(keys.dedup(deid));
        }
        let replies = read(con, &pipe).await?;
        // Keys without a TTL (a TTL is BullMQ's throttle mode), with the job they name.
        let held: Vec<(&String, String)> = page
            .iter()
            .zip(replies.chunks(2))
            .filter(|(_, r)| int(&r[1]) == Some(-1))
            .filter_map(|(deid, r)| text(&r[0]).map(|owner| (deid, owner)))
            .collect();
        // Every key had a TTL or went since: an empty pipeline is no command to send.
        if held.is_empty() {
            continue;
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for (_, owner) in &held {
            pipe.cmd("EXISTS").arg(keys.job(owner));
            pipe.cmd("ZSCORE").arg(keys.sub("completed")).arg(owner);
            pipe.cmd("ZSCORE").arg(keys.sub("failed")).arg(owner);
        }
        let replies = read(con, &pipe).await?;
        let finding = found.of(DoctorKind::StaleDedup);
        for ((deid, owner), r) in held.iter().zip(replies.chunks(3)) {
            let gone = int(&r[0]) == Some(0);
            let finished = !matches!(r[1], Value::Nil) || !matches!(r[2], Value::Nil);
            let unreadable = r.iter().any(|v| matches!(v, Value::ServerError(_)));
            if (gone || finished) && !unreadable {
                finding.add(keys.dedup(deid), item(deid, owner));
            }
        }
    }
    Ok(())
}

/// Scheduler templates (hashes) with no entry in the `repeat` set.
async fn check_schedulers<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    sids: &[String],
    found: &mut Findings,
) -> RedisResult<()> {
    for page in sids.chunks(PAGE) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for sid in page {
            pipe.cmd("TYPE").arg(keys.scheduler(sid));
            pipe.cmd("ZSCORE").arg(keys.schedulers()).arg(sid);
        }
        let replies = read(con, &pipe).await?;
        let finding = found.of(DoctorKind::OrphanSchedulers);
        for (sid, r) in page.iter().zip(replies.chunks(2)) {
            if text(&r[0]).as_deref() == Some("hash") && matches!(r[1], Value::Nil) {
                finding.add(keys.scheduler(sid), item(sid, "-"));
            }
        }
    }
    Ok(())
}
