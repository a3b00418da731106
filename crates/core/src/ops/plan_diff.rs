//! `plan --against`: two versions of the policy file compared on live data, reading only
//! ([`crate::engine::policy_diff`]).

use super::DEFAULT_BUDGET_US;
use super::run::RunScope;
use crate::engine::SweepOptions;
use crate::engine::policy_diff::{PolicyDiff, diff_policies};
use crate::error::Error;
use bullsweep_base::clock::{execution_id, now_ms};
use bullsweep_base::connect::{Conn, at_url};
use bullsweep_policy::PolicySet;

/// What changes, queue by queue, when `new` replaces `old`; `url` names Redis in messages.
/// Takes no lock and writes nothing.
pub async fn plan_against(
    con: &mut Conn,
    url: &str,
    new: &PolicySet,
    old: &PolicySet,
    scope: RunScope,
) -> Result<PolicyDiff, Error> {
    let opts = SweepOptions {
        env: scope.env,
        queues: None,
        queue_glob: scope.queue_glob,
        cancel: scope.cancel,
        locking: None,
        now_ms: now_ms(),
        budget_us: DEFAULT_BUDGET_US,
        execution_id: execution_id(),
        audit_unavailable: None,
        sort_get: con.sort_get(),
        actor: scope.actor,
        flows: Default::default(),
        state: scope.state,
        governed_elsewhere: scope.governed_elsewhere,
    };
    diff_policies(con, new, old, &opts)
        .await
        .map_err(|e| at_url(e, url))
}
