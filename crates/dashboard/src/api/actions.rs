//! The API's actions: sweep a queue now and restore a job (operators), start or plan an
//! erasure (admins). Each checks the role before anything is read, runs what the dashboard's
//! form runs, and is audited with the token's name, or `<token> for <user>` when an
//! integration acts for one of its users (`X-Bullsweep-On-Behalf-Of`).

use super::reads::not_in_view;
use super::{allowed, body, error, json, param};
use crate::Ctx;
use crate::actions::{LOCKED, Swept, erasure_of, restore_job, sweep_queue};
use crate::pages::erasure::Form;
use crate::scope;
use bullsweep_core::Error;
use bullsweep_core::bullmq::RestoreMode;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_policy::{Permission, Resolution, unprintable};
use serde::Deserialize;
use serde_json::json;

/// The header naming the user an integration acts for.
pub const ON_BEHALF_OF: &str = "x-bullsweep-on-behalf-of";
/// The longest user name taken from [`ON_BEHALF_OF`].
const USER_MAX: usize = 128;

/// The audit actor: the token's name, and the user it acts for when the header names one
/// (characters that do not print, or that change how the text around them reads, removed;
/// at most [`USER_MAX`] characters).
fn actor(ctx: &Ctx<'_>, req: &Request) -> String {
    let token = ctx.caller.token.name.clone();
    let user: String = req
        .header(ON_BEHALF_OF)
        .unwrap_or_default()
        .chars()
        .filter(|c| !unprintable(*c))
        .take(USER_MAX)
        .collect();
    match user.trim() {
        "" => token,
        user => format!("{token} for {user}"),
    }
}

/// `POST /api/v1/queue/sweep?key=`: one bounded, audited sweep of a governed queue under its
/// policy; 409 for a queue no policy governs, 423 while another sweep holds its lock.
pub async fn sweep(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    if let Err(answer) = allowed(&ctx, Permission::SweepNow, "sweep a queue") {
        return Ok(answer);
    }
    let Some(key) = param(req, "key") else {
        return Ok(error(400, "say which queue: ?key=<key base>"));
    };
    let Some(q) = scope::queue(&mut ctx, &key).await? else {
        return Ok(not_in_view());
    };
    if !matches!(ctx.set.resolve(&q), Resolution::Covered(_)) {
        return Ok(error(
            409,
            "no policy governs this queue, so there is nothing to sweep it by",
        ));
    }
    let actor = actor(&ctx, req);
    let Swept::Done(report) = sweep_queue(&mut ctx, q, actor.clone()).await? else {
        return Ok(error(423, LOCKED));
    };
    Ok(json(
        200,
        &json!({ "queue": key, "done": report.done(), "actor": actor, "report": report }),
    ))
}

/// A restore's body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreBody {
    /// The queue's key base.
    queue: String,
    /// The archived job's id.
    id: String,
    /// `original` (the default) or `new`.
    #[serde(default, rename = "as")]
    mode: Option<RestoreAs>,
}

/// How a job is restored.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum RestoreAs {
    /// Under its own id, in its state.
    Original,
    /// As a new waiting job.
    New,
}

/// An erasure's body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ErasureBody {
    /// `<name>=<id>`.
    subject: String,
    /// The request's id.
    request_id: String,
    /// The tenant (a tenant's token's own, whatever is sent).
    #[serde(default)]
    tenant: Option<String>,
    /// Erase; without it a dry run.
    #[serde(default)]
    confirm: bool,
}

/// The request's JSON body as `T`, or a 400 answer saying what is wrong with it.
fn typed<T: serde::de::DeserializeOwned>(req: &Request) -> Result<T, Response> {
    let body = body(req)?;
    serde_json::from_value(body).map_err(|e| error(400, &format!("the body is not right: {e}")))
}

/// `POST /api/v1/archive/restore` with `{"queue", "id", "as": "original" | "new"}`.
pub async fn restore(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    if let Err(answer) = allowed(&ctx, Permission::Restore, "restore an archived job") {
        return Ok(answer);
    }
    let body: RestoreBody = match typed(req) {
        Ok(b) => b,
        Err(answer) => return Ok(answer),
    };
    let (queue, id) = (body.queue.trim(), body.id.trim());
    if queue.is_empty() || id.is_empty() {
        return Ok(error(
            400,
            "name the job: {\"queue\": <key base>, \"id\": <job id>}",
        ));
    }
    let mode = match body.mode {
        None | Some(RestoreAs::Original) => RestoreMode::Original,
        Some(RestoreAs::New) => RestoreMode::New,
    };
    let queue = queue.trim_end_matches(':').to_string();
    let actor = actor(&ctx, req);
    let Some(r) = restore_job(&mut ctx, &queue, id, mode, &actor).await? else {
        return Ok(not_in_view());
    };
    Ok(json(
        200,
        &json!({
            "queue": queue,
            "originalId": r.original_id,
            "id": r.id,
            "state": r.state,
            "heldUntil": r.held_until,
            "unshipped": r.unshipped,
            "actor": actor,
        }),
    ))
}

/// `POST /api/v1/erasure` with `{"subject": "<name>=<id>", "requestId", "tenant"?,
/// "confirm": true}`: without `confirm`, a dry run that changes nothing. A tenant's token
/// erases in its own tenant only. The answer is the receipt, as `forget --json` prints it.
pub async fn erasure(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    if let Err(answer) = allowed(&ctx, Permission::Erase, "start an erasure") {
        return Ok(answer);
    }
    let body: ErasureBody = match typed(req) {
        Ok(b) => b,
        Err(answer) => return Ok(answer),
    };
    let Some((name, value)) = body
        .subject
        .split_once('=')
        .map(|(n, v)| (n.trim(), v.trim()))
        .filter(|(n, v)| !n.is_empty() && !v.is_empty())
    else {
        return Ok(error(400, "`subject` is `<name>=<id>`, e.g. user=u-1042"));
    };
    let request_id = body.request_id.trim();
    if request_id.is_empty() || request_id.chars().any(unprintable) {
        return Ok(error(
            400,
            "`requestId` names the erasure request, in printable characters",
        ));
    }
    let tenant = match (
        &ctx.caller.token.tenant,
        body.tenant.as_deref().map(str::trim),
    ) {
        (Some(own), _) => Some(own.clone()),
        (None, Some("")) => {
            return Ok(error(
                400,
                "`tenant` is empty; leave it out for every tenant",
            ));
        }
        (None, other) => other.map(str::to_string),
    };
    let form = Form {
        subject: name.to_string(),
        value: value.to_string(),
        request_id: request_id.to_string(),
        tenant,
    };
    let actor = actor(&ctx, req);
    let receipt = erasure_of(&mut ctx, &form, !body.confirm, actor).await?;
    Ok(json(200, &receipt))
}
