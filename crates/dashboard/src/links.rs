//! Links out to the team's bull-board (`bullBoard:` in the policy file): a queue's page and an
//! archived job's. Each is an external link that sends neither an opener nor a referrer, and
//! is drawn only where the page already shows the queue, so it follows the caller's scope.
//! Nothing is drawn without `bullBoard:` or for a key base no layout of the file reads.

use crate::Ctx;
use bullsweep_policy::{Backend, QueueId};
use maud::{Markup, html};

/// The link to the queue of key base `base` in bull-board.
pub fn queue(ctx: &Ctx<'_>, base: &str, backend: Backend) -> Markup {
    match (&ctx.set.bull_board, identify(ctx, base, backend)) {
        (Some(board), Some(q)) => external(
            &board.queue_url(&q),
            &format!("Queue {} in bull-board", q.queue),
        ),
        _ => html! {},
    }
}

/// The link to job `id` of the queue of key base `base` in bull-board; none for an id kept as
/// base64 (`encoding`), which is not the id bull-board knows.
pub fn job(
    ctx: &Ctx<'_>,
    base: &str,
    backend: Backend,
    id: &str,
    encoding: Option<&str>,
) -> Markup {
    match (&ctx.set.bull_board, identify(ctx, base, backend)) {
        (Some(board), Some(q)) if encoding.is_none() => external(
            &board.job_url(&q, id),
            &format!("Job {id} of {} in bull-board", q.queue),
        ),
        _ => html! {},
    }
}

/// The queue a key base names, through the file's layouts.
fn identify(ctx: &Ctx<'_>, base: &str, backend: Backend) -> Option<QueueId> {
    ctx.set.identify_as(base, backend, ctx.env.as_deref())
}

/// An external link named `label` for assistive technology.
fn external(href: &str, label: &str) -> Markup {
    html! {
        " " a.bull-board href=(href) rel="noopener noreferrer" target="_blank" aria-label=(label) title=(label) { "bull-board ↗" }
    }
}
