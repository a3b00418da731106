//! The API's actions: sweep a queue now and restore a job (operators), start or plan an
//! erasure (admins). Each checks the role before anything is read, runs what the dashboard's
//! form runs, and is audited with the token's name, or `<token> for <user>` when an
//! integration acts for one of its users (`X-Bullsweep-On-Behalf-Of`).

use super::reads::not_in_view;
use super::{allowed, body, error, json, param};
use crate::Ctx;
use crate::actions::{erasure_of, restore_job, sweep_queue};
use crate::pages::erasure::Form;
use crate::scope;
use bullsweep_core::Error;
use bullsweep_core::bullmq::RestoreMode;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_policy::{Permission, Resolution};
use serde_json::{Value, json};

/// The header naming the user an integration acts for.
pub const ON_BEHALF_OF: &str = "x-bullsweep-on-behalf-of";
/// The longest user name taken from [`ON_BEHALF_OF`].
const USER_MAX: usize = 128;

/// The audit actor: the token's name, and the user it acts for when the header names one
/// (control characters removed, at most [`USER_MAX`] characters).
fn actor(ctx: &Ctx<'_>, req: &Request) -> String {
    let token = ctx.caller.token.name.clone();
    let user: String = req
        .header(ON_BEHALF_OF)
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(USER_MAX)
        .collect();
    match user.trim() {
        "" => token,
        user => format!("{token} for {user}"),
    }
}

/// `POST /api/v1/queue/sweep?key=`: one bounded, audited sweep of a governed queue under its
/// policy; 409 for a queue no policy governs.
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
    let report = sweep_queue(&mut ctx, q, actor.clone()).await?;
    Ok(json(
        200,
        &json!({ "queue": key, "done": report.done(), "actor": actor, "report": report }),
    ))
}

/// A string field of a JSON body, trimmed, if present and not empty.
fn text(body: &Value, name: &str) -> Option<String> {
    body.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// `POST /api/v1/archive/restore` with `{"queue", "id", "as": "original" | "new"}`.
pub async fn restore(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    if let Err(answer) = allowed(&ctx, Permission::Restore, "restore an archived job") {
        return Ok(answer);
    }
    let body = match body(req) {
        Ok(b) => b,
        Err(answer) => return Ok(answer),
    };
    let (Some(queue), Some(id)) = (text(&body, "queue"), text(&body, "id")) else {
        return Ok(error(
            400,
            "name the job: {\"queue\": <key base>, \"id\": <job id>}",
        ));
    };
    let mode = match text(&body, "as").as_deref() {
        None | Some("original") => RestoreMode::Original,
        Some("new") => RestoreMode::New,
        Some(other) => {
            return Ok(error(
                400,
                &format!("`as` is original or new, not `{other}`"),
            ));
        }
    };
    let queue = queue.trim_end_matches(':').to_string();
    let Some(r) = restore_job(&mut ctx, &queue, &id, mode).await? else {
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
            "actor": ctx.caller.token.name,
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
    let body = match body(req) {
        Ok(b) => b,
        Err(answer) => return Ok(answer),
    };
    let subject = text(&body, "subject").unwrap_or_default();
    let Some((name, value)) = subject
        .split_once('=')
        .map(|(n, v)| (n.trim(), v.trim()))
        .filter(|(n, v)| !n.is_empty() && !v.is_empty())
    else {
        return Ok(error(400, "`subject` is `<name>=<id>`, e.g. user=u-1042"));
    };
    let Some(request_id) = text(&body, "requestId") else {
        return Ok(error(400, "`requestId` names the erasure request"));
    };
    let form = Form {
        subject: name.to_string(),
        value: value.to_string(),
        request_id,
        tenant: ctx.caller.token.tenant.clone().or(text(&body, "tenant")),
    };
    let dry_run = body.get("confirm").and_then(Value::as_bool) != Some(true);
    let receipt = erasure_of(&mut ctx, &form, dry_run).await?;
    Ok(json(200, &receipt))
}
