//! The actions, each a POST that has passed the CSRF check: sweep a queue now and restore a
//! job (operators), start an erasure (admins). Each checks the caller's role and scope before
//! anything is read, runs the same `ops` function as the command line, and is audited with
//! the token's name (`actor`).

use crate::pages::archive::sink;
use crate::pages::erasure::{self, Form};
use crate::pages::overview::urlencode;
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::bullmq::RestoreMode;
use bullsweep_core::daemon::http::{Request, Response, first};
use bullsweep_core::engine::forget::{ForgetRequest, Receipt};
use bullsweep_core::engine::{NoObserver, QueueSkipped, Report};
use bullsweep_core::ops::restore::{DEFAULT_HOLD_MS, RestoreRequest, Restored};
use bullsweep_core::ops::{self, DEFAULT_BUDGET_US, RunScope, audited_run};
use bullsweep_policy::{JobState, Permission, QueueId, Resolution};
use maud::html;
use std::time::Duration;

/// Answers a POST.
pub async fn route(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let (needs, title) = match req.path.as_str() {
        "/queue/sweep" => (Permission::SweepNow, "sweep a queue now"),
        "/archive/restore" => (Permission::Restore, "restore an archived job"),
        "/erasure" => (Permission::Erase, "start an erasure"),
        _ => return Ok(Response::text(404, "no such action\n")),
    };
    if !ctx.caller.token.role.allows(needs) {
        let body = html! { p.notice.bad role="alert" { "Your token's role (" (ctx.caller.token.role.as_str()) ") may not " (title) ". Nothing was changed." } };
        return Ok(layout::html(
            403,
            layout::page("Not allowed", "", ctx.caller, None, body),
        ));
    }
    let form = req.form();
    let field = |k: &str| {
        first(&form, k)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    match req.path.as_str() {
        "/queue/sweep" => sweep(ctx, field("key").unwrap_or_default()).await,
        "/archive/restore" => {
            let mode = match field("as").as_deref() {
                Some("new") => RestoreMode::New,
                _ => RestoreMode::Original,
            };
            restore(
                ctx,
                field("queue").unwrap_or_default(),
                field("id").unwrap_or_default(),
                mode,
            )
            .await
        }
        _ => erase(ctx, &field).await,
    }
}

async fn sweep(mut ctx: Ctx<'_>, base: String) -> Result<Response, Error> {
    let Some(q) = scope::queue(&mut ctx, &base).await? else {
        return Ok(layout::not_found(
            ctx.caller,
            "/",
            "No governed queue with that key base is in view.",
        ));
    };
    let actor = ctx.caller.token.name.clone();
    let Swept::Done(report) = sweep_queue(&mut ctx, q, None, actor).await? else {
        let body = html! { p.notice.bad role="alert" { "Not swept: " (LOCKED) "." } };
        return Ok(layout::html(
            409,
            layout::page("Not swept", "/", ctx.caller, None, body),
        ));
    };
    Ok(Response::text(303, "swept\n").with(
        "location",
        format!("/queue?key={}&swept={}", urlencode(&base), report.done()),
    ))
}

/// Sweeps `q` now under its policy (`state`'s rules alone when given, as
/// `EffectivePolicy::of_state` says), as a run does, audited as done by `actor`: one
/// bounded, locked run (waiting 5 s for a lock held elsewhere); a queue's error is the call's.
/// A queue no policy governs is refused (a 400): there is nothing to sweep.
pub async fn sweep_queue(
    ctx: &mut Ctx<'_>,
    q: QueueId,
    state: Option<JobState>,
    actor: String,
) -> Result<Swept, Error> {
    let base = q.base.clone();
    if !matches!(ctx.set.resolve(&q), Resolution::Covered(_)) {
        return Err(Error::config(format!(
            "no policy governs {base}: there is nothing to sweep; see its rules on the policies page"
        )));
    }
    let run = RunScope {
        lock_wait: Some(Duration::from_secs(5)),
        actor: Some(actor),
        state,
        ..scope::run_scope(ctx, vec![q])
    };
    let report = audited_run(&mut ctx.con, &ctx.url, &ctx.set, run, &NoObserver).await?;
    if let Some(e) = report.queues.iter().find_map(|r| r.error.clone()) {
        return Err(Error::runtime(format!("{base}: {e}")));
    }
    if report
        .queues
        .iter()
        .any(|r| r.skipped == Some(QueueSkipped::Locked))
    {
        return Ok(Swept::Locked);
    }
    Ok(Swept::Done(report))
}

/// What a sweep asked for now did.
pub enum Swept {
    /// It ran; what it did.
    Done(Report),
    /// Another sweep (the daemon's, or another person's) held the queue's lock past the wait:
    /// nothing was done.
    Locked,
}

/// What a caller is told when [`Swept::Locked`].
pub const LOCKED: &str = "another sweep holds this queue's lock (the daemon's scheduled sweep, \
                          or another person's); nothing was done; try again in a moment";

async fn restore(
    mut ctx: Ctx<'_>,
    base: String,
    id: String,
    mode: RestoreMode,
) -> Result<Response, Error> {
    let base = base.trim_end_matches(':').to_string();
    let actor = ctx.caller.token.name.clone();
    let Some(restored) = restore_job(&mut ctx, &base, &id, mode, &actor).await? else {
        return Ok(layout::not_found(
            ctx.caller,
            "/archive",
            "No governed queue with that key base is in view.",
        ));
    };
    let body = html! { p.notice role="status" { "Restored job " code { (restored.id) } " of " code { (base) } " into " (restored.state) "; audited as " (ctx.caller.token.name) "." } };
    Ok(layout::html(
        200,
        layout::page("Restored", "/archive", ctx.caller, None, body),
    ))
}

/// Restores archived job `id` of queue `base` from the policy file's sink, audited as done
/// by `actor` in the same call (an original job is held for a day); `None` when the queue
/// is not in the caller's view.
pub async fn restore_job(
    ctx: &mut Ctx<'_>,
    base: &str,
    id: &str,
    mode: RestoreMode,
    actor: &str,
) -> Result<Option<Restored>, Error> {
    if scope::queue(ctx, base).await?.is_none() {
        return Ok(None);
    };
    let Some(sink) = sink(&ctx.set)? else {
        return Err(Error::config("the policy file has no `archive:` sink"));
    };
    let req = RestoreRequest {
        base,
        id,
        mode,
        actor,
        hold_ms: DEFAULT_HOLD_MS,
    };
    ops::restore::restore(&mut ctx.con, &sink, &ctx.set, req)
        .await
        .map(Some)
}

async fn erase(
    mut ctx: Ctx<'_>,
    field: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Response, Error> {
    let subject = field("subject").unwrap_or_default();
    let Some((name, value)) = subject
        .split_once('=')
        .filter(|(n, v)| !n.trim().is_empty() && !v.trim().is_empty())
    else {
        return Err(Error::config(format!(
            "subject `{subject}` is not `<name>=<id>`, e.g. user=u-1042"
        )));
    };
    let Some(request_id) = field("request_id") else {
        return Err(Error::config("the request id is empty"));
    };
    if request_id.chars().any(bullsweep_policy::unprintable) {
        return Err(Error::config(
            "the request id may not hold a control character or an invisible one",
        ));
    }
    let form = Form {
        subject: name.trim().to_string(),
        value: value.trim().to_string(),
        request_id,
        tenant: ctx.caller.token.tenant.clone().or(field("tenant")),
    };
    let dry_run = field("confirm").as_deref() != Some("yes");
    let actor = ctx.caller.token.name.clone();
    let receipt = erasure_of(&mut ctx, &form, dry_run, actor).await?;
    let json = serde_json::to_value(&receipt).unwrap_or_default();
    let body = if dry_run {
        erasure::list(&mut ctx, Some((&form, &json))).await?
    } else {
        let listed = erasure::list(&mut ctx, None).await?;
        html! {
            p.notice role="status" { "Erasure " (form.request_id) ": " (receipt.status) "; audited as " (ctx.caller.token.name) "." }
            h2 { "Receipt of " (form.request_id) }
            (crate::pages::receipt::summary(&json, "receipt"))
            (listed)
        }
    };
    Ok(layout::html(
        200,
        layout::page("Erasure", "/erasure", ctx.caller, None, body),
    ))
}

/// Starts (or, with `dry_run`, plans) the erasure `form` asks for, with the bounds the
/// dashboard uses (30 s for an active job, 5 s for a queue's lock), audited as done by
/// `actor`; the receipt says what was found and done.
pub async fn erasure_of(
    ctx: &mut Ctx<'_>,
    form: &Form,
    dry_run: bool,
    actor: String,
) -> Result<Receipt, Error> {
    let req = ForgetRequest {
        subject: form.subject.clone(),
        value: form.value.clone(),
        tenant: form.tenant.clone(),
        request_id: form.request_id.clone(),
        dry_run,
        wait_active: Duration::from_secs(30),
        lock_wait: Duration::from_secs(5),
        env: ctx.env.clone(),
        budget_us: DEFAULT_BUDGET_US,
        actor: Some(actor),
    };
    ops::forget::forget(&mut ctx.con, &ctx.url, &ctx.set, req, None).await
}
