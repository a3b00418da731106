//! The API's actions: sweep a queue now and restore a job (operators), start or plan an
//! erasure (admins). Each checks the role before anything is read, runs what the dashboard's
//! form runs, and is audited with the token's name, or `<token> for <user>` when an
//! integration acts for one of its users (`X-Bullsweep-On-Behalf-Of`).

use super::reads::not_in_view;
use super::{allowed, body, error, json, single};
use crate::Ctx;
use crate::actions::{LOCKED, Swept, erasure_of, restore_job, sweep_queue};
use crate::pages::erasure::Form;
use crate::scope;
use bullsweep_core::Error;
use bullsweep_core::bullmq::RestoreMode;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_policy::{JobState, Permission, Resolution, unprintable};
use serde::Deserialize;
use serde_json::json;

/// The header naming the user an integration acts for.
pub const ON_BEHALF_OF: &str = "x-bullsweep-on-behalf-of";
/// The longest user name [`ON_BEHALF_OF`] may give, in characters.
const USER_MAX: usize = 128;

/// The audit actor: the token's name, and the user it acts for when [`ON_BEHALF_OF`] names
/// one (`<token> for <user>`, the value without the spaces around it). A name that could be
/// audited as another's is refused with a 400, never changed: one with a character that does
/// not print or that changes how the text around it reads (`b\u{200B}ob` would read as
/// `bob`), one that is not UTF-8, one over [`USER_MAX`] characters (cut, two names could
/// become one).
fn actor(ctx: &Ctx<'_>, req: &Request) -> Result<String, Response> {
    let token = ctx.caller.token.name.clone();
    let user = req.header(ON_BEHALF_OF).unwrap_or_default().trim();
    let refused = |why: String| {
        Err(error(
            400,
            &format!("X-Bullsweep-On-Behalf-Of {why}; nothing was done"),
        ))
    };
    if let Some(c) = user.chars().find(|c| unprintable(*c) || *c == '\u{FFFD}') {
        return refused(if c == '\u{FFFD}' {
            "is not UTF-8 (or holds U+FFFD)".to_string()
        } else {
            format!(
                "holds U+{:04X}, a character that does not print or that changes how the name reads",
                c as u32
            )
        });
    }
    let length = user.chars().count();
    if length > USER_MAX {
        return refused(format!(
            "is {length} characters long; a user name may have {USER_MAX} at most"
        ));
    }
    Ok(match user {
        "" => token,
        user => format!("{token} for {user}"),
    })
}

/// `POST /api/v1/queue/sweep?key=[&state=]`: one bounded, audited sweep of a governed queue
/// under its policy, or under its rules for `state` alone (bull-board's Clean of one state);
/// 409 for a queue no policy governs or a state its policy has no rule for (nothing is done),
/// 423 while another sweep holds its lock.
pub async fn sweep(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    if let Err(answer) = allowed(&ctx, Permission::SweepNow, "sweep a queue") {
        return Ok(answer);
    }
    let (key, state) = match (single(req, "key"), sweep_state(req)) {
        (Ok(Some(key)), Ok(state)) if !key.is_empty() => (key, state),
        (Err(answer), _) | (_, Err(answer)) => return Ok(answer),
        _ => return Ok(error(400, "say which queue: ?key=<key base>")),
    };
    let actor = match actor(&ctx, req) {
        Ok(actor) => actor,
        Err(answer) => return Ok(answer),
    };
    let Some(q) = scope::queue(&mut ctx, &key).await? else {
        return Ok(not_in_view());
    };
    let Resolution::Covered(eff) = ctx.set.resolve(&q) else {
        return Ok(error(
            409,
            "no policy governs this queue, so there is nothing to sweep it by",
        ));
    };
    if let Some(state) = state
        && eff.of_state(state).is_none()
    {
        let message = format!(
            "policy {} has no rule for {state} jobs, so a sweep of them would act on none; nothing was done",
            eff.name
        );
        return Ok(json(
            409,
            &json!({ "error": message, "policy": eff.name, "state": state.as_str() }),
        ));
    }
    let Swept::Done(report) = sweep_queue(&mut ctx, q, state, actor.clone()).await? else {
        return Ok(error(423, LOCKED));
    };
    Ok(json(
        200,
        &json!({
            "queue": key,
            "state": state.map(JobState::as_str),
            "policy": eff.name,
            "done": report.done(),
            "doneByAction": report.done_by_action(),
            "actor": actor,
            "report": report,
        }),
    ))
}

/// The state a sweep is asked to keep to: `None` (the whole policy) when `state` is not
/// given; a 400 when it is given empty, more than once, or naming no state bullsweep governs
/// by that name. A sweep acts on one state or on the whole policy, never on a guess.
fn sweep_state(req: &Request) -> Result<Option<JobState>, Response> {
    let Some(name) = single(req, "state")? else {
        return Ok(None);
    };
    let names: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
    let names = names.join(", ");
    if name.is_empty() {
        return Err(error(
            400,
            &format!(
                "`state` is one of {names}, not empty (leave it out to sweep under the whole policy); nothing was done"
            ),
        ));
    }
    JobState::from_name(&name)
        .map(Some)
        .ok_or_else(|| error(400, &format!("`state` is one of {names}, not `{name}`")))
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
    let actor = match actor(&ctx, req) {
        Ok(actor) => actor,
        Err(answer) => return Ok(answer),
    };
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
    let actor = match actor(&ctx, req) {
        Ok(actor) => actor,
        Err(answer) => return Ok(answer),
    };
    let receipt = erasure_of(&mut ctx, &form, !body.confirm, actor).await?;
    Ok(json(200, &receipt))
}
