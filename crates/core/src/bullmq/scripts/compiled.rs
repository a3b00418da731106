//! The compiled scripts: each built once per process from the preludes it needs and its own
//! body (`lua/`); Redis caches them by SHA.

use super::read_only::ReadOnlyScript;
use redis::Script;
use std::sync::OnceLock;

/// The shared Lua, by concern; each defines functions only.
mod prelude {
    /// The time budget (and `rcall`): always first.
    pub const BUDGET: &str = include_str!("../lua/prelude/budget.lua");
    /// The audit event written in the same call as the change.
    pub const AUDIT: &str = include_str!("../lua/prelude/audit.lua");
    /// Restored jobs held back from every action.
    pub const HELD: &str = include_str!("../lua/prelude/held.lua");
    /// The re-check of a job selected by id.
    pub const CANDIDATE: &str = include_str!("../lua/prelude/candidate.lua");
    /// The fingerprints that prove a job unchanged.
    pub const FINGERPRINT: &str = include_str!("../lua/prelude/fingerprint.lua");
    /// Whether a key is in the call's own slot on a Cluster (read-only).
    pub const SLOT: &str = include_str!("../lua/prelude/slot.lua");
    /// Queue.clean's per-job removal (with the slot check it needs).
    pub const REMOVAL: &str = concat!(
        include_str!("../lua/prelude/slot.lua"),
        "\n",
        include_str!("../lua/prelude/removal.lua")
    );
    /// Job.remove()'s removal of a job in any state, with its children.
    pub const JOB_TREE: &str = include_str!("../lua/prelude/job_tree.lua");
    /// A finished set walked from its oldest end, resumed at a cursor (expire_jobs,
    /// ttl_census).
    pub const SET_WALK: &str = include_str!("../lua/prelude/set_walk.lua");
    /// The walk over named jobs of one finished set (remove_ids, detach_jobs, cold_jobs).
    pub const ID_BATCH: &str = include_str!("../lua/prelude/id_batch.lua");
    /// What a script built on the walk over named jobs needs, in order.
    pub const ID_WALK: &[&str] = &[
        BUDGET,
        AUDIT,
        HELD,
        CANDIDATE,
        FINGERPRINT,
        REMOVAL,
        ID_BATCH,
    ];
}

/// The compiled scripts. Built once per process; Redis caches them by SHA.
pub struct Scripts {
    pub(super) sweep_prefix: Script,
    pub(super) remove_ids: Script,
    pub(super) job_remove: Script,
    pub(super) page_newest: ReadOnlyScript,
    pub(super) doctor_probe: ReadOnlyScript,
    pub(super) doctor_repair: Script,
    pub(super) restore_job: Script,
    pub(super) anonymize_jobs: Script,
    pub(super) erase_jobs: Script,
    pub(super) stalled_jobs: Script,
    pub(super) cold_jobs: Script,
    pub(super) detach_jobs: Script,
    pub(super) unstage_jobs: Script,
    pub(super) drop_staged: Script,
    pub(super) move_exhausted: Script,
    pub(super) drain_events: Script,
    pub(super) expire_jobs: Script,
    pub(super) ttl_census: ReadOnlyScript,
    pub(super) append_audit: Script,
    pub(super) check_access: Script,
    pub(super) lock: Script,
}

/// A script from the preludes it uses and its body, with bullsweep's key names filled in.
fn build(preludes: &[&str], body: &str) -> Script {
    let mut text = String::new();
    for p in preludes {
        text.push_str(p);
        text.push('\n');
    }
    text.push_str(body);
    Script::new(&text)
}

/// The scripts, built on first use.
pub fn scripts() -> &'static Scripts {
    use prelude::{
        AUDIT, BUDGET, CANDIDATE, FINGERPRINT, HELD, ID_WALK, JOB_TREE, REMOVAL, SET_WALK, SLOT,
    };
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        sweep_prefix: build(
            &[BUDGET, AUDIT, HELD, REMOVAL],
            include_str!("../lua/sweep_prefix.lua"),
        ),
        remove_ids: build(ID_WALK, include_str!("../lua/remove_ids.lua")),
        job_remove: build(
            &[BUDGET, AUDIT, HELD, FINGERPRINT, REMOVAL, JOB_TREE],
            include_str!("../lua/job_remove.lua"),
        ),
        page_newest: ReadOnlyScript::new(include_str!("../lua/page_newest.lua")),
        doctor_probe: ReadOnlyScript::new(
            &[BUDGET, SLOT, include_str!("../lua/doctor_probe.lua")].join("\n"),
        ),
        doctor_repair: build(
            &[BUDGET, AUDIT, HELD, FINGERPRINT, REMOVAL, JOB_TREE],
            include_str!("../lua/doctor_repair.lua"),
        ),
        restore_job: build(&[AUDIT], include_str!("../lua/restore_job.lua")),
        anonymize_jobs: build(
            &[BUDGET, AUDIT, HELD, CANDIDATE, FINGERPRINT],
            include_str!("../lua/anonymize_jobs.lua"),
        ),
        erase_jobs: build(
            &[BUDGET, AUDIT, REMOVAL, JOB_TREE],
            include_str!("../lua/erase_jobs.lua"),
        ),
        stalled_jobs: build(
            &[BUDGET, AUDIT, REMOVAL, JOB_TREE],
            include_str!("../lua/stalled_jobs.lua"),
        ),
        cold_jobs: build(ID_WALK, include_str!("../lua/cold_jobs.lua")),
        detach_jobs: build(ID_WALK, include_str!("../lua/detach_jobs.lua")),
        unstage_jobs: build(&[AUDIT], include_str!("../lua/unstage_jobs.lua")),
        drop_staged: build(&[], include_str!("../lua/drop_staged.lua")),
        move_exhausted: build(
            &[BUDGET, AUDIT, HELD, CANDIDATE, REMOVAL],
            include_str!("../lua/move_exhausted.lua"),
        ),
        drain_events: build(
            &[BUDGET, AUDIT, HELD, REMOVAL],
            include_str!("../lua/drain_events.lua"),
        ),
        expire_jobs: build(
            &[BUDGET, AUDIT, HELD, SET_WALK],
            include_str!("../lua/expire_jobs.lua"),
        ),
        ttl_census: ReadOnlyScript::new(&format!(
            "{SET_WALK}\n{}",
            include_str!("../lua/ttl_census.lua")
        )),
        append_audit: build(&[AUDIT], include_str!("../lua/append_audit.lua")),
        check_access: build(&[], include_str!("../lua/check_access.lua")),
        lock: build(&[], include_str!("../lua/lock.lua")),
    })
}
