//! What a caller may see: the governed queues of its tenant (every queue for a token
//! without one), and the run scope that covers exactly those.

use crate::Ctx;
use bullsweep_core::Error;
use bullsweep_core::engine::{Inventory, NoObserver, Report};
use bullsweep_core::ops::alerts::AlertsReport;
use bullsweep_core::ops::trail::SegmentFilter;
use bullsweep_core::ops::{self, Reading, RunScope, read_sweep};
use bullsweep_policy::{NamePattern, QueueId};

/// The database's queues the caller may see; a tenant token sees no unmanaged queue (they
/// have no tenant).
pub async fn inventory(ctx: &mut Ctx<'_>) -> Result<Inventory, Error> {
    let mut inv = ops::discover(&mut ctx.con, &ctx.url, &ctx.set, ctx.env.as_deref()).await?;
    let token = &ctx.caller.token;
    inv.managed.retain(|q| token.sees(q.tenant.as_deref()));
    if token.tenant.is_some() {
        inv.unmanaged.clear();
    }
    Ok(inv)
}

/// A plan, report or run over exactly `queues`.
pub fn run_scope(ctx: &Ctx<'_>, queues: Vec<QueueId>) -> RunScope {
    RunScope {
        env: ctx.env.clone(),
        queues: Some(queues),
        ..RunScope::default()
    }
}

/// What a run would do now to `queues` (reading only, on a read-only connection).
pub async fn plan(ctx: &mut Ctx<'_>, queues: Vec<QueueId>) -> Result<Report, Error> {
    let run = run_scope(ctx, queues);
    read_sweep(
        &ctx.con,
        &ctx.url,
        &ctx.set,
        run,
        Reading::Plan,
        &NoObserver,
    )
    .await
}

/// The archive segments a request asks for, within the caller's tenant: of `tenant` (a
/// tenant's token always its own), of queues matching the glob `queue`, finished on the UTC
/// day starting at `since` (ms).
pub fn segment_filter(
    ctx: &Ctx<'_>,
    tenant: Option<String>,
    queue: Option<&str>,
    since: Option<i64>,
) -> Result<SegmentFilter, Error> {
    Ok(SegmentFilter {
        tenant: ctx.caller.token.tenant.clone().or(tenant),
        queue: queue
            .map(NamePattern::new)
            .transpose()
            .map_err(Error::config)?,
        since,
        until: since.map(|s| s + 86_400_000),
    })
}

/// The one queue of key base `base`, if the caller may see it.
pub async fn queue(ctx: &mut Ctx<'_>, base: &str) -> Result<Option<QueueId>, Error> {
    Ok(inventory(ctx)
        .await?
        .managed
        .into_iter()
        .find(|q| q.base == base))
}

/// Whether the caller may see the name of the job whose key is `key` (`<base>:<id>`): always
/// without a tenant; with one, only a job of a queue of its tenant (a flow parent may be in
/// another tenant's queue).
pub fn sees_job_key(ctx: &Ctx<'_>, key: &str) -> bool {
    let token = &ctx.caller.token;
    if token.tenant.is_none() {
        return true;
    }
    key.rsplit_once(':')
        .and_then(|(base, _)| ctx.set.identify(base, ctx.env.as_deref()))
        .is_some_and(|q| token.sees(q.tenant.as_deref()))
}

/// What the caller may see of `found`, the alerts of the queues of key bases `bases`: all of
/// it without a tenant; with one, the alerts of those queues only (none about the daemon or
/// the database as a whole, which name the Redis server) and no notes.
pub fn alerts_in_view(ctx: &Ctx<'_>, found: &mut AlertsReport, bases: &[String]) {
    if ctx.caller.token.tenant.is_some() {
        found
            .alerts
            .retain(|a| a.queue.as_ref().is_some_and(|q| bases.contains(q)));
        found.notes.clear();
        found.errors.retain(|q, _| bases.contains(q));
    }
}

/// What a reader is told of `e`: a token that sees every tenant, the message; a tenant's
/// token, of a Redis error only that Redis failed (the message names the server) and, when
/// the policy file in force could not be read (`reading_policy`), only that (its errors quote
/// every tenant's policies and the file's path); its other errors (what it asked) as they are.
pub fn told(e: &Error, tenant_view: bool, reading_policy: bool) -> &str {
    match (tenant_view, e.kind) {
        (true, bullsweep_core::ErrorKind::Redis) => {
            "Redis failed or cannot be reached; the daemon's log says why"
        }
        (true, bullsweep_core::ErrorKind::Config) if reading_policy => {
            "the policy file in force cannot be read; the daemon's log says why"
        }
        _ => e.message.as_str(),
    }
}
