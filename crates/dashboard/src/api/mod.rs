//! The JSON API under `/api/v1`: the console's reads (queues, plan, report, alerts, audit,
//! archive) and actions (sweep now, restore, erasure) for scripts and for integrations such
//! as the bull-board package, described by `docs/openapi.json` (served at
//! `/api/v1/openapi.json`).
//!
//! A caller presents a dashboard token as `Authorization: Bearer …`; a session cookie is not
//! accepted here, so a page in a browser cannot be made to call an action and the API needs
//! no CSRF token. The roles and the tenant scope are the pages': every read sees only the
//! caller's queues, and every action is audited with the token's name.

mod actions;
mod reads;
mod trails;

use crate::Ctx;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::{Error, ErrorKind};
use bullsweep_policy::Permission;
use serde::Serialize;

/// Where the API lives.
pub const PREFIX: &str = "/api/v1/";

/// The OpenAPI document, served without a token.
pub const OPENAPI: &str = include_str!("../../../../docs/openapi.json");

/// The OpenAPI document's path.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// Answers an authenticated request under [`PREFIX`]; an error becomes a JSON error (and the
/// caller of this function drops the connection to Redis on a Redis error).
pub async fn route(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let path = req.path.strip_prefix(PREFIX).unwrap_or_default();
    match (req.method.as_str(), path) {
        ("GET", "queues") => reads::queues(ctx).await,
        ("GET", "queue") => reads::queue(ctx, req).await,
        ("GET", "plan") => reads::plan(ctx, req).await,
        ("GET", "report") => reads::report(ctx).await,
        ("GET", "alerts") => reads::alerts(ctx).await,
        ("GET", "audit") => trails::audit(ctx, req).await,
        ("GET", "archive") => trails::archive(ctx, req).await,
        ("POST", "queue/sweep") => actions::sweep(ctx, req).await,
        ("POST", "archive/restore") => actions::restore(ctx, req).await,
        ("POST", "erasure") => actions::erasure(ctx, req).await,
        (_, "queues" | "queue" | "plan" | "report" | "alerts" | "audit" | "archive") => {
            Ok(error(405, "only GET on this path").with("allow", "GET"))
        }
        (_, "queue/sweep" | "archive/restore" | "erasure") => {
            Ok(error(405, "only POST on this path").with("allow", "POST"))
        }
        _ => Ok(error(404, "no such API path; see /api/v1/openapi.json")),
    }
}

/// A JSON response.
pub fn json(status: u16, value: &impl Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_else(|e| {
        format!("{{\"error\":\"the answer could not be written as JSON: {e}\"}}").into_bytes()
    });
    Response::new(status, "application/json", body)
}

/// A JSON error: `{"error": message}`.
pub fn error(status: u16, message: &str) -> Response {
    json(status, &serde_json::json!({ "error": message }))
}

/// The JSON error for `e`, with its kind: 400 for what the request asked, 503 when Redis
/// failed or cannot be reached, 500 for the rest. A tenant's token is told only that Redis
/// failed (the message names the server) and gets no hint (a hint may name what the whole
/// database holds).
pub fn failure(e: &Error, tenant_view: bool) -> Response {
    let status = match e.kind {
        ErrorKind::Config => 400,
        ErrorKind::Redis => 503,
        _ => 500,
    };
    let message = crate::scope::told(e, tenant_view, false);
    let mut body = serde_json::json!({ "error": message, "kind": e.kind.as_str() });
    if let (Some(hint), false) = (&e.hint, tenant_view) {
        body["hint"] = serde_json::json!(hint);
    }
    json(status, &body)
}

/// The answer when what every request needs is not at hand (the policy file, Redis): the
/// error for a token that sees every tenant; for a tenant's token only which of the two,
/// since the policy file's errors quote other tenants' policies. Either way 503, and logged.
pub fn unavailable(e: &Error, tenant_view: bool) -> Response {
    bullsweep_base::log::log_repeated(
        "dashboard-api-context",
        "error",
        &format!("dashboard API: {}", e.clone().with_hint_inline()),
    );
    let message = crate::scope::told(e, tenant_view, true);
    json(
        503,
        &serde_json::json!({ "error": message, "kind": e.kind.as_str() }),
    )
}

/// `Err` with a 403 answer when the caller's role does not allow `needs`.
fn allowed(ctx: &Ctx<'_>, needs: Permission, what: &str) -> Result<(), Response> {
    let role = ctx.caller.token.role;
    if role.allows(needs) {
        Ok(())
    } else {
        Err(error(
            403,
            &format!("a token of role {} may not {what}", role.as_str()),
        ))
    }
}

/// The request's JSON body, or a 400 answer saying why it is not one.
fn body(req: &Request) -> Result<serde_json::Value, Response> {
    if req.body.is_empty() {
        return Ok(serde_json::json!({}));
    }
    serde_json::from_slice(&req.body)
        .map_err(|e| error(400, &format!("the body is not JSON: {e}")))
        .and_then(|v: serde_json::Value| {
            if v.is_object() {
                Ok(v)
            } else {
                Err(error(400, "the body must be a JSON object"))
            }
        })
}

/// A query parameter an action takes at most once, spaces around it trimmed: `None` when it is
/// not there (an empty value is returned as it is, for the caller to refuse), a 400 when it
/// is there more than once (an action never picks one of two values).
fn single(req: &Request, name: &str) -> Result<Option<String>, Response> {
    let mut given = req.query.iter().filter(|(k, _)| k == name);
    let first = given.next().map(|(_, v)| v.trim().to_string());
    if given.next().is_some() {
        return Err(error(
            400,
            &format!("`{name}` is given more than once; give it once (nothing was done)"),
        ));
    }
    Ok(first)
}

/// A request's non-empty query parameter.
fn param(req: &Request, name: &str) -> Option<String> {
    req.param(name)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}
