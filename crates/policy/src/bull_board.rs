//! `bullBoard:`: where a team's bull-board is, and the address of a queue's or a job's page in
//! it, for the dashboard's links.
//!
//! bull-board 9.x routes a queue at `<base>/queue/<name>` and a job at
//! `<base>/queue/<name>/<job id>`, each part written with JavaScript's `encodeURIComponent`.
//! `<name>` is the adapter's name: its `prefix` option (a display prefix, empty by default)
//! followed by the queue's name. The Redis prefix and a `displayName` do not enter it, so two
//! queues of the same name under different Redis prefixes need a display prefix in bull-board,
//! told here by `queueName` (such as `{tenant}/{queue}`).

use crate::resolve::QueueId;

/// The placeholders `queueName` may use.
pub(crate) const NAME_PLACEHOLDERS: [&str; 4] = ["queue", "tenant", "env", "prefix"];

/// The validated `bullBoard:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BullBoard {
    /// bull-board's base URL, without a trailing `/`.
    pub url: String,
    /// The template of the name bull-board knows a queue by; `{queue}` by default.
    pub queue_name: String,
}

impl BullBoard {
    /// The name bull-board knows `q` by: the template with its placeholders filled (an absent
    /// tenant or environment as empty text).
    pub fn name_of(&self, q: &QueueId) -> String {
        self.queue_name
            .replace("{queue}", &q.queue)
            .replace("{tenant}", q.tenant.as_deref().unwrap_or(""))
            .replace("{env}", q.env.as_deref().unwrap_or(""))
            .replace("{prefix}", &q.prefix)
    }

    /// The address of `q`'s page in bull-board.
    pub fn queue_url(&self, q: &QueueId) -> String {
        format!("{}/queue/{}", self.url, uri_component(&self.name_of(q)))
    }

    /// The address of job `id` of `q` in bull-board.
    pub fn job_url(&self, q: &QueueId, id: &str) -> String {
        format!("{}/{}", self.queue_url(q), uri_component(id))
    }
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
    use crate::Backend;

    fn queue(base: &str, prefix: &str, name: &str, tenant: Option<&str>) -> QueueId {
        QueueId {
            base: base.into(),
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
    fn a_queue_and_a_job_link_by_name_not_by_redis_prefix() {
        let board = BullBoard {
            url: "https://ops.example.com/queues".into(),
            queue_name: "{queue}".into(),
        };
        let q = queue("bull:acme:pay run", "bull:acme", "pay run", Some("acme"));
        assert_eq!(
            board.queue_url(&q),
            "https://ops.example.com/queues/queue/pay%20run"
        );
        assert_eq!(
            board.job_url(&q, "42/a"),
            "https://ops.example.com/queues/queue/pay%20run/42%2Fa"
        );
        let prefixed = BullBoard {
            queue_name: "{tenant}/{queue}".into(),
            ..board
        };
        assert_eq!(
            prefixed.queue_url(&q),
            "https://ops.example.com/queues/queue/acme%2Fpay%20run"
        );
        let none = queue("bull:mail", "bull", "mail", None);
        assert_eq!(prefixed.name_of(&none), "/mail");
    }
}
