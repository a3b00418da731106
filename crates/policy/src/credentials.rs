//! The policy file as someone who may not read its credentials reads it (a dashboard viewer
//! or operator): the text as written, with every value that lets its holder act elsewhere
//! masked. Those are the webhook's headers (`Authorization: Bearer …`), the webhook's URL past
//! its host (many services put the token in the path: `hooks.slack.com/services/T…/B…/X…`),
//! and the password and query values of every URL (the audit store's
//! `postgres://user:pw@host/db`, each source's).

use crate::model::{AuditTarget, PolicySet};
use crate::redaction::word_spans;
use crate::source::SourceKind;

/// What a masked value shows.
const MASK: &str = "***";

impl PolicySet {
    /// The text of the file this set was compiled from (`text`), with every credential it
    /// holds replaced by `***` wherever it stands as a value of its own. `None` when a
    /// credential is not in the text as the set holds it (written with escapes, or the text
    /// is another file): then nothing is shown, rather than the secret.
    pub fn masked_text(&self, text: &str) -> Option<String> {
        let mut secrets = self.credentials();
        // Longest first: a header value may be part of a URL.
        secrets.sort_by_key(|(secret, _)| std::cmp::Reverse(secret.len()));
        let mut out = text.to_string();
        for (secret, shown) in secrets {
            let spans = word_spans(&out, &secret);
            if spans.is_empty() {
                return None;
            }
            out = crate::pii::replace_spans(&out, &spans, &shown);
        }
        Some(out)
    }

    /// Each credential as the set holds it, and what shows in its place.
    fn credentials(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(hook) = &self.notify.webhook {
            out.extend(hook.headers.iter().map(|(_, v)| (v.clone(), MASK.into())));
            out.push((hook.url.clone(), masked_url(&hook.url, true)));
        }
        if let AuditTarget::Postgres(url) = &self.audit {
            out.push((url.clone(), masked_url(url, false)));
        }
        // A source's connection URL (`postgres://app:pw@db/shop`, `redis://:pw@cache`).
        for source in self.sources.values() {
            let url = match &source.kind {
                SourceKind::Postgres { url, .. } => Some(url),
                SourceKind::Redis { url, .. } => url.as_ref(),
            };
            if let Some(url) = url {
                out.push((url.clone(), masked_url(url, false)));
            }
        }
        out.retain(|(secret, shown)| !secret.trim().is_empty() && secret != shown);
        out
    }
}

/// `url` with the password of its user part and every query value masked, and with
/// `with_path` its path too.
pub fn masked_url(url: &str, with_path: bool) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return MASK.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:{MASK}@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = tail.split('#').next().unwrap_or_default();
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    let path = if with_path && path.len() > 1 {
        format!("/{MASK}")
    } else {
        path.to_string()
    };
    let query: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) => format!("{name}={MASK}"),
            None => pair.to_string(),
        })
        .collect();
    if query.is_empty() {
        format!("{scheme}://{authority}{path}")
    } else {
        format!("{scheme}://{authority}{path}?{}", query.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(text: &str) -> PolicySet {
        crate::compile("p.yaml", text).expect("valid policy")
    }

    const FILE: &str = r#"version: 1
audit: { url: "postgres://bullsweep:s3cr%40t-pw@db.internal:5432/audit?sslpassword=k3y" }
notify:
  webhook:
    url: https://hooks.example.com/services/T0001/B0002/XXXXSECRET
    headers:
      Authorization: "Bearer tok-9f8e7d"
      X-Retry: "1"
sources:
  orders:
    postgres: { url: "postgres://app:0rd3rs-pw@db/shop", query: "SELECT id AS key FROM o WHERE id = ANY($1)" }
  carts:
    redis: { url: "redis://:c4rt-pw@cache:6379/2", key: "cart:{key}" }
policies:
  - name: all
    queueNamePattern: "*"
    rules: { completed: { maxCount: 100 } }
"#;

    /// Issue 24 red team: any viewer without a tenant read the webhook's headers and the
    /// audit store's password on the policies page.
    #[test]
    fn credentials_are_masked_and_the_rest_reads_as_written() {
        let shown = compiled(FILE)
            .masked_text(FILE)
            .expect("every credential found");
        for secret in [
            "s3cr%40t-pw",
            "k3y",
            "tok-9f8e7d",
            "T0001",
            "XXXXSECRET",
            "0rd3rs-pw",
            "c4rt-pw",
        ] {
            assert!(!shown.contains(secret), "{secret} in:\n{shown}");
        }
        assert!(
            shown.contains(
                r#"url: "postgres://bullsweep:***@db.internal:5432/audit?sslpassword=***""#
            )
        );
        assert!(shown.contains("url: https://hooks.example.com/***\n"));
        assert!(
            shown.contains(r#"url: "postgres://app:***@db/shop""#),
            "{shown}"
        );
        assert!(shown.contains(r#"Authorization: "***""#));
        assert!(shown.contains(r#"X-Retry: "***""#));
        assert!(
            shown.contains("rules: { completed: { maxCount: 100 } }"),
            "{shown}"
        );
    }

    #[test]
    fn a_credential_not_written_as_held_shows_nothing() {
        let escaped = FILE.replace("Bearer tok-9f8e7d", r"Bearer tok-9f8e\x37d");
        assert_eq!(compiled(&escaped).masked_text(&escaped), None);
        let plain = "version: 1\npolicies:\n  - { name: a, queueNamePattern: a, rules: { completed: { maxCount: 1 } } }\n";
        assert_eq!(compiled(plain).masked_text(plain).as_deref(), Some(plain));
    }

    #[test]
    fn urls_keep_what_is_not_secret() {
        assert_eq!(
            masked_url("postgres://u:p@h/db?a=1&b", false),
            "postgres://u:***@h/db?a=***&b"
        );
        assert_eq!(masked_url("https://h.io/", true), "https://h.io/");
        assert_eq!(
            masked_url("https://u@h.io/x#frag", true),
            "https://u@h.io/***"
        );
        assert_eq!(masked_url("no scheme", true), MASK);
    }
}
