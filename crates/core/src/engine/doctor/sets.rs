//! What a queue's own states show: ids whose job hash is gone (`danglingIds`), read from each
//! state by rank (sets) or by range (lists) in pages of 1,000 (only ids whose hash the scan did
//! not meet are asked about), and parents in
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
