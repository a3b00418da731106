//! The compiled scripts: each built once per process from the preludes it needs and its own
//! body (`lua/`); Redis caches them by SHA.

use super::read_only::ReadOnlyScript;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::Backend;
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
    /// Whether a key is a job or another of BullMQ's keys of the same name (doctor).
    pub const JOB_LIKE: &str = include_str!("../lua/prelude/job_like.lua");
    /// Legacy Bull's stalled check, which `rules.stalled` takes part in on a Bull queue.
    pub const BULL_CHECK: &str = include_str!("../lua/prelude/bull_check.lua");
    /// Job.remove()'s removal of a job in any state, with its children.
    pub const JOB_TREE: &str = include_str!("../lua/prelude/job_tree.lua");
    /// A sorted set walked from its lowest score, resumed at a cursor (expire_jobs,
    /// end_expiries, ttl_census).
    pub const SET_WALK: &str = include_str!("../lua/prelude/set_walk.lua");
    /// The EXPIRE layer's finish check, ttl groups and expiries given and ended with their
    /// index (expire_jobs, end_expiries).
    pub const EXPIRY: &str = include_str!("../lua/prelude/expiry.lua");
    /// Which instance of a job a record names (claim_notices, prune_notices).
    pub const INSTANCE: &str = include_str!("../lua/prelude/instance.lua");
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
    pub(super) sweep_prefix: Twin,
    pub(super) remove_ids: Twin,
    pub(super) job_remove: Twin,
    pub(super) page_newest: ReadOnlyScript,
    pub(super) doctor_probe: ReadOnlyScript,
    pub(super) doctor_repair: Twin,
    pub(super) flow_tree: ReadOnlyScript,
    pub(super) restore_job: Twin,
    pub(super) anonymize_jobs: Twin,
    pub(super) erase_jobs: Twin,
    pub(super) stalled_jobs: Twin,
    pub(super) bull_stalled_marks: Script,
    pub(super) cold_jobs: Twin,
    pub(super) detach_jobs: Twin,
    pub(super) unstage_jobs: Twin,
    pub(super) drop_staged: Twin,
    pub(super) move_exhausted: Twin,
    pub(super) drain_events: Twin,
    pub(super) expire_jobs: Twin,
    pub(super) end_expiries: Twin,
    pub(super) expiry_census: ReadOnlyScript,
    pub(super) ttl_census: ReadOnlyScript,
    pub(super) retried_since: ReadOnlyScript,
    pub(super) claim_notices: Script,
    pub(super) notices_due: ReadOnlyScript,
    pub(super) settle_notices: Script,
    pub(super) prune_notices: Script,
    pub(super) append_audit: Script,
    pub(super) check_access: Script,
    pub(super) lock: Script,
    pub(super) unregister_expiring: Script,
}

/// A script built once per queue library: its Lua sees `BACKEND` (`'bullmq'` or `'bull'`)
/// and keeps that library's semantics where the two differ (which keys a job leaves, whether
/// an events stream is written). The queue's keys choose the build.
pub struct Twin {
    bullmq: Script,
    bull: Script,
}

impl Twin {
    /// The build for the queue whose keys these are.
    pub(super) fn of(&self, keys: &QueueKeys) -> &Script {
        match keys.backend() {
            Backend::Bullmq | Backend::BullmqPostgres => &self.bullmq,
            Backend::Bull => &self.bull,
        }
    }
}

/// The text of a script from the preludes it uses and its body.
fn text(preludes: &[&str], body: &str) -> String {
    let mut text = String::new();
    for p in preludes {
        text.push_str(p);
        text.push('\n');
    }
    text.push_str(body);
    text
}

/// A script that does the same on either library's queues (or on none).
fn build(preludes: &[&str], body: &str) -> Script {
    Script::new(&text(preludes, body))
}

/// A read-only script: `head` (the build's settings, such as `local DRY = true`), then the
/// preludes it uses and its body.
fn read_only(head: &str, preludes: &[&str], body: &str) -> ReadOnlyScript {
    ReadOnlyScript::new(&format!("{head}\n{}", text(preludes, body)))
}

/// A script built for each library ([`Twin`]).
fn twin(preludes: &[&str], body: &str) -> Twin {
    let body = text(preludes, body);
    let of = |b: Backend| Script::new(&format!("local BACKEND = '{}'\n{body}", b.as_str()));
    Twin {
        bullmq: of(Backend::Bullmq),
        bull: of(Backend::Bull),
    }
}

/// The scripts, built on first use.
pub fn scripts() -> &'static Scripts {
    use prelude::{
        AUDIT, BUDGET, BULL_CHECK, CANDIDATE, EXPIRY, FINGERPRINT, HELD, ID_WALK, INSTANCE,
        JOB_LIKE, JOB_TREE, REMOVAL, SET_WALK, SLOT,
    };
    // end_expiries.lua in its two builds: the one that writes, and `plan`'s, which counts.
    // So is claim_notices.lua.
    let claim = include_str!("../lua/claim_notices.lua");
    let end_expiries = include_str!("../lua/end_expiries.lua");
    let expiry_walk = [BUDGET, SLOT, AUDIT, HELD, SET_WALK, EXPIRY];
    let repair = [
        BUDGET,
        AUDIT,
        HELD,
        CANDIDATE,
        FINGERPRINT,
        REMOVAL,
        JOB_TREE,
        JOB_LIKE,
    ];
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        sweep_prefix: twin(
            &[BUDGET, AUDIT, HELD, CANDIDATE, REMOVAL],
            include_str!("../lua/sweep_prefix.lua"),
        ),
        remove_ids: twin(ID_WALK, include_str!("../lua/remove_ids.lua")),
        job_remove: twin(
            &[BUDGET, AUDIT, HELD, FINGERPRINT, REMOVAL, JOB_TREE],
            include_str!("../lua/job_remove.lua"),
        ),
        page_newest: ReadOnlyScript::new(include_str!("../lua/page_newest.lua")),
        doctor_probe: ReadOnlyScript::new(&text(
            &[BUDGET, SLOT, JOB_LIKE],
            include_str!("../lua/doctor_probe.lua"),
        )),
        flow_tree: read_only(
            "local BACKEND = 'bullmq'",
            &[BUDGET, REMOVAL, JOB_TREE],
            include_str!("../lua/flow_tree.lua"),
        ),
        doctor_repair: twin(&repair, include_str!("../lua/doctor_repair.lua")),
        restore_job: twin(&[AUDIT], include_str!("../lua/restore_job.lua")),
        anonymize_jobs: twin(
            &[BUDGET, AUDIT, HELD, CANDIDATE, FINGERPRINT],
            include_str!("../lua/anonymize_jobs.lua"),
        ),
        erase_jobs: twin(
            &[BUDGET, AUDIT, REMOVAL, JOB_TREE],
            include_str!("../lua/erase_jobs.lua"),
        ),
        stalled_jobs: twin(
            &[BUDGET, AUDIT, REMOVAL, JOB_TREE, BULL_CHECK],
            include_str!("../lua/stalled_jobs.lua"),
        ),
        bull_stalled_marks: build(
            &[BUDGET, BULL_CHECK],
            include_str!("../lua/bull_stalled_marks.lua"),
        ),
        cold_jobs: twin(ID_WALK, include_str!("../lua/cold_jobs.lua")),
        detach_jobs: twin(ID_WALK, include_str!("../lua/detach_jobs.lua")),
        unstage_jobs: twin(&[AUDIT], include_str!("../lua/unstage_jobs.lua")),
        drop_staged: twin(&[], include_str!("../lua/drop_staged.lua")),
        move_exhausted: twin(
            &[BUDGET, AUDIT, HELD, CANDIDATE, REMOVAL],
            include_str!("../lua/move_exhausted.lua"),
        ),
        drain_events: twin(
            &[BUDGET, AUDIT, HELD, CANDIDATE, REMOVAL],
            include_str!("../lua/drain_events.lua"),
        ),
        expire_jobs: twin(&expiry_walk, include_str!("../lua/expire_jobs.lua")),
        end_expiries: twin(&expiry_walk, &format!("local DRY = false\n{end_expiries}")),
        expiry_census: read_only("local DRY, BACKEND = true, nil", &expiry_walk, end_expiries),
        ttl_census: read_only(
            "local BACKEND = nil",
            &[BUDGET, SLOT, HELD, SET_WALK, EXPIRY],
            include_str!("../lua/ttl_census.lua"),
        ),
        retried_since: ReadOnlyScript::new(&text(
            &[BUDGET],
            include_str!("../lua/retried_since.lua"),
        )),
        claim_notices: build(&[BUDGET, INSTANCE], &format!("local DRY = false\n{claim}")),
        notices_due: read_only("local DRY = true", &[BUDGET, INSTANCE], claim),
        settle_notices: build(&[AUDIT], include_str!("../lua/settle_notices.lua")),
        prune_notices: build(
            &[BUDGET, INSTANCE],
            include_str!("../lua/prune_notices.lua"),
        ),
        append_audit: build(&[AUDIT], include_str!("../lua/append_audit.lua")),
        check_access: build(&[], include_str!("../lua/check_access.lua")),
        lock: build(&[], include_str!("../lua/lock.lua")),
        unregister_expiring: build(&[], include_str!("../lua/unregister_expiring.lua")),
    })
}
