//! Which queues (and archive segments) an erasure covers: the subject's `subjects:` entries
//! per queue, and the tenant, from the key or from job data. Pure: the caller discovers the
//! managed queues.

use bullsweep_policy::{Malformed, PolicySet, QueueId, Subject, read_subjects};

/// Why an erasure could not start; nothing was read or changed.
#[derive(Debug, PartialEq, Eq)]
pub enum ScopeError {
    /// No `subjects:` entry has this name.
    UnknownSubject {
        /// The name asked for.
        name: String,
        /// The names the file declares.
        known: Vec<String>,
    },
    /// No managed queue's key and no `tenants:` entry names the tenant (a queue without a
    /// tenant in its key belongs to one only through a subject's `tenantPath`, so it cannot
    /// vouch for a tenant's name: a misspelt tenant must not reach it).
    UnknownTenant {
        /// The tenant asked for.
        name: String,
        /// The tenants the managed queues' keys and the policy file name.
        known: Vec<String>,
    },
}

impl std::fmt::Display for ScopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScopeError::UnknownSubject { name, known } if known.is_empty() => write!(
                f,
                "unknown subject `{name}`: the policy file declares no `subjects:`"
            ),
            ScopeError::UnknownSubject { name, known } => write!(
                f,
                "unknown subject `{name}`; the policy file declares: {}",
                known.join(", ")
            ),
            ScopeError::UnknownTenant { name, known } if known.is_empty() => write!(
                f,
                "unknown tenant `{name}`: no managed queue's key names a tenant, and the policy file's `tenants:` names none"
            ),
            ScopeError::UnknownTenant { name, .. } => write!(
                f,
                "unknown tenant `{name}`: no managed queue's key names it, nor does the policy file's `tenants:`"
            ),
        }
    }
}

impl ScopeError {
    /// What to try: for an unknown tenant, the tenants there are. Every tenant's name, so it
    /// is a hint apart from the message, which a caller who sees one tenant is not shown.
    pub fn hint(&self) -> Option<String> {
        match self {
            ScopeError::UnknownTenant { known, .. } if !known.is_empty() => {
                Some(format!("the tenants are: {}", known.join(", ")))
            }
            _ => None,
        }
    }
}

/// One queue the erasure covers, with the subject's extractors for it.
#[derive(Clone, Debug)]
pub struct ScopedQueue {
    /// The queue.
    pub queue: QueueId,
    /// The `subjects:` entries that apply.
    pub subjects: Vec<Subject>,
    /// When the tenant is not in the key: only jobs whose data names this tenant.
    pub data_tenant: Option<String>,
}

impl ScopedQueue {
    /// Reads job data (JSON text of any depth): `Some` with what identifies the subject in it
    /// (the strings and numbers at the subject's paths) when it belongs to the subject (and,
    /// when filtered by data, to the tenant), `None` when it does not; `Err` when it is not
    /// JSON.
    pub(super) fn read(&self, data: &[u8], value: &str) -> Result<Option<Vec<String>>, Malformed> {
        let r = read_subjects(&self.subjects, value, data)?;
        Ok((r.holds && self.tenant_among(&r.tenants)).then_some(r.identifiers))
    }

    /// Whether job data belongs to the tenant asked for, by the rule [`ScopedQueue::read`]
    /// applies: always in a queue not filtered by data, else when a subject's `tenantPath`
    /// in it names the tenant (data naming another tenant, or none, does not); `Err` when
    /// it is not JSON.
    pub(super) fn names_tenant(&self, data: &[u8]) -> Result<bool, Malformed> {
        if self.data_tenant.is_none() {
            return Ok(true);
        }
        // The subject's id plays no part in which tenant the data names.
        let r = read_subjects(&self.subjects, "", data)?;
        Ok(self.tenant_among(&r.tenants))
    }

    /// Whether `tenants` (those job data names) hold the tenant the queue is filtered by.
    fn tenant_among(&self, tenants: &[String]) -> bool {
        self.data_tenant
            .as_ref()
            .is_none_or(|t| tenants.iter().any(|x| x == t))
    }
}

/// Whether a queue (or archive segment) whose key names the tenant `own` is in scope for a
/// request for tenant `wanted`: `None` when it is not, else the tenant to filter job data by
/// (when the key names none and a subject can find it in the data).
pub(super) fn tenant_scope(
    wanted: Option<&str>,
    own: Option<&str>,
    subjects: &[Subject],
) -> Option<Option<String>> {
    match (wanted, own) {
        (None, _) => Some(None),
        (Some(t), Some(own)) => (own == t).then_some(None),
        (Some(t), None) => subjects
            .iter()
            .any(|s| s.tenant_path.is_some())
            .then(|| Some(t.to_string())),
    }
}

/// The queues an erasure covers. Pure: the caller discovers the managed queues.
pub fn scope(
    set: &PolicySet,
    managed: &[QueueId],
    subject: &str,
    tenant: Option<&str>,
) -> Result<Vec<ScopedQueue>, ScopeError> {
    let known = set.subject_names();
    if !known.contains(&subject) {
        return Err(ScopeError::UnknownSubject {
            name: subject.to_string(),
            known: known.iter().map(|s| s.to_string()).collect(),
        });
    }
    if let Some(t) = tenant {
        let mut known: Vec<String> = managed
            .iter()
            .filter_map(|q| q.tenant.clone())
            .chain(set.tenants.iter().map(|o| o.tenant_id.clone()))
            .collect();
        known.sort_unstable();
        known.dedup();
        if !known.iter().any(|k| k == t) {
            return Err(ScopeError::UnknownTenant {
                name: t.to_string(),
                known,
            });
        }
    }
    let mut out = Vec::new();
    for q in managed {
        let subjects: Vec<Subject> = set.subjects_for(q, subject).into_iter().cloned().collect();
        let Some(data_tenant) = tenant_scope(tenant, q.tenant.as_deref(), &subjects) else {
            continue;
        };
        if !subjects.is_empty() {
            out.push(ScopedQueue {
                queue: q.clone(),
                subjects,
                data_tenant,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bullsweep_policy::PolicySet;

    fn policy_set() -> PolicySet {
        bullsweep_policy::compile(
            "p.yaml",
            "version: 1\ndiscovery: { layouts: ['bull:{tenant}:{queue}', 'bull:{queue}'] }\nsubjects: [{ name: user, paths: [user.id], tenantPath: tenantId }]\npolicies:\n  - { name: billing, queueNamePattern: billing, subjects: [{ name: card, paths: [card.holder] }] }\n",
        )
        .expect("policy")
    }

    #[test]
    fn scope_follows_subject_and_tenant() {
        let set = policy_set();
        let managed: Vec<QueueId> = [
            "bull:acme:billing",
            "bull:acme:mail",
            "bull:globex:mail",
            "bull:shared",
        ]
        .iter()
        .filter_map(|b| set.identify(b, None))
        .collect();
        let bases = |s: &[ScopedQueue]| s.iter().map(|q| q.queue.base.clone()).collect::<Vec<_>>();
        let all = scope(&set, &managed, "user", None).expect("scope");
        assert_eq!(all.len(), 4);
        let acme = scope(&set, &managed, "user", Some("acme")).expect("scope");
        assert_eq!(
            bases(&acme),
            ["bull:acme:billing", "bull:acme:mail", "bull:shared"]
        );
        let shared = acme
            .iter()
            .find(|q| q.queue.base == "bull:shared")
            .expect("shared");
        assert_eq!(
            shared.data_tenant.as_deref(),
            Some("acme"),
            "a queue without a tenant filters by data"
        );
        let data = |v: serde_json::Value| {
            shared
                .read(v.to_string().as_bytes(), "u1")
                .expect("json")
                .is_some()
        };
        assert!(data(
            serde_json::json!({"user": {"id": "u1"}, "tenantId": "acme"})
        ));
        assert!(!data(
            serde_json::json!({"user": {"id": "u1"}, "tenantId": "globex"})
        ));
        assert!(!data(serde_json::json!({"user": {"id": "u1"}})));
        let tenant = |v: serde_json::Value| shared.names_tenant(v.to_string().as_bytes());
        assert_eq!(tenant(serde_json::json!({"tenantId": "acme"})), Ok(true));
        assert_eq!(
            tenant(serde_json::json!({"user": {"id": "u9"}, "tenantId": "globex"})),
            Ok(false)
        );
        assert_eq!(tenant(serde_json::json!({"tenantId": "none"})), Ok(false));
        assert_eq!(
            tenant(serde_json::json!({})),
            Ok(false),
            "no tenant is not the tenant"
        );
        let card = scope(&set, &managed, "card", None).expect("scope");
        assert_eq!(
            bases(&card),
            ["bull:acme:billing"],
            "a policy's subject applies to its queues only"
        );
        assert!(matches!(
            scope(&set, &managed, "usr", None),
            Err(ScopeError::UnknownSubject { .. })
        ));
        assert_eq!(
            scope(&set, &managed, "user", Some("acm")).map(|s| s.len()),
            Err(ScopeError::UnknownTenant {
                name: "acm".into(),
                known: vec!["acme".into(), "globex".into()]
            }),
            "a queue without a tenant in its key vouches for no tenant's name"
        );
    }
}
