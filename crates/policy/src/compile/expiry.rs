//! The EXPIRE layer and bounded events streams: a policy's `events:`, and the check that no
//! `ttl` is set where Redis deleting a job on its own would break a promise the file makes
//! (an archive copy, an audit record, an erasure that accounts for every job).

use super::{Checker, pos};
use crate::duration::BareUnit;
use crate::model::{EventsBound, JobState};
use crate::pattern::NamePattern;
use crate::raw::{RawCount, RawEvents, RawPolicy, RawPolicyFile, RawStateRule};
use serde_saphyr::{Location, Spanned};

/// One `ttl:` written in the file: where it is and its key path.
struct TtlSite<'a> {
    at: &'a Location,
    path: String,
}

/// The `ttl:` keys of the rules written for each state (in `JobState::ALL`'s order).
fn ttl_sites<'a>(
    sites: &mut Vec<TtlSite<'a>>,
    rules: [Option<&'a Spanned<RawStateRule>>; 6],
    at: &str,
) {
    for (state, rule) in JobState::ALL.into_iter().zip(rules) {
        if let Some(t) = rule.and_then(|r| r.value.ttl.as_ref()) {
            sites.push(TtlSite {
                at: &t.referenced,
                path: format!("{at}.{state}.ttl"),
            });
        }
    }
}

/// Why a `ttl` may not govern the queues of `policy`, with a hint; `None` when it may.
fn conflict(raw: &RawPolicyFile, policy: &RawPolicy) -> Option<(String, String)> {
    if let Some(at) = archive_action(policy) {
        return Some((
            format!(
                "`ttl` on a queue whose policy archives (`action: archive` at line {}): Redis would delete its jobs without the archive copy",
                pos(at).line
            ),
            "let the sweep archive them (`maxAge`), or drop `action: archive`".into(),
        ));
    }
    if policy.sla.as_ref().is_some_and(|s| s.audit_required) {
        return Some((
            "`ttl` on a queue with `sla.auditRequired: true`: Redis would delete its jobs without the audit record".into(),
            "use `maxAge`, whose removals are each audited".into(),
        ));
    }
    let subject = policy.subjects.first().or(raw.subjects.first());
    if let Some(s) = subject {
        return Some((
            format!(
                "`ttl` on a queue with subjects for erasure (`subjects:` at line {}): an erasure could not account for jobs Redis deletes on its own",
                pos(&s.referenced).line
            ),
            "use `maxAge`, whose removals are each audited".into(),
        ));
    }
    None
}

/// Where `policy` sets `action: archive` (its rules, job rules or source links), if it does.
fn archive_action(policy: &RawPolicy) -> Option<&Location> {
    fn is_archive(a: &Option<Spanned<String>>) -> Option<&Location> {
        a.as_ref()
            .filter(|a| a.value == "archive")
            .map(|a| &a.referenced)
    }
    let rules = policy
        .rules
        .states()
        .into_iter()
        .chain(policy.jobs.iter().flat_map(|j| j.value.states()));
    let links = std::iter::once(policy.source.as_deref())
        .chain(policy.jobs.iter().map(|j| j.value.source.as_deref()));
    rules
        .filter_map(|r| r.and_then(|r| is_archive(&r.value.action)))
        .chain(links.filter_map(|l| l.and_then(|l| is_archive(&l.value.action))))
        .next()
}

impl Checker {
    /// A policy's `events:`: `maxLen` (a whole number, 1 or more) and/or `maxAge`.
    pub(super) fn events(&mut self, raw: &Spanned<RawEvents>, path: &str) -> Option<EventsBound> {
        let r = &raw.value;
        if r.max_len.is_none() && r.max_age.is_none() {
            self.error_hint(
                &raw.referenced,
                path,
                "`events` sets no bound",
                "e.g. `events: { maxLen: 10000 }` or `events: { maxAge: 1d }`",
            );
            return None;
        }
        let mut failed = false;
        let max_len = r.max_len.as_ref().and_then(|c| match &c.value {
            RawCount::Number(n) if *n >= 1.0 && n.fract() == 0.0 && *n <= u64::MAX as f64 => {
                Some(*n as u64)
            }
            RawCount::Number(n) => {
                let message = format!("events.maxLen must be a whole number, 1 or more, got {n}");
                self.error(&c.referenced, format!("{path}.maxLen"), message);
                failed = true;
                None
            }
            RawCount::Text(t) => {
                self.error_hint(
                    &c.referenced,
                    format!("{path}.maxLen"),
                    format!("events.maxLen must be a number, got the string \"{t}\""),
                    format!("write it unquoted: `maxLen: {}`", t.trim()),
                );
                failed = true;
                None
            }
        });
        let max_age = r.max_age.as_ref().and_then(|d| {
            let age = self.duration(d, BareUnit::Seconds, &format!("{path}.maxAge"));
            if age.is_some_and(|a| a.as_millis() == 0) {
                self.error(
                    &d.referenced,
                    format!("{path}.maxAge"),
                    "events.maxAge must be above 0",
                );
            }
            failed |= age.is_none_or(|a| a.as_millis() == 0);
            age
        });
        (!failed).then_some(EventsBound { max_len, max_age })
    }

    /// Every `ttl` on a queue where Redis deleting jobs on its own would go around the
    /// archive, the audit or an erasure, reported at the `ttl` key with the reason.
    pub(super) fn ttl_conflicts(&mut self, raw: &RawPolicyFile) {
        for (i, p) in raw.policies.iter().enumerate() {
            let mut sites = Vec::new();
            ttl_sites(
                &mut sites,
                p.value.rules.states(),
                &format!("policies[{i}].rules"),
            );
            for (j, job) in p.value.jobs.iter().enumerate() {
                ttl_sites(
                    &mut sites,
                    job.value.states(),
                    &format!("policies[{i}].jobs[{j}]"),
                );
            }
            if sites.is_empty() {
                continue;
            }
            if let Some((message, hint)) = conflict(raw, &p.value) {
                for s in sites {
                    self.error_hint(s.at, s.path, message.clone(), hint.clone());
                }
            }
        }
        // A tenant override's ttl governs the tenant's queues under any policy that may
        // cover them.
        for (i, t) in raw.tenants.iter().enumerate() {
            let mut sites = Vec::new();
            let at = format!("tenants[{i}].overrides");
            ttl_sites(&mut sites, t.value.overrides.states(), &at);
            let tenant = t.value.tenant_id.as_ref().map(|t| t.value.as_str());
            let covering = raw.policies.iter().find_map(|p| {
                let may_cover = match (&p.value.tenant, tenant) {
                    (None, _) | (_, None) => true,
                    (Some(pat), Some(id)) => {
                        NamePattern::new(&pat.value).is_ok_and(|pat| pat.matches(id))
                    }
                };
                let name = p.value.name.as_ref().map_or("", |n| n.value.as_str());
                may_cover
                    .then(|| conflict(raw, &p.value))
                    .flatten()
                    .map(|(m, h)| (format!("{m} (policy `{name}`)"), h))
            });
            if let Some((message, hint)) = covering {
                for s in sites {
                    self.error_hint(s.at, s.path, message.clone(), hint.clone());
                }
            }
        }
    }
}
