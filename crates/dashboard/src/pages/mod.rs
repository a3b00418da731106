//! The pages, one file each; every one reads through `ops` and renders HTML on the server.

pub mod archive;
mod audit;
mod effectiveness;
pub mod erasure;
mod failures;
pub mod overview;
mod policies;
mod queue;
pub mod receipt;
mod record;

use crate::Ctx;
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};

/// Answers a GET.
pub async fn route(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    match req.path.as_str() {
        "/" => overview::page(ctx, req).await,
        "/queue" => queue::page(ctx, req).await,
        "/effectiveness" => effectiveness::page(ctx, req).await,
        "/policies" => policies::page(ctx, req).await,
        "/audit" => audit::page(ctx, req).await,
        "/archive" => archive::page(ctx, req).await,
        "/archive/segment" => archive::segment(ctx, req).await,
        "/archive/record" => record::page(ctx, req).await,
        "/archive/segment.jsonl" => archive::download(ctx, req).await,
        "/erasure" => erasure::page(ctx, req).await,
        "/failures" => failures::page(ctx, req).await,
        _ => Ok(crate::layout::not_found(
            ctx.caller,
            "",
            "There is no page at this address; the navigation above lists them.",
        )),
    }
}
