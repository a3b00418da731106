//! The policy file and one queue's effective policy described as JSON (`check --json`,
//! `explain --json`, the dashboard's API), and the daemon settings as `(field, text, JSON)`
//! triples the command line's tables show too.

use crate::{
    Backend, DeadLetter, EffectivePolicy, EffectiveRule, EventsBound, FlowSettings, JobState,
    PartialSourceLink, Policy, PolicySet, QueueId, Resolution, RunMode, Schedule, Sla, Source,
    SourceKind, SourceLink, Sourced, StalledRule, StateRules,
};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `events:` as `(field, text, JSON)`, when the policy bounds its streams.
fn events_field(events: Option<&EventsBound>) -> Option<(&'static str, String, Value)> {
    let e = events?;
    let mut parts = Vec::new();
    if let Some(n) = e.max_len {
        parts.push(format!("maxLen {n}"));
    }
    if let Some(a) = e.max_age {
        parts.push(format!("maxAge {a}"));
    }
    Some((
        "events",
        parts.join(", "),
        json!({"maxLen": e.max_len, "maxAgeMs": e.max_age.map(|a| a.as_millis())}),
    ))
}

/// The daemon settings of a policy or an effective policy, as `(field, text, JSON)`; fields at
/// their defaults are left out.
fn daemon_fields(
    schedule: Option<&Schedule>,
    mode: RunMode,
    stalled: Option<&StalledRule>,
    dead_letter: Option<&DeadLetter>,
    depends_on: &[String],
    move_exhausted_to: Option<&str>,
) -> Vec<(&'static str, String, Value)> {
    let mut out = Vec::new();
    if let Some(s) = schedule {
        out.push(("schedule", s.to_string(), schedule_json(s)));
    }
    if mode != RunMode::Schedule {
        out.push(("mode", mode.as_str().to_string(), json!(mode.as_str())));
    }
    if let Some(st) = stalled {
        out.push((
            "stalled",
            format!("maxAge {}, action {}", st.max_age, st.action.as_str()),
            json!({"maxAgeMs": st.max_age.as_millis(), "action": st.action.as_str()}),
        ));
    }
    if let Some(d) = dead_letter {
        out.push((
            "deadLetter",
            format!("warm {}, cold {}, purgeAfter {}", d.warm, d.cold, d.purge_after),
            json!({"warmMs": d.warm.as_millis(), "coldMs": d.cold.as_millis(), "purgeAfterMs": d.purge_after.as_millis()}),
        ));
    }
    if !depends_on.is_empty() {
        out.push(("dependsOn", depends_on.join(", "), json!(depends_on)));
    }
    if let Some(q) = move_exhausted_to {
        out.push(("moveExhaustedTo", q.to_string(), json!(q)));
    }
    out
}

/// A schedule in JSON: `{"everyMs": N}`, `{"cron": …, "timezone": …}` or `"auto"`.
fn schedule_json(s: &Schedule) -> Value {
    match s {
        Schedule::Every(every) => json!({ "everyMs": every.as_millis() }),
        Schedule::Cron(cron) => json!({ "cron": cron.expr, "timezone": cron.timezone }),
        Schedule::Auto => json!("auto"),
    }
}

/// A policy's daemon settings and `events` bound, as `(field, text, JSON)`.
pub fn policy_daemon_fields(p: &Policy) -> Vec<(&'static str, String, Value)> {
    daemon_fields(
        p.daemon.schedule.as_ref(),
        p.daemon.mode,
        p.daemon.stalled.as_ref(),
        p.daemon.dead_letter.as_ref(),
        &p.daemon.depends_on,
        p.daemon.move_exhausted_to.as_deref(),
    )
    .into_iter()
    .chain(events_field(p.events.as_ref()))
    .collect()
}

/// An effective policy's daemon settings and `events` bound, as `(field, text, JSON)`.
pub fn effective_daemon_fields(eff: &EffectivePolicy) -> Vec<(&'static str, String, Value)> {
    daemon_fields(
        Some(&eff.schedule.value),
        eff.mode,
        eff.stalled.as_ref(),
        eff.dead_letter.as_ref(),
        &eff.depends_on,
        eff.move_exhausted_to.as_deref(),
    )
    .into_iter()
    .chain(events_field(eff.events.as_ref()))
    .collect()
}

fn fields_json(fields: Vec<(&'static str, String, Value)>) -> Value {
    let map: serde_json::Map<String, Value> = fields
        .into_iter()
        .map(|(name, _, v)| (name.to_string(), v))
        .collect();
    Value::Object(map)
}

fn rules_json(rules: &StateRules) -> Value {
    let map: BTreeMap<&str, Value> = rules
        .iter()
        .map(|(state, r)| {
            (
                state.as_str(),
                json!({
                    "maxAgeMs": r.max_age.map(|d| d.as_millis()),
                    "maxCount": r.max_count,
                    "keepForMs": r.keep_for.map(|d| d.as_millis()),
                    "action": r.action.map(|a| a.as_str()),
                    "keepIf": r.keep_if.as_ref().map(|k| json!({"path": k.path.to_string(), "equals": k.equals})),
                    "ttlMs": r.ttl.map(|d| d.as_millis()),
                    "remindEveryMs": r.remind_every.map(|d| d.as_millis()),
                }),
            )
        })
        .collect();
    json!(map)
}

/// A policy's `sla` block in JSON.
fn sla_json(s: &Sla) -> Value {
    json!({
        "maxDataAgeHours": s.max_data_age_hours,
        "complianceTag": s.compliance_tag,
        "auditRequired": s.audit_required,
    })
}

fn partial_link_json(l: &PartialSourceLink) -> Value {
    if l.is_empty() {
        return Value::Null;
    }
    json!({
        "source": l.source,
        "key": l.key.as_ref().map(ToString::to_string),
        "deleteWhen": l.delete_when.map(|d| d.as_str()),
        "keepForMs": l.keep_for.map(|k| k.as_millis()),
        "action": l.action.map(|a| a.as_str()),
    })
}

/// A complete link with its origin, for `explain --json`.
fn link_json(l: &Sourced<SourceLink>) -> Value {
    json!({
        "source": l.value.source,
        "key": l.value.key.to_string(),
        "deleteWhen": l.value.delete_when.as_str(),
        "keepForMs": l.value.keep_for.as_millis(),
        "action": l.value.action.as_str(),
        "from": l.source.to_string(),
    })
}

/// What `check` says of a source: its kind, where (never its credentials), its bounds.
pub fn source_json(s: &Source) -> Value {
    let at = match &s.kind {
        SourceKind::Postgres { .. } => "a PostgreSQL query".to_string(),
        SourceKind::Redis {
            url,
            key,
            field,
            equals,
        } => {
            let server = if url.is_some() {
                "another Redis"
            } else {
                "the governed Redis"
            };
            let matching = match (field, equals) {
                (Some(f), Some(e)) => format!(", matching while {f} = {e}"),
                _ => String::new(),
            };
            format!(
                "{server}, keys {}{{key}}{}{matching}",
                key.before, key.after
            )
        }
    };
    json!({
        "kind": s.kind.as_str(),
        "at": at,
        "timeoutMs": s.timeout.as_millis(),
        "batchSize": s.batch_size,
    })
}

/// `check --json`: the policy set, written out one policy at a time.
pub fn policy_set_json(set: &PolicySet) -> PolicySetJson<'_> {
    PolicySetJson(set)
}

/// The JSON document of `check --json`, made as it is written. Why: the whole document as one
/// JSON tree took about 5 KB per policy (250 MB for a file of 50,000 policies), and `check`
/// built it even to print text.
pub struct PolicySetJson<'a>(&'a PolicySet);

/// The policies of `check --json`, each made into JSON as it is written.
struct EachPolicy<'a>(&'a [Policy]);

impl Serialize for EachPolicy<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(policy_json))
    }
}

impl Serialize for PolicySetJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let set = self.0;
        let layouts: Vec<&str> = set.layouts.iter().map(|l| l.as_str()).collect();
        let bull_board = set
            .bull_board
            .as_ref()
            .map(|b| json!({"url": b.url, "queueName": b.queue_name}));
        let doctor = set.doctor.as_ref().map(|d| {
            json!({
                "schedule": schedule_json(&d.schedule),
                "repair": d.repair.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
            })
        });
        let sources: BTreeMap<&str, Value> = set
            .sources
            .iter()
            .map(|(n, s)| (n.as_str(), source_json(s)))
            .collect();
        let tenants: Vec<Value> = set
            .tenants
            .iter()
            .map(|t| {
                json!({
                    "tenantId": t.tenant_id,
                    "environment": t.environment,
                    "overrides": rules_json(&t.overrides),
                })
            })
            .collect();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("file", &set.source)?;
        m.serialize_entry("environment", &set.environment)?;
        m.serialize_entry("aliases", &set.aliases)?;
        m.serialize_entry("layouts", &layouts)?;
        m.serialize_entry("policies", &EachPolicy(&set.policies))?;
        m.serialize_entry("schedule", &schedule_json(&set.file_schedule().value))?;
        m.serialize_entry("bullBoard", &bull_board)?;
        m.serialize_entry("doctor", &doctor)?;
        m.serialize_entry("sources", &sources)?;
        m.serialize_entry("tenants", &tenants)?;
        m.end()
    }
}

/// One policy of `check --json`.
fn policy_json(p: &Policy) -> Value {
    json!({
        "name": p.name,
        "environment": p.environment,
        "queueNamePattern": p.queue.as_str(),
        "tenant": p.tenant.as_ref().map(|t| t.as_str()),
        "backend": p.backend,
        "rules": rules_json(&p.rules),
        "jobs": p.jobs.iter().map(|j| json!({"name": j.name, "rules": rules_json(&j.rules), "source": partial_link_json(&j.source)})).collect::<Vec<_>>(),
        "source": partial_link_json(&p.source),
        "sla": p.sla.as_ref().map(sla_json),
        "daemon": fields_json(policy_daemon_fields(p)),
        "flows": written_flows_json(&p.flows),
    })
}

/// A policy's flow settings as it writes them, `null` for one it leaves at its default.
fn written_flows_json(flows: &FlowSettings) -> Value {
    let map: serde_json::Map<String, Value> = flows
        .fields()
        .into_iter()
        .map(|f| {
            (
                f.name.to_string(),
                if f.written { f.json } else { Value::Null },
            )
        })
        .collect();
    Value::Object(map)
}

fn effective_json(rule: &EffectiveRule) -> Value {
    let map: BTreeMap<&str, Value> = rule
        .fields()
        .into_iter()
        .map(|f| {
            (
                f.key,
                json!({ "value": f.json, "from": f.from.to_string() }),
            )
        })
        .collect();
    json!(map)
}

fn states_json(states: &BTreeMap<JobState, EffectiveRule>) -> Value {
    let map: BTreeMap<&str, Value> = states
        .iter()
        .map(|(s, r)| (s.as_str(), effective_json(r)))
        .collect();
    json!(map)
}

/// The policy that would govern `q` were it a queue of the other library, when that is not
/// the policy that governs it as it is (none, or another): the backend and the policy's name.
/// `explain` reads no Redis, so it cannot know a queue's library; this says what `--backend`
/// would change.
pub fn other_backend_policy(set: &PolicySet, q: &QueueId) -> Option<(Backend, String)> {
    let name = |r: Resolution| match r {
        Resolution::Covered(eff) => Some(eff.name),
        Resolution::Uncovered | Resolution::Tie { .. } => None,
    };
    let own = name(set.resolve(q));
    Backend::ALL
        .into_iter()
        .filter(|b| *b != q.backend)
        .find_map(|backend| {
            let other = QueueId {
                backend,
                ..q.clone()
            };
            let policy = name(set.resolve(&other))?;
            (own.as_ref() != Some(&policy)).then_some((backend, policy))
        })
}

/// `explain --json`.
pub fn explain_json(set: &PolicySet, q: &QueueId, resolution: &Resolution) -> Value {
    let candidates: Vec<&str> = set.candidates(q).iter().map(|p| p.name.as_str()).collect();
    let mut v = json!({
        "key": q.base,
        "queue": q.queue,
        "tenant": q.tenant,
        "env": q.env,
        "backend": q.backend,
        "candidates": candidates,
    });
    v["otherBackend"] = match other_backend_policy(set, q) {
        Some((backend, policy)) => json!({ "backend": backend, "policy": policy }),
        None => Value::Null,
    };
    match resolution {
        Resolution::Covered(eff) => {
            v["policy"] = json!(eff.name);
            v["states"] = states_json(&eff.states);
            v["pii"] = eff.pii.as_ref().map_or(Value::Null, |p| {
                json!({
                    "paths": p.paths.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "patterns": p.patterns.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
                    "replacement": p.replacement,
                })
            });
            v["jobs"] = json!(
                eff.jobs
                    .iter()
                    .map(|j| json!({"name": j.name, "states": states_json(&j.states), "source": j.source.as_ref().map(link_json)}))
                    .collect::<Vec<_>>()
            );
            v["source"] = eff.source.as_ref().map_or(Value::Null, link_json);
            v["daemon"] = fields_json(effective_daemon_fields(eff));
            v["scheduleFrom"] = json!(eff.schedule.source.to_string());
            let flows: serde_json::Map<String, Value> = FlowSettings::NAMES
                .iter()
                .filter_map(|name| eff.field(name))
                .map(|f| {
                    let field = json!({ "value": f.json, "from": f.from.to_string() });
                    (f.name.to_string(), field)
                })
                .collect();
            v["flows"] = Value::Object(flows);
            v["sla"] = eff.sla.as_ref().map_or(Value::Null, sla_json);
        }
        Resolution::Uncovered => v["policy"] = Value::Null,
        Resolution::Tie { first, second } => {
            v["policy"] = Value::Null;
            v["tie"] = json!([first, second]);
        }
    }
    v
}
