//! Erasure: past requests with their receipts and, for admins, a new request: a dry run
//! first, then a confirmation that runs `forget` and is audited with the admin's name.

use crate::format::time;
use crate::{Ctx, layout};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::forget::receipts;
use bullsweep_policy::Permission;
use maud::{Markup, html};

/// `GET /erasure`.
pub async fn page(mut ctx: Ctx<'_>, _req: &Request) -> Result<Response, Error> {
    let body = list(&mut ctx, None).await?;
    Ok(layout::html(
        200,
        layout::page("Erasure", "/erasure", ctx.caller, None, body),
    ))
}

/// The page's content: the form (or, after a dry run, its receipt and the confirmation), then
/// the past requests in the caller's scope.
pub async fn list(
    ctx: &mut Ctx<'_>,
    dry_run: Option<(&Form, &serde_json::Value)>,
) -> Result<Markup, Error> {
    let tenant = ctx.caller.token.tenant.clone();
    let past: Vec<serde_json::Value> = receipts(&mut ctx.con, &ctx.url)
        .await?
        .into_iter()
        .filter(|r| tenant.is_none() || r["tenant"].as_str() == tenant.as_deref())
        .collect();
    let admin = ctx.caller.token.role.allows(Permission::Erase);
    Ok(html! {
        @if let Some((form, receipt)) = dry_run {
            h2 { "Dry run of " (form.request_id) }
            (super::receipt::summary(receipt, "dry-run"))
            form method="post" action="/erasure" {
                (hidden(ctx, form))
                input type="hidden" name="confirm" value="yes";
                button.danger type="submit" { "Erase now" }
            }
        } @else if admin {
            h2 { "New request" }
            form.stack method="post" action="/erasure" {
                input type="hidden" name="csrf" value=(ctx.caller.csrf);
                label { "Subject (name=id, from the policy's subjects)" input name="subject" placeholder="user=u-1042" required; }
                label { "Request id" input name="request_id" placeholder="GDPR-2026-0042" required; }
                @if tenant.is_none() { label { "Tenant (optional)" input name="tenant"; } }
                button type="submit" { "Dry run" }
            }
        } @else {
            p.muted { "Only an admin token may start an erasure." }
        }
        h2 { "Past requests" }
        div.wrap { table id="erasures" {
            thead { tr { th scope="col" { "Request" } th.opt scope="col" { "Subject" } th.opt scope="col" { "Tenant" } th scope="col" { "Status" } th.opt scope="col" { "Started" } th scope="col" { "Receipt" } } }
            tbody { @for r in &past {
                tr data-request=(r["requestId"].as_str().unwrap_or("")) {
                    td.nowrap { (r["requestId"].as_str().unwrap_or("")) } td.opt { (r["subject"].as_str().unwrap_or("")) }
                    td.opt { (r["tenant"].as_str().unwrap_or("")) } td { (r["status"].as_str().unwrap_or("")) }
                    td.opt.nowrap { (time(r["startedAt"].as_i64().unwrap_or(0))) }
                    td { details { summary { "receipt" } pre { (serde_json::to_string_pretty(r).unwrap_or_default()) } } }
                }
            } }
        } }
        @if past.is_empty() { p.muted { "No erasure has been recorded." } }
    })
}

/// A new request's fields.
pub struct Form {
    /// The subject's name in `subjects:`.
    pub subject: String,
    /// Its id.
    pub value: String,
    /// The request id.
    pub request_id: String,
    /// The tenant (forced to the token's).
    pub tenant: Option<String>,
}

fn hidden(ctx: &Ctx<'_>, form: &Form) -> Markup {
    html! {
        input type="hidden" name="csrf" value=(ctx.caller.csrf);
        input type="hidden" name="subject" value=(format!("{}={}", form.subject, form.value));
        input type="hidden" name="request_id" value=(form.request_id);
        @if let Some(t) = &form.tenant { input type="hidden" name="tenant" value=(t); }
    }
}
