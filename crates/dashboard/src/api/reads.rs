//! The API's reads of queues: the queues in view with how each is governed, one queue with
//! its effective policy, and the plan, memory report and alerts of the caller's queues.

use super::{error, json, param};
use crate::pages::overview::{measures, urlencode};
use crate::{Ctx, scope};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::engine::UnmanagedQueue;
use bullsweep_policy::{PolicySet, QueueId, Resolution, explain_json};
use serde_json::{Value, json};

/// One queue as the API describes it.
fn queue_json(set: &PolicySet, q: &QueueId) -> Value {
    let (status, policy) = match set.resolve(q) {
        Resolution::Covered(eff) => ("governed", Some(eff.name)),
        Resolution::Uncovered => ("uncovered", None),
        Resolution::Tie { .. } => ("tie", None),
    };
    json!({
        "key": q.base,
        "name": q.queue,
        "prefix": q.prefix,
        "backend": q.backend,
        "tenant": q.tenant,
        "env": q.env,
        "status": status,
        "policy": policy,
        "dashboardUrl": format!("/queue?key={}", urlencode(&q.base)),
    })
}

/// An unmanaged queue (no layout matches it): its key base split at the last `:`.
/// Its backend is null when both libraries wrote it.
fn unmanaged_json(u: &UnmanagedQueue) -> Value {
    let (prefix, name) = u.base.rsplit_once(':').unwrap_or(("", &u.base));
    json!({
        "key": u.base,
        "name": name,
        "prefix": prefix,
        "backend": u.backend,
        "tenant": null,
        "env": null,
        "status": "unmanaged",
        "policy": null,
        "reason": u.why.reason(),
        "dashboardUrl": null,
    })
}

/// `GET /api/v1/queues`: every queue in the caller's view (a tenant's token sees its
/// tenant's queues, and no unmanaged queue).
pub async fn queues(mut ctx: Ctx<'_>) -> Result<Response, Error> {
    let inv = scope::inventory(&mut ctx).await?;
    let mut list: Vec<Value> = inv
        .managed
        .iter()
        .map(|q| queue_json(&ctx.set, q))
        .collect();
    list.extend(inv.unmanaged.iter().map(unmanaged_json));
    Ok(json(200, &json!({ "queues": list })))
}

/// `GET /api/v1/queue?key=`: one queue in view, with its effective policy as `explain
/// --json` prints it (`effective`).
pub async fn queue(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let Some(key) = param(req, "key") else {
        return Ok(error(400, "say which queue: ?key=<key base>"));
    };
    let Some(q) = scope::queue(&mut ctx, &key).await? else {
        return Ok(not_in_view());
    };
    let resolution = ctx.set.resolve(&q);
    let mut body = queue_json(&ctx.set, &q);
    body["effective"] = explain_json(&ctx.set, &q, &resolution);
    Ok(json(200, &body))
}

/// The 404 of a queue the caller does not see (or that does not exist: the two are not told
/// apart).
pub fn not_in_view() -> Response {
    error(404, "no governed queue with that key base is in view")
}

/// The caller's governed queues, or the one `?key=` names (`Err`: a 404 when it is not in
/// view).
async fn chosen(ctx: &mut Ctx<'_>, req: &Request) -> Result<Result<Vec<QueueId>, Response>, Error> {
    Ok(match param(req, "key") {
        Some(key) => scope::queue(ctx, &key)
            .await?
            .map(|q| vec![q])
            .ok_or_else(not_in_view),
        None => Ok(scope::inventory(ctx).await?.managed),
    })
}

/// `GET /api/v1/plan[?key=]`: what a run would do now, as `plan --json` prints it.
pub async fn plan(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let queues = match chosen(&mut ctx, req).await? {
        Ok(q) => q,
        Err(answer) => return Ok(answer),
    };
    let report = scope::plan(&mut ctx, queues).await?;
    Ok(json(200, &report))
}

/// `GET /api/v1/report`: the memory report of the caller's queues, as `report --json`; the
/// overview's measures (a minute old at most) when they are of the same queues.
pub async fn report(mut ctx: Ctx<'_>) -> Result<Response, Error> {
    let queues = scope::inventory(&mut ctx).await?.managed;
    let (report, _, _) = measures(&mut ctx, queues).await?;
    Ok(json(200, &report))
}

/// `GET /api/v1/alerts`: the alerts firing or pending on the caller's queues, as `alerts
/// --json`, with the notes and errors of the evaluation (measured as the report is). A
/// tenant's token sees only alerts of its queues (no alert about the daemon or the database
/// as a whole) and no notes.
pub async fn alerts(mut ctx: Ctx<'_>) -> Result<Response, Error> {
    let queues = scope::inventory(&mut ctx).await?.managed;
    let bases: Vec<String> = queues.iter().map(|q| q.base.clone()).collect();
    let (_, mut found, _) = measures(&mut ctx, queues).await?;
    scope::alerts_in_view(&ctx, &mut found, &bases);
    Ok(json(
        200,
        &json!({ "alerts": found.alerts, "notes": found.notes, "errors": found.errors }),
    ))
}
