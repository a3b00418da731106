//! Links out to the team's bull-board (`bullBoard:` in the policy file): a queue's page and an
//! archived job's. Each is an external link that sends neither an opener nor a referrer, and
//! is drawn only where the page already shows the queue, so it follows the caller's scope.
//! Nothing is drawn without `bullBoard:` or for a key base no layout of the file reads.
//!
//! bull-board 9.x routes a queue at `<base>/queue/<name>` and a job at
//! `<base>/queue/<name>/<job id>`, each part written with JavaScript's `encodeURIComponent`.
//! `<name>` is the adapter's name: its `prefix` option (a display prefix, empty by default)
//! and then the queue's name. Neither the Redis prefix nor a `displayName` enters it, so two
//! queues of one name under two Redis prefixes need a display prefix in bull-board, told to
//! bullsweep by `queueName` (such as `{tenant}/{queue}`).

use crate::Ctx;
use bullsweep_policy::{Backend, BullBoard, QueueId};
use maud::{Markup, html};

/// The link to the queue of key base `base` in bull-board.
pub fn queue(ctx: &Ctx<'_>, base: &str, backend: Backend) -> Markup {
    match (&ctx.set.bull_board, identify(ctx, base, backend)) {
        (Some(board), Some(q)) => external(
            &queue_url(board, &q),
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
            &format!("{}/{}", queue_url(board, &q), uri_component(id)),
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

/// The name bull-board knows `q` by: `queueName` with its placeholders filled (an absent
/// tenant or environment as empty text).
fn name_of(board: &BullBoard, q: &QueueId) -> String {
    board
        .queue_name
        .replace("{queue}", &q.queue)
        .replace("{tenant}", q.tenant.as_deref().unwrap_or(""))
        .replace("{env}", q.env.as_deref().unwrap_or(""))
        .replace("{prefix}", &q.prefix)
}

/// The address of `q`'s page in bull-board.
fn queue_url(board: &BullBoard, q: &QueueId) -> String {
    format!("{}/queue/{}", board.url, uri_component(&name_of(board, q)))
}

/// Percent-encodes `text` as JavaScript's `encodeURIComponent` does: every byte of its UTF-8
/// but ASCII letters, digits and `-_.!~*'()`.
fn uri_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(prefix: &str, name: &str, tenant: Option<&str>) -> QueueId {
        QueueId {
            base: format!("{prefix}:{name}"),
            prefix: prefix.into(),
            queue: name.into(),
            tenant: tenant.map(Into::into),
            env: None,
            backend: Backend::Bullmq,
        }
    }

    #[test]
    fn names_are_encoded_as_encode_uri_component_does() {
        assert_eq!(uri_component("a b/c?d#é"), "a%20b%2Fc%3Fd%23%C3%A9");
        assert_eq!(uri_component("x-_.!~*'()9"), "x-_.!~*'()9");
        assert_eq!(uri_component("acme:billing"), "acme%3Abilling");
    }

    #[test]
    fn a_queue_links_by_its_name_not_its_redis_prefix() {
        let board = BullBoard {
            url: "https://ops.example.com/queues".into(),
            queue_name: "{queue}".into(),
        };
        let q = queue("bull:acme", "pay run", Some("acme"));
        assert_eq!(
            queue_url(&board, &q),
            "https://ops.example.com/queues/queue/pay%20run"
        );
        let prefixed = BullBoard {
            queue_name: "{tenant}/{queue}".into(),
            ..board
        };
        assert_eq!(
            queue_url(&prefixed, &q),
            "https://ops.example.com/queues/queue/acme%2Fpay%20run"
        );
        assert_eq!(name_of(&prefixed, &queue("bull", "mail", None)), "/mail");
    }
}
