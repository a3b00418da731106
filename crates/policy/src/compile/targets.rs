//! Where the file sends things (`audit:`, `archive:`, `notify:`), and the check that every
//! action a rule names has the target it needs, reported at that rule's `action`.

use super::Checker;
use crate::action::Action;
use crate::model::JobState;
use crate::model::{
    ARCHIVE_COMPRESSION, ArchiveTarget, AuditTarget, DEFAULT_AUDIT_FILE, NotifyTargets, Webhook,
};
use crate::raw::{RawPolicyFile, RawSourceLink, RawStateRule};
use crate::source::SOURCE_ACTIONS;
use serde_saphyr::{Location, Spanned};

/// One `action:` set in the file: the action, where it is, its key path, and the raw policy
/// it belongs to (`None` for a tenant override).
struct ActionSite<'a> {
    action: Action,
    at: &'a Location,
    path: String,
    policy: Option<usize>,
}

/// Every valid `action:` the file sets, in policies' rules and job rules and in tenant
/// overrides.
fn action_sites(raw: &RawPolicyFile) -> Vec<ActionSite<'_>> {
    let mut sites = Vec::new();
    for (i, p) in raw.policies.iter().enumerate() {
        states(
            &mut sites,
            p.value.rules.states(),
            format!("policies[{i}].rules"),
            Some(i),
        );
        link_site(
            &mut sites,
            p.value.source.as_deref(),
            format!("policies[{i}].source"),
            i,
        );
        for (j, job) in p.value.jobs.iter().enumerate() {
            let at = format!("policies[{i}].jobs[{j}]");
            link_site(
                &mut sites,
                job.value.source.as_deref(),
                format!("{at}.source"),
                i,
            );
            states(&mut sites, job.value.states(), at, Some(i));
        }
    }
    for (i, t) in raw.tenants.iter().enumerate() {
        let at = format!("tenants[{i}].overrides");
        states(&mut sites, t.value.overrides.states(), at, None);
    }
    sites
}

/// Adds the sites of the rules written for each state (in `JobState::ALL`'s order).
fn states<'a>(
    sites: &mut Vec<ActionSite<'a>>,
    rules: [Option<&'a Spanned<RawStateRule>>; 6],
    at: String,
    policy: Option<usize>,
) {
    for (state, rule) in JobState::ALL.into_iter().zip(rules) {
        site(sites, rule, state, format!("{at}.{state}"), policy);
    }
}

/// Adds the site of a source link's action, when it sets a valid one.
fn link_site<'a>(
    sites: &mut Vec<ActionSite<'a>>,
    link: Option<&'a Spanned<RawSourceLink>>,
    path: String,
    policy: usize,
) {
    if let Some(a) = link.and_then(|l| l.value.action.as_ref())
        && let Some(action) = Action::from_name(&a.value)
        && SOURCE_ACTIONS.contains(&action)
    {
        sites.push(ActionSite {
            action,
            at: &a.referenced,
            path: format!("{path}.action"),
            policy: Some(policy),
        });
    }
}

/// Adds the site of `rule`'s action, when it sets a valid one for `state`.
fn site<'a>(
    sites: &mut Vec<ActionSite<'a>>,
    rule: Option<&'a Spanned<RawStateRule>>,
    state: JobState,
    path: String,
    policy: Option<usize>,
) {
    if let Some(a) = rule.and_then(|r| r.value.action.as_ref())
        && let Some(action) = Action::from_name(&a.value)
        // An action the state does not take is reported as such by the rule's check.
        && state.allowed_actions().contains(&action)
    {
        sites.push(ActionSite {
            action,
            at: &a.referenced,
            path: format!("{path}.action"),
            policy,
        });
    }
}

impl Checker {
    /// `audit.url`, or the default file.
    pub(super) fn audit(&mut self, raw: &RawPolicyFile) -> Option<AuditTarget> {
        match &raw.audit {
            None => Some(AuditTarget::File(DEFAULT_AUDIT_FILE.into())),
            Some(a) => match audit_target(&a.url.value) {
                Ok(t) => Some(t),
                Err((message, hint)) => {
                    self.error_hint(&a.url.referenced, "audit.url", message, hint);
                    None
                }
            },
        }
    }

    /// `archive.url` (`file://` or `s3://`) and its compression.
    pub(super) fn archive(&mut self, raw: &RawPolicyFile) -> Option<ArchiveTarget> {
        let a = raw.archive.as_ref()?;
        if let Some(comp) = &a.compression
            && comp.value != ARCHIVE_COMPRESSION
        {
            self.error_hint(
                &comp.referenced,
                "archive.compression",
                format!("unsupported compression `{}`", comp.value),
                "segments are compressed with zstd",
            );
        }
        let url = &a.url.value;
        match url.strip_prefix("file://") {
            Some(path) if !path.is_empty() => Some(ArchiveTarget::Directory(path.into())),
            _ if url.starts_with("s3://") => {
                let rest = url.trim_start_matches("s3://");
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    self.error_hint(
                        &a.url.referenced,
                        "archive.url",
                        format!("archive url `{url}` names no bucket"),
                        "expected s3://bucket/prefix",
                    );
                    None
                } else {
                    Some(ArchiveTarget::S3 {
                        bucket: bucket.to_string(),
                        prefix: prefix.trim_matches('/').to_string(),
                    })
                }
            }
            _ => {
                self.error_hint(
                    &a.url.referenced,
                    "archive.url",
                    format!("unsupported archive url `{url}`"),
                    "expected file:///path/to/archive or s3://bucket/prefix",
                );
                None
            }
        }
    }

    /// `notify:`: the log and a webhook.
    pub(super) fn notify(&mut self, raw: &RawPolicyFile) -> NotifyTargets {
        let mut notify = NotifyTargets::default();
        let Some(n) = &raw.notify else {
            return notify;
        };
        notify.log = n.log;
        if let Some(w) = &n.webhook {
            if w.url.value.starts_with("http://") || w.url.value.starts_with("https://") {
                notify.webhook = Some(Webhook {
                    url: w.url.value.clone(),
                    headers: w.headers.clone().into_iter().collect(),
                });
            } else {
                self.error_hint(
                    &w.url.referenced,
                    "notify.webhook.url",
                    format!("webhook url `{}` is not http(s)", w.url.value),
                    "e.g. https://hooks.example.com/bullsweep",
                );
            }
        }
        notify
    }

    /// Every rule's action has what it needs: `archive` a sink, `anonymize` scrubbing rules
    /// that apply to its policy, `notify` a target. Each problem is reported at the rule's
    /// `action`.
    pub(super) fn actions_have_targets(&mut self, raw: &RawPolicyFile) {
        let notify_target = raw
            .notify
            .as_ref()
            .is_some_and(|n| n.webhook.is_some() || n.log);
        // A tenant override may apply to any policy: it needs pii that applies to all.
        let pii_everywhere =
            raw.pii.is_some() || raw.policies.iter().all(|p| p.value.pii.is_some());
        for site in action_sites(raw) {
            let (message, hint) = match site.action {
                Action::Archive if raw.archive.is_none() => (
                    "`action: archive` needs an archive sink, and the file has no `archive:`",
                    "add `archive: { url: file:///var/lib/bullsweep/archive }`",
                ),
                Action::Anonymize => {
                    let has_pii = match site.policy {
                        Some(i) => raw.pii.is_some() || raw.policies[i].value.pii.is_some(),
                        None => pii_everywhere,
                    };
                    if has_pii {
                        continue;
                    }
                    (
                        "`action: anonymize` needs `pii:` rules, and none apply here",
                        "add `pii: { paths: [...], patterns: [email, credit-card] }` to the policy or the file",
                    )
                }
                Action::Notify if !notify_target => (
                    "`action: notify` needs a notify target, and the file names none",
                    "add `notify: { log: true }` or `notify: { webhook: { url: https://… } }`",
                ),
                _ => continue,
            };
            self.error_hint(site.at, site.path, message, hint);
        }
    }
}

/// `file:///abs/path`, `file://relative/path`, a plain path, or `postgres://…`.
fn audit_target(url: &str) -> Result<AuditTarget, (String, String)> {
    if let Some(path) = url.strip_prefix("file://") {
        if path.is_empty() {
            return Err((
                "audit url `file://` names no file".into(),
                "e.g. file:///var/lib/bullsweep/audit.jsonl".into(),
            ));
        }
        return Ok(AuditTarget::File(path.into()));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(AuditTarget::Postgres(url.to_string()));
    }
    if url.contains("://") {
        return Err((
            format!("unsupported audit url `{url}`"),
            "expected file:///path/to/audit.jsonl or postgres://user@host/db".into(),
        ));
    }
    if url.trim().is_empty() {
        return Err((
            "audit url is empty".into(),
            "e.g. file:///var/lib/bullsweep/audit.jsonl".into(),
        ));
    }
    Ok(AuditTarget::File(url.into()))
}
