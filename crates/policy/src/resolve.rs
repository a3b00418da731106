//! Resolution: which policy governs a queue, and the effective rules after job rules and
//! tenant overrides, with the origin of every field for `explain`.

use crate::action::Action;
use crate::backend::Backend;
use crate::duration::Millis;
use crate::model::{
    DeadLetter, EventsBound, JobState, KeepIf, Policy, PolicySet, RunMode, Sla, StalledRule,
    StateRule, TenantOverride,
};
use crate::pattern::Specificity;
use crate::pii::PiiRules;
use crate::schedule::Schedule;
use crate::source::SourceLink;
use crate::subject::Subject;
use std::collections::BTreeMap;
use std::fmt;

/// A queue identified through a layout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueId {
    /// The key base without its trailing `:`, such as `bull:acme:prod:billing`.
    pub base: String,
    /// The BullMQ prefix, such as `bull:acme:prod`.
    pub prefix: String,
    /// The queue name.
    pub queue: String,
    /// The tenant from `{tenant}`, if the layout has one.
    pub tenant: Option<String>,
    /// The canonical environment, from `{env}` or the default environment.
    pub env: Option<String>,
    /// The queue library that wrote it.
    pub backend: Backend,
}

impl PolicySet {
    /// Identifies a BullMQ queue's key base through the first layout that matches it
    /// ([`PolicySet::identify_as`] with [`Backend::Bullmq`]).
    pub fn identify(&self, base: &str, default_env: Option<&str>) -> Option<QueueId> {
        self.identify_as(base, Backend::Bullmq, default_env)
    }

    /// Identifies the key base of a queue of `backend` through the first layout that matches
    /// it. `default_env` is the environment of queues whose layout has no `{env}` (the file's
    /// `environment` when `None`).
    pub fn identify_as(
        &self,
        base: &str,
        backend: Backend,
        default_env: Option<&str>,
    ) -> Option<QueueId> {
        self.layouts.iter().find_map(|layout| {
            let m = layout.parse(base)?;
            let env = match m.env {
                Some(e) => Some(self.canonical_env(&e)),
                None => default_env
                    .map(|e| self.canonical_env(e))
                    .or_else(|| self.environment.clone()),
            };
            Some(QueueId {
                base: base.to_string(),
                prefix: m.prefix,
                queue: m.queue,
                tenant: m.tenant,
                env,
                backend,
            })
        })
    }
}

/// Where an effective value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// The built-in default.
    Default,
    /// The policy file's top level (its `schedule:`, for policies that set none).
    TopLevel,
    /// A policy's `rules`.
    Policy {
        /// Policy name.
        policy: String,
    },
    /// A job rule inside a policy.
    JobRule {
        /// Policy name.
        policy: String,
        /// Job name.
        job: String,
    },
    /// A tenant override.
    TenantOverride {
        /// Tenant id.
        tenant: String,
    },
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Provenance::Default => f.write_str("default"),
            Provenance::TopLevel => f.write_str("the file's top level"),
            Provenance::Policy { policy } => write!(f, "policy {policy}"),
            Provenance::JobRule { policy, job } => write!(f, "policy {policy}, job {job}"),
            Provenance::TenantOverride { tenant } => write!(f, "tenant override {tenant}"),
        }
    }
}

/// A value with its origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value in force.
    pub value: T,
    /// The layer that set it.
    pub source: Provenance,
}

/// The complete rule for one state after merging layers.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveRule {
    /// Act on jobs finished longer ago than this.
    pub max_age: Option<Sourced<Millis>>,
    /// Keep the newest N.
    pub max_count: Option<Sourced<u64>>,
    /// Grace period.
    pub keep_for: Option<Sourced<Millis>>,
    /// What to do.
    pub action: Sourced<Action>,
    /// Jobs the event-driven path leaves to the periodic sweep.
    pub keep_if: Option<Sourced<KeepIf>>,
    /// How long after it finished a job's hash, logs and flow sub-keys expire (finished
    /// states only).
    pub ttl: Option<Sourced<Millis>>,
    /// Under `action: notify`: how long after its last notice a job still selected is
    /// noticed again; `None`: once.
    pub remind_every: Option<Sourced<Millis>>,
}

/// Effective rules for jobs of one name.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveJobRule {
    /// The job name.
    pub name: String,
    /// Rules per state.
    pub states: BTreeMap<JobState, EffectiveRule>,
    /// The source link for jobs of this name (the job rule's over the policy's).
    pub source: Option<Sourced<SourceLink>>,
}

/// The rules in force for one queue.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectivePolicy {
    /// The winning policy, with `->override:<tenant>` when a tenant override applies.
    pub name: String,
    /// The winning policy's own name.
    pub policy: String,
    /// Rules per state for jobs that no job rule names.
    pub states: BTreeMap<JobState, EffectiveRule>,
    /// Rules for named jobs.
    pub jobs: Vec<EffectiveJobRule>,
    /// The policy's source link, for jobs that no job rule names.
    pub source: Option<Sourced<SourceLink>>,
    /// The winning policy's SLA.
    pub sla: Option<Sla>,
    /// Scrubbing rules for `action: anonymize`.
    pub pii: Option<PiiRules>,
    /// When the daemon sweeps the queue: the policy's schedule, else the file's, else the
    /// default, with which of them it is.
    pub schedule: Sourced<Schedule>,
    /// Whether the daemon also acts on the queue's events.
    pub mode: RunMode,
    /// `rules.stalled`.
    pub stalled: Option<StalledRule>,
    /// Queues swept before this one in a run.
    pub depends_on: Vec<String>,
    /// Dead-letter phases.
    pub dead_letter: Option<DeadLetter>,
    /// Where failed jobs with no attempts left move.
    pub move_exhausted_to: Option<String>,
    /// What a removal does around flows: `protectWaitingParents` (leave finished children
    /// whose parent still waits) and `childrenInOtherQueues` (take a removed job's children
    /// from other queues, or leave it).
    pub flows: crate::FlowSettings,
    /// The bound of the queue's events stream (`events:`).
    pub events: Option<EventsBound>,
}

/// The outcome of resolving one queue.
#[allow(
    clippy::large_enum_variant,
    reason = "made once per queue and read in place"
)]
#[derive(Clone, Debug, PartialEq)]
pub enum Resolution {
    /// A policy governs the queue.
    Covered(EffectivePolicy),
    /// No policy applies; the queue is left alone.
    Uncovered,
    /// Two policies apply with equal specificity; the queue is left alone.
    Tie {
        /// The first policy.
        first: String,
        /// The second policy.
        second: String,
    },
}

/// Rank of a policy for one queue: tenant-constrained first, then queue specificity, then
/// whether it names the queue's backend.
type Rank = (Option<Specificity>, Specificity, bool);

fn rank(p: &Policy) -> Rank {
    (
        p.tenant.as_ref().map(|t| t.specificity()),
        p.queue.specificity(),
        p.backend.is_some(),
    )
}

fn applies(p: &Policy, q: &QueueId) -> bool {
    let env_ok = match (&p.environment, &q.env) {
        (None, _) => true,
        (Some(want), Some(have)) => want == have,
        (Some(_), None) => false,
    };
    let tenant_ok = match (&p.tenant, &q.tenant) {
        (None, _) => true,
        (Some(pat), Some(t)) => pat.matches(t),
        (Some(_), None) => false,
    };
    let backend_ok = p.backend.is_none_or(|b| b == q.backend);
    env_ok && tenant_ok && backend_ok && p.queue.matches(&q.queue)
}

impl PolicySet {
    /// The schedule of policies that set none: the file's `schedule:`, else the default
    /// (`1h`), with which of the two it is.
    pub fn file_schedule(&self) -> Sourced<Schedule> {
        match &self.schedule {
            Some(s) => Sourced {
                value: s.clone(),
                source: Provenance::TopLevel,
            },
            None => Sourced {
                value: Schedule::Every(crate::schedule::DEFAULT_SCHEDULE),
                source: Provenance::Default,
            },
        }
    }

    /// Policies that apply to the queue, most specific first (ties keep file order).
    pub fn candidates(&self, q: &QueueId) -> Vec<&Policy> {
        let mut out: Vec<&Policy> = self.policies.iter().filter(|p| applies(p, q)).collect();
        out.sort_by_key(|p| std::cmp::Reverse(rank(p)));
        out
    }

    /// The `subjects:` entries named `name` that apply to a queue: the top-level one, then those
    /// of every policy that applies to it. A job belongs to the subject when any of them finds it.
    pub fn subjects_for(&self, q: &QueueId, name: &str) -> Vec<&Subject> {
        let own = self
            .candidates(q)
            .into_iter()
            .flat_map(|p| p.subjects.iter());
        self.subjects
            .iter()
            .chain(own)
            .filter(|s| s.name == name)
            .collect()
    }

    /// Every subject name the file declares, sorted.
    pub fn subject_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .subjects
            .iter()
            .chain(self.policies.iter().flat_map(|p| p.subjects.iter()))
            .map(|s| s.name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Resolves the effective policy for a queue.
    pub fn resolve(&self, q: &QueueId) -> Resolution {
        let candidates = self.candidates(q);
        let Some(winner) = candidates.first() else {
            return Resolution::Uncovered;
        };
        if let Some(second) = candidates.get(1)
            && rank(second) == rank(winner)
        {
            return Resolution::Tie {
                first: winner.name.clone(),
                second: second.name.clone(),
            };
        }
        let overrides = self.overrides_for(q);
        let name = match overrides.first() {
            Some(o) => format!("{}->override:{}", winner.name, o.tenant_id),
            None => winner.name.clone(),
        };
        let mut states = BTreeMap::new();
        for state in JobState::ALL {
            let layers = policy_layer(winner, state)
                .into_iter()
                .chain(override_layers(&overrides, state));
            if let Some(rule) = merge(layers) {
                states.insert(state, rule);
            }
        }
        let policy_source = winner.source.complete(&self.sources).map(|link| Sourced {
            value: link,
            source: Provenance::Policy {
                policy: winner.name.clone(),
            },
        });
        let jobs = self.job_rules(winner, &overrides, &policy_source);
        Resolution::Covered(EffectivePolicy {
            name,
            policy: winner.name.clone(),
            states,
            jobs,
            source: policy_source,
            sla: winner.sla.clone(),
            pii: winner.pii.as_deref().cloned(),
            schedule: match &winner.daemon.schedule {
                Some(own) => Sourced {
                    value: own.clone(),
                    source: Provenance::Policy {
                        policy: winner.name.clone(),
                    },
                },
                None => self.file_schedule(),
            },
            mode: winner.daemon.mode,
            stalled: winner.daemon.stalled,
            depends_on: winner.daemon.depends_on.clone(),
            dead_letter: winner.daemon.dead_letter,
            move_exhausted_to: winner.daemon.move_exhausted_to.clone(),
            flows: winner.flows,
            events: winner.events,
        })
    }

    /// The effective rules of each of `winner`'s job rules: the policy's rules, the job
    /// rule's, then the tenant's overrides, field by field; its source link over the policy's.
    fn job_rules(
        &self,
        winner: &Policy,
        overrides: &[&TenantOverride],
        policy_source: &Option<Sourced<SourceLink>>,
    ) -> Vec<EffectiveJobRule> {
        winner
            .jobs
            .iter()
            .map(|job| {
                let mut job_states = BTreeMap::new();
                for state in JobState::ALL {
                    let job_layer = job.rules.get(&state).map(|r| {
                        (
                            &**r,
                            Provenance::JobRule {
                                policy: winner.name.clone(),
                                job: job.name.clone(),
                            },
                        )
                    });
                    let layers = policy_layer(winner, state)
                        .into_iter()
                        .chain(job_layer)
                        .chain(override_layers(overrides, state));
                    if let Some(rule) = merge(layers) {
                        job_states.insert(state, rule);
                    }
                }
                let source = if job.source.is_empty() {
                    policy_source.clone()
                } else {
                    job.source
                        .over(&winner.source)
                        .complete(&self.sources)
                        .map(|link| Sourced {
                            value: link,
                            source: Provenance::JobRule {
                                policy: winner.name.clone(),
                                job: job.name.clone(),
                            },
                        })
                };
                EffectiveJobRule {
                    name: job.name.clone(),
                    states: job_states,
                    source,
                }
            })
            .collect()
    }

    /// Tenant overrides for the queue: the environment-wide one first, then the one for its
    /// environment, so the more specific lands last and wins.
    fn overrides_for(&self, q: &QueueId) -> Vec<&TenantOverride> {
        let Some(tenant) = &q.tenant else {
            return Vec::new();
        };
        let mut out: Vec<&TenantOverride> = self
            .tenants
            .iter()
            .filter(|o| &o.tenant_id == tenant)
            .filter(|o| o.environment.is_none() || o.environment == q.env)
            .collect();
        out.sort_by_key(|o| o.environment.is_some());
        out
    }
}

/// The policy's own rule for `state`, as a layer.
fn policy_layer(winner: &Policy, state: JobState) -> Option<(&StateRule, Provenance)> {
    winner.rules.get(&state).map(|r| {
        (
            &**r,
            Provenance::Policy {
                policy: winner.name.clone(),
            },
        )
    })
}

/// The tenant overrides' rules for `state`, as layers, in the order they apply.
fn override_layers<'o>(
    overrides: &'o [&'o TenantOverride],
    state: JobState,
) -> impl Iterator<Item = (&'o StateRule, Provenance)> + 'o {
    overrides.iter().filter_map(move |o| {
        o.overrides.get(&state).map(|r| {
            (
                &**r,
                Provenance::TenantOverride {
                    tenant: o.tenant_id.clone(),
                },
            )
        })
    })
}

/// `value`, set by the layer `source`.
fn sourced<T>(value: T, source: &Provenance) -> Sourced<T> {
    Sourced {
        value,
        source: source.clone(),
    }
}

/// Field-by-field merge: the last layer that sets a field wins.
fn merge<'r>(layers: impl Iterator<Item = (&'r StateRule, Provenance)>) -> Option<EffectiveRule> {
    let mut any = false;
    let mut max_age = None;
    let mut max_count = None;
    let mut keep_for = None;
    let mut keep_if = None;
    let mut ttl = None;
    let mut remind_every = None;
    let mut action = Sourced {
        value: Action::Remove,
        source: Provenance::Default,
    };
    for (rule, source) in layers {
        any = true;
        if let Some(v) = rule.max_age {
            max_age = Some(sourced(v, &source));
        }
        if let Some(v) = rule.max_count {
            max_count = Some(sourced(v, &source));
        }
        if let Some(v) = rule.keep_for {
            keep_for = Some(sourced(v, &source));
        }
        if let Some(v) = &rule.keep_if {
            keep_if = Some(sourced(v.clone(), &source));
        }
        if let Some(v) = rule.ttl {
            ttl = Some(sourced(v, &source));
        }
        if let Some(v) = rule.remind_every {
            remind_every = Some(sourced(v, &source));
        }
        if let Some(v) = rule.action {
            action = sourced(v, &source);
        }
    }
    any.then_some(EffectiveRule {
        max_age,
        max_count,
        keep_for,
        action,
        keep_if,
        ttl,
        remind_every,
    })
}

/// The order a run visits queues in: each after the queues its `dependsOn` names (by queue
/// name), otherwise in the given order. `items` are (queue name, names it depends on); the
/// result lists indexes into `items`. Queues caught in a loop (which `check` refuses) keep
/// their given order at the end.
pub fn dependency_order(items: &[(&str, &[String])]) -> Vec<usize> {
    let mut waiting: Vec<usize> = items
        .iter()
        .map(|(name, deps)| {
            items
                .iter()
                .filter(|(other, _)| other != name && deps.iter().any(|d| d == other))
                .count()
        })
        .collect();
    let mut done = vec![false; items.len()];
    let mut out = Vec::with_capacity(items.len());
    while out.len() < items.len() {
        let Some(next) = (0..items.len()).find(|&i| !done[i] && waiting[i] == 0) else {
            out.extend((0..items.len()).filter(|&i| !done[i]));
            break;
        };
        done[next] = true;
        out.push(next);
        let name = items[next].0;
        for (i, (other, deps)) in items.iter().enumerate() {
            if !done[i] && *other != name && deps.iter().any(|d| d == name) {
                waiting[i] -= 1;
            }
        }
    }
    out
}
