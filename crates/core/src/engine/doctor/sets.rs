//! What a queue's own states show: ids whose job hash is gone (`danglingIds`), read from each
//! state by rank (sets) or by range (lists) in pages of 1,000, and parents in
//! `waiting-children` with no dependency left (`stuckParents`); each page checked by the
//! probe script.

use super::{Findings, PAGE, Prober};
use crate::bullmq::key_classes::{STATES, StateKind};
use crate::bullmq::{ProbeMode, RepairItem};
use bullsweep_policy::DoctorKind;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Page `start` of a state's ids (by rank for a set, by index for a list).
async fn page<C: ConnectionLike>(
    con: &mut C,
    key: &str,
    kind: StateKind,
    start: usize,
) -> RedisResult<Vec<String>> {
    let command = match kind {
        StateKind::SortedSet => "ZRANGE",
        StateKind::List => "LRANGE",
    };
    with_retry!(
        redis::cmd(command)
            .arg(key)
            .arg(start)
            .arg(start + PAGE - 1)
            .query_async(con)
    )
}

/// Ids in any of the eight states whose job hash does not exist.
pub(super) async fn dangling_ids<C: ConnectionLike>(
    con: &mut C,
    probe: &Prober<'_>,
    found: &mut Findings,
) -> RedisResult<()> {
    for (state, kind) in STATES {
        let key = probe.keys.sub(state);
        let mut start = 0;
        loop {
            let ids = page(con, &key, kind, start).await?;
            found.examined.jobs += ids.len() as u64;
            let codes = probe.codes(con, ProbeMode::Missing, &ids).await?;
            let finding = found.of(DoctorKind::DanglingIds);
            for (id, code) in ids.iter().zip(&codes) {
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
            if ids.len() < PAGE {
                break;
            }
            start += ids.len();
        }
    }
    Ok(())
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
        let ids = page(con, &key, StateKind::SortedSet, start).await?;
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
        if ids.len() < PAGE {
            return Ok(());
        }
        start += ids.len();
    }
}
