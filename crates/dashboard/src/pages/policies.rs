//! Policies: which queues are governed, uncovered or unmanaged; the policy file in force with
//! its version (as written for an admin, its credentials masked for a viewer or operator,
//! not at all for a tenant's token); and `explain` for any queue in view, with a link to its
//! next sweep's preview.

use super::overview::urlencode;
use super::queue::explain;
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_policy::{Permission, Resolution};
use maud::html;
use sha2::{Digest, Sha256};

/// `GET /policies?queue=<base>`.
pub async fn page(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let inv = scope::inventory(&mut ctx).await?;
    let (mut governed, mut uncovered, mut tied) = (Vec::new(), Vec::new(), Vec::new());
    for q in &inv.managed {
        match ctx.set.resolve(q) {
            Resolution::Covered(eff) => governed.push((q, eff.name)),
            Resolution::Uncovered => uncovered.push(q),
            Resolution::Tie { .. } => tied.push(q),
        }
    }
    let digest = Sha256::digest(ctx.policy_text.as_bytes());
    let version: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let chosen = req
        .param("queue")
        .and_then(|b| inv.managed.iter().find(|q| q.base == b));
    let tenant_view = ctx.caller.token.tenant.is_some();
    // The file's credentials let their holder act elsewhere (post to the webhook, write the
    // audit store): only an admin reads them.
    let admin = ctx.caller.token.role.allows(Permission::ReadRaw);
    let masked = (!admin && !tenant_view)
        .then(|| ctx.set.masked_text(&ctx.policy_text))
        .flatten();
    let body = html! {
        ul.totals aria-label="Coverage" {
            li { span.v data-coverage="governed" { (governed.len()) } span.k { "governed" } }
            li { span.v data-coverage="uncovered" { (uncovered.len()) } span.k { "uncovered (no policy)" } }
            li { span.v data-coverage="tied" { (tied.len()) } span.k { "tied policies" } }
            @if !tenant_view { li { span.v data-coverage="unmanaged" { (inv.unmanaged.len()) } span.k { "unmanaged (no layout)" } } }
        }
        h2 { "Explain a queue" }
        form.filters method="get" action="/policies" {
            label { "Queue" select name="queue" {
                @for q in &inv.managed { option value=(q.base) selected[chosen.is_some_and(|c| c.base == q.base)] { (q.base) } }
            } }
            button type="submit" { "Explain" }
        }
        @if let Some(q) = chosen {
            (explain(&ctx.set.resolve(q)))
            p { a href=(format!("/queue?key={}", urlencode(&q.base))) { "Preview its next sweep" } }
        }
        h2 { "Coverage" }
        div.wrap { table id="coverage" {
            thead { tr { th scope="col" { "Queue" } th scope="col" { "Tenant" } th scope="col" { "Coverage" } } }
            tbody {
                @for (q, policy) in &governed { tr { td { a href=(format!("/queue?key={}", urlencode(&q.base))) { (q.base) } } td { (q.tenant.as_deref().unwrap_or("")) } td.ok { "governed by " (policy) } } }
                @for q in &uncovered { tr { td { (q.base) } td { (q.tenant.as_deref().unwrap_or("")) } td.warn { "uncovered" } } }
                @for q in &tied { tr { td { (q.base) } td { (q.tenant.as_deref().unwrap_or("")) } td.bad { "tie: left alone" } } }
                @for u in &inv.unmanaged { tr { td.key { (u.base) } td {} td.muted { "unmanaged: " (u.why.reason().unwrap_or("no layout matches")) } } }
            }
        } }
        h2 { "The policy file in force" }
        p { code { (ctx.config.display()) } ", version " code data-version=(version) { (version) } " (SHA-256 of its text)" }
        @if tenant_view {
            p.muted { "The file names every tenant's queues, so a tenant token sees only the rules above." }
        } @else if admin {
            pre id="policy-text" { (ctx.policy_text) }
        } @else if let Some(text) = &masked {
            p.muted { "Credentials (the webhook's headers and its URL past the host, passwords and query values in URLs) show as " code { "***" } "; an admin token sees the file as written." }
            pre id="policy-text" data-masked="true" { (text) }
        } @else {
            p.muted { "The file holds a credential written in a form that cannot be masked, so its text is shown to admin tokens only." }
        }
    };
    Ok(layout::html(
        200,
        layout::page("Policies", "/policies", ctx.caller, None, body),
    ))
}
