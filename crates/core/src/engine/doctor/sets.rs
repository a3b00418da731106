//! What a queue's own states show: ids whose job hash is gone (`danglingIds`), read from each
//! state by rank (sets) or by range (lists) in pages of 1,000 (only ids whose hash the scan did
//! not meet are asked about), finished entries of another job under their id
//! (`staleEntries`), and parents in
//! `waiting-children` with no dependency left (`stuckParents`); each page checked by the
//! probe script.

use super::{Findings, PAGE, Prober, id_hash};
use crate::bullmq::key_classes::{STATES, StateKind};
use crate::bullmq::{ProbeMode, RepairItem};
use bullsweep_policy::DoctorKind;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Page `start` of a state's ids (by rank for a set, by index for a list): how many it held,
/// and those that are UTF-8. An id that is not is no id BullMQ writes (its job hash would be
/// no key the keyspace pass reads either): it is passed over, not taken for damage.
async fn page<C: ConnectionLike>(
    con: &mut C,
    key: &str,
    kind: StateKind,
    start: usize,
) -> RedisResult<(usize, Vec<String>)> {
    let command = match kind {
        StateKind::SortedSet => "ZRANGE",
        StateKind::List => "LRANGE",
    };
    let raw: Vec<Vec<u8>> = with_retry!(
        redis::cmd(command)
            .arg(key)
            .arg(start)
            .arg(start + PAGE - 1)
            .query_async(con)
    )?;
    let read = raw.len();
    Ok((
        read,
        raw.into_iter()
            .filter_map(|id| String::from_utf8(id).ok())
            .collect(),
    ))
}

/// Ids in any of the eight states whose job hash does not exist.
pub(super) async fn dangling_ids<C: ConnectionLike>(
    con: &mut C,
    probe: &Prober<'_>,
    found: &mut Findings,
) -> RedisResult<()> {
    for (state, kind) in STATES {
        dangling_in(con, probe, state, kind, found).await?;
    }
    Ok(())
}

/// Ids in one state whose job hash does not exist.
pub(super) async fn dangling_in<C: ConnectionLike>(
    con: &mut C,
    probe: &Prober<'_>,
    state: &str,
    kind: StateKind,
    found: &mut Findings,
) -> RedisResult<()> {
    let key = probe.keys.sub(state);
    let mut start = 0;
    loop {
        let (read, ids) = page(con, &key, kind, start).await?;
        // Ids whose hash the keyspace scan met need no EXISTS (and were counted by it).
        let unseen: Vec<String> = ids
            .iter()
            .filter(|id| !found.hashes_seen.contains(&id_hash(id)))
            .cloned()
            .collect();
        for id in &unseen {
            if found.ids_seen.insert(id_hash(id)) {
                found.examined.jobs += 1;
            }
        }
        let codes = probe.codes(con, ProbeMode::Missing, &unseen).await?;
        let finding = found.of(DoctorKind::DanglingIds);
        for (id, code) in unseen.iter().zip(&codes) {
            if code[0] == b'0' {
                let item = RepairItem {
                    id: id.clone(),
                    detail: state.to_string(),
                };
                // The same id may dangle in two states: each is a finding.
                let job = probe.keys.job(id);
                finding.add_as(format!("{job}\t{state}"), job, item);
            }
        }
        if read < PAGE {
            return Ok(());
        }
        start += read;
    }
}

/// Ids of `completed` and `failed` whose entry is a stale one: the job finished at another
/// time than the entry's score and sits in the other finished set at its own finish time.
/// Read in pages of [`PAGE`] entries with their scores, then one pipeline of `HGET` and
/// `ZSCORE` per page (each call O(1) or O(log N)); the repair checks each again.
pub(super) async fn stale_entries<C: ConnectionLike>(
    con: &mut C,
    probe: &Prober<'_>,
    found: &mut Findings,
) -> RedisResult<()> {
    for (state, other) in [("completed", "failed"), ("failed", "completed")] {
        stale_in(con, probe, (state, other), found).await?;
    }
    Ok(())
}

/// The stale entries of one finished set, beside the `other` one.
pub(super) async fn stale_in<C: ConnectionLike>(
    con: &mut C,
    probe: &Prober<'_>,
    (state, other): (&str, &str),
    found: &mut Findings,
) -> RedisResult<()> {
    let (key, other_key) = (probe.keys.sub(state), probe.keys.sub(other));
    let mut start = 0;
    loop {
        let page: Vec<(Vec<u8>, f64)> = with_retry!(
            redis::cmd("ZRANGE")
                .arg(&key)
                .arg(start)
                .arg(start + PAGE - 1)
                .arg("WITHSCORES")
                .query_async(con)
        )?;
        let read = page.len();
        // An id that is not UTF-8 is no id BullMQ writes (see `page`).
        let rows: Vec<(String, f64)> = page
            .into_iter()
            .filter_map(|(id, score)| Some((String::from_utf8(id).ok()?, score)))
            .collect();
        let mut pipe = redis::pipe();
        for (id, _) in &rows {
            pipe.hget(probe.keys.job(id), "finishedOn");
            pipe.zscore(&other_key, id);
        }
        let answers: Vec<(Option<String>, Option<f64>)> = if rows.is_empty() {
            Vec::new()
        } else {
            let flat: Vec<redis::Value> = with_retry!(pipe.query_async(con))?;
            flat.chunks(2)
                .map(|pair| {
                    let finished = redis::from_redis_value(pair[0].clone()).ok().flatten();
                    let live = redis::from_redis_value(pair[1].clone()).ok().flatten();
                    (finished, live)
                })
                .collect()
        };
        let finding = found.of(DoctorKind::StaleEntries);
        for ((id, score), (finished, live)) in rows.iter().zip(answers) {
            let finished = finished.and_then(|f| f.parse::<f64>().ok());
            if let (Some(f), Some(live)) = (finished, live)
                && f != *score
                && f == live
            {
                // Named by the entry (the set's key and the id), not by the live job's key.
                finding.add_as(
                    format!("{key}\t{id}"),
                    format!("{key}[{id}]"),
                    RepairItem {
                        id: id.clone(),
                        detail: state.to_string(),
                    },
                );
            }
        }
        if read < PAGE {
            return Ok(());
        }
        start += read;
    }
}

/// Parents in `waiting-children` none of whose dependencies is an existing job.
pub(super) async fn stuck_parents<C: ConnectionLike>(
    con: &mut C,
    probe: &Prober<'_>,
    found: &mut Findings,
) -> RedisResult<()> {
    let key = probe.keys.sub("waiting-children");
    let mut start = 0;
    loop {
        let (read, ids) = page(con, &key, StateKind::SortedSet, start).await?;
        let codes = probe.codes(con, ProbeMode::Stuck, &ids).await?;
        let finding = found.of(DoctorKind::StuckParents);
        for (id, code) in ids.iter().zip(&codes) {
            match code[0] {
                b's' => finding.add(
                    probe.keys.job(id),
                    RepairItem {
                        id: id.clone(),
                        detail: "-".into(),
                    },
                ),
                b'b' => finding.skip("outOfReach", 1),
                _ => {}
            }
        }
        if read < PAGE {
            return Ok(());
        }
        start += read;
    }
}
