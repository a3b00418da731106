//! What a batch's audit event says about where it ran, for whom and why: [`AuditContext`],
//! built here alone, from typed parts, by one constructor per kind of change. Scripts store
//! it as JSON beside the change (`lua/prelude/audit.lua`), so its fields, their order and
//! their values are the trail's format.

use super::action::AuditAction;
use super::actor::Actor;
use bullsweep_policy::{DoctorKind, EffectivePolicy, JobState, QueueId};
use serde::{Deserialize, Serialize};

/// What the caller tells a script about the batch it runs: stored with each audit event.
/// (No `deny_unknown_fields`: it is flattened into the `AuditEvent`.)
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuditContext {
    /// Effective policy name.
    pub policy_name: String,
    /// Short hash of the effective policy, so a change of rules shows in the trail.
    pub policy_version: String,
    /// Queue name.
    pub queue_name: String,
    /// Queue key base.
    pub queue_key: String,
    /// Tenant, if the layout has one.
    pub tenant: Option<String>,
    /// Canonical environment.
    pub environment: Option<String>,
    /// What was done.
    pub action: AuditAction,
    /// What was acted on: the job state, `active` (stalled jobs), `archive` (archived
    /// copies), `jobs` or `events` (an erasure), the state a job was restored into.
    pub state: String,
    /// The policy's compliance tag.
    pub compliance_tag: Option<String>,
    /// The run that did it.
    pub execution_id: String,
    /// Who asked for it, when a person did: the dashboard token's name.
    #[serde(default, skip_serializing_if = "Actor::is_unnamed")]
    pub actor: Actor,
    /// For source-linked cleanup: the source (its name in `sources:`) whose answer let the
    /// jobs go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_link: Option<String>,
    /// For source-linked cleanup: why the source let them go (`sourceDeleted`,
    /// `noLongerMatching`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_reason: Option<String>,
    /// For a `doctor` repair: the kind of damage repaired (`danglingIds`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_kind: Option<String>,
}

/// How an audit event names a queue when only a run's report of it is at hand.
#[derive(Clone, Copy, Debug)]
pub struct QueueNames<'a> {
    /// Queue name.
    pub name: &'a str,
    /// Key base.
    pub key: &'a str,
    /// Tenant, if the layout has one.
    pub tenant: Option<&'a str>,
    /// Canonical environment.
    pub environment: Option<&'a str>,
}

impl<'a> From<&'a QueueId> for QueueNames<'a> {
    fn from(q: &'a QueueId) -> Self {
        QueueNames {
            name: &q.queue,
            key: &q.base,
            tenant: q.tenant.as_deref(),
            environment: q.env.as_deref(),
        }
    }
}

impl AuditContext {
    /// The one place a context is put together; every constructor below names its parts.
    fn of(queue: QueueNames<'_>, action: AuditAction, state: &str, actor: Actor) -> Self {
        AuditContext {
            policy_name: String::new(),
            policy_version: String::new(),
            queue_name: queue.name.to_string(),
            queue_key: queue.key.to_string(),
            tenant: queue.tenant.map(str::to_string),
            environment: queue.environment.map(str::to_string),
            action,
            state: state.to_string(),
            compliance_tag: None,
            execution_id: String::new(),
            actor,
            source_link: None,
            source_reason: None,
            repair_kind: None,
        }
    }

    /// `action` on the jobs in `state` of a governed queue, by run `execution_id`, under its
    /// effective policy.
    pub fn for_state(
        q: &QueueId,
        eff: &EffectivePolicy,
        state: JobState,
        action: AuditAction,
        execution_id: &str,
        actor: Actor,
    ) -> Self {
        AuditContext {
            policy_name: eff.name.clone(),
            policy_version: policy_version(eff),
            compliance_tag: eff.sla.as_ref().and_then(|s| s.compliance_tag.clone()),
            execution_id: execution_id.to_string(),
            ..AuditContext::of(q.into(), action, state.as_str(), actor)
        }
    }

    /// `action` (`persist`, `expire`) on the jobs in `state` of a queue the daemon's expiry
    /// watch follows though no policy of the daemon's governs it (a `run` beside it gave the
    /// expiries): the context names `policy_name`, the policy whose `ttl` gave them, as the
    /// queue's entry in the registry of expiring queues records it; no version is known.
    pub fn for_given_expiries(
        q: &QueueId,
        policy_name: &str,
        state: JobState,
        action: AuditAction,
        execution_id: &str,
    ) -> Self {
        AuditContext {
            policy_name: policy_name.to_string(),
            execution_id: execution_id.to_string(),
            ..AuditContext::of(q.into(), action, state.as_str(), Actor::Unnamed)
        }
    }

    /// A queue whose work in run `execution_id` failed, as the run's report names it: no
    /// state and no policy version are known there, and the action is `remove`.
    pub fn for_failed_queue(
        queue: QueueNames<'_>,
        policy_name: &str,
        execution_id: &str,
        actor: Actor,
    ) -> Self {
        AuditContext {
            policy_name: policy_name.to_string(),
            execution_id: execution_id.to_string(),
            ..AuditContext::of(queue, AuditAction::Remove, "", actor)
        }
    }

    /// An erasure step of request `request_id` in one queue: `state` is what it erased from
    /// (`jobs`, `events`, `archive`). Policy `forget`, compliance tag `gdpr`.
    pub fn for_erasure(q: &QueueId, state: &str, request_id: &str, actor: Actor) -> Self {
        AuditContext {
            policy_name: "forget".into(),
            compliance_tag: Some("gdpr".into()),
            execution_id: request_id.to_string(),
            ..AuditContext::of(q.into(), AuditAction::Erase, state, actor)
        }
    }

    /// A restore into key base `base` (identified as `queue` when a layout matches it; else
    /// named by its last segment), leaving the job in `state`. Policy `restore`; somebody
    /// always asks for a restore.
    pub fn for_restore(
        base: &str,
        queue: Option<&QueueId>,
        state: &str,
        execution_id: String,
        actor: Actor,
    ) -> Self {
        let names = queue.map_or_else(
            || QueueNames {
                name: base.rsplit(':').next().unwrap_or(base),
                key: base,
                tenant: None,
                environment: None,
            },
            |q| QueueNames {
                key: base,
                ..q.into()
            },
        );
        AuditContext {
            policy_name: "restore".into(),
            execution_id,
            ..AuditContext::of(names, AuditAction::Restore, state, actor)
        }
    }

    /// A `doctor` repair of `kind` in a queue, by run `execution_id`: under the queue's
    /// effective policy when it has one, else policy `doctor`.
    pub fn for_repair(
        queue: QueueNames<'_>,
        eff: Option<&EffectivePolicy>,
        kind: DoctorKind,
        execution_id: &str,
        actor: Actor,
    ) -> Self {
        AuditContext {
            policy_name: eff.map_or_else(|| "doctor".to_string(), |e| e.name.clone()),
            policy_version: eff.map(policy_version).unwrap_or_default(),
            compliance_tag: eff
                .and_then(|e| e.sla.as_ref())
                .and_then(|s| s.compliance_tag.clone()),
            execution_id: execution_id.to_string(),
            repair_kind: Some(kind.as_str().to_string()),
            ..AuditContext::of(queue, AuditAction::Repair, "", actor)
        }
    }

    /// The place of a stream entry that could not be read: nothing of it is known.
    pub fn unreadable() -> Self {
        let nowhere = QueueNames {
            name: "",
            key: "",
            tenant: None,
            environment: None,
        };
        AuditContext::of(
            nowhere,
            AuditAction::Other(String::new()),
            "",
            Actor::Unnamed,
        )
    }

    /// The same context for another action on the same jobs (the batch's notices, a
    /// staged batch put back, jobs anonymized under a mixed state).
    pub fn with_action(self, action: AuditAction) -> Self {
        AuditContext { action, ..self }
    }

    /// The same context for jobs that `source` let go, for `reason`.
    pub fn with_source(self, source: &str, reason: &str) -> Self {
        AuditContext {
            source_link: Some(source.to_string()),
            source_reason: Some(reason.to_string()),
            ..self
        }
    }

    /// The same context acting on something other than the job state it was made for:
    /// `active` (stalled jobs), `archive` (archived copies).
    pub fn with_state(self, state: &str) -> Self {
        AuditContext {
            state: state.to_string(),
            ..self
        }
    }

    /// As the JSON the scripts store beside each change.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A short hash of the effective policy: the same rules give the same version.
fn policy_version(eff: &EffectivePolicy) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{eff:?}").as_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> QueueId {
        QueueId {
            base: "bull:acme:mail".into(),
            prefix: "bull:acme".into(),
            queue: "mail".into(),
            tenant: Some("acme".into()),
            env: Some("prod".into()),
            backend: Default::default(),
        }
    }

    /// The JSON the scripts store is the trail's format: these are the bytes written before
    /// contexts had constructors.
    #[test]
    fn each_kind_of_context_is_the_json_the_trail_holds() {
        let erase = AuditContext::for_erasure(&queue(), "jobs", "req-1", Actor::Unnamed);
        assert_eq!(
            erase.to_json(),
            r#"{"policyName":"forget","policyVersion":"","queueName":"mail","queueKey":"bull:acme:mail","tenant":"acme","environment":"prod","action":"erase","state":"jobs","complianceTag":"gdpr","executionId":"req-1"}"#
        );
        let restore = AuditContext::for_restore(
            "bull:other",
            None,
            "wait",
            "x1".into(),
            Actor::Named("ann".into()),
        );
        assert_eq!(
            restore.to_json(),
            r#"{"policyName":"restore","policyVersion":"","queueName":"other","queueKey":"bull:other","tenant":null,"environment":null,"action":"restore","state":"wait","complianceTag":null,"executionId":"x1","actor":"ann"}"#
        );
        let q = queue();
        let bob = Actor::Named("bob".into());
        let identified =
            AuditContext::for_restore("bull:acme:mail", Some(&q), "failed", "x2".into(), bob);
        assert_eq!(
            (identified.queue_name.as_str(), identified.tenant.as_deref()),
            ("mail", Some("acme"))
        );
        let failed = AuditContext::for_failed_queue((&q).into(), "p", "x3", Actor::Unnamed);
        assert_eq!(
            failed.to_json(),
            r#"{"policyName":"p","policyVersion":"","queueName":"mail","queueKey":"bull:acme:mail","tenant":"acme","environment":"prod","action":"remove","state":"","complianceTag":null,"executionId":"x3"}"#
        );
        let given = AuditContext::for_given_expiries(
            &q,
            "p",
            JobState::Failed,
            AuditAction::Persist,
            "daemon-x",
        );
        assert_eq!(
            given.to_json(),
            r#"{"policyName":"p","policyVersion":"","queueName":"mail","queueKey":"bull:acme:mail","tenant":"acme","environment":"prod","action":"persist","state":"failed","complianceTag":null,"executionId":"daemon-x"}"#
        );
        let repair = AuditContext::for_repair(
            (&q).into(),
            None,
            DoctorKind::DanglingIds,
            "x4",
            Actor::Unnamed,
        );
        assert_eq!(
            repair.to_json(),
            r#"{"policyName":"doctor","policyVersion":"","queueName":"mail","queueKey":"bull:acme:mail","tenant":"acme","environment":"prod","action":"repair","state":"","complianceTag":null,"executionId":"x4","repairKind":"danglingIds"}"#
        );
        let back: AuditContext = serde_json::from_str(&repair.to_json()).expect("parse");
        assert_eq!(back, repair);
        let moved = failed
            .with_action(AuditAction::MoveTo("bull:acme:dlq".into()))
            .with_state("active");
        let back: AuditContext = serde_json::from_str(&moved.to_json()).expect("parse");
        assert_eq!(back, moved);
        assert!(
            moved
                .to_json()
                .contains(r#""action":"move to bull:acme:dlq","state":"active""#)
        );
    }
}
