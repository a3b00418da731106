//! `check` and `explain`: the policy set and one queue's effective policy, as tables for
//! people and as JSON.

use super::table::{Grid, table};
use bullsweep_policy::{
    Backend, DeadLetter, EffectivePolicy, EffectiveRule, EventsBound, JobState, PartialSourceLink,
    Policy, PolicySet, QueueId, Resolution, RunMode, Schedule, Sla, Source, SourceKind, SourceLink,
    Sourced, StalledRule, StateRule, StateRules,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write;

fn rule_text(rule: &StateRule) -> String {
    let mut parts = Vec::new();
    if let Some(v) = rule.max_age {
        parts.push(format!("maxAge {v}"));
    }
    if let Some(v) = rule.max_count {
        parts.push(format!("maxCount {v}"));
    }
    if let Some(v) = rule.keep_for {
        parts.push(format!("keepFor {v}"));
    }
    if let Some(v) = rule.action {
        parts.push(format!("action {v}"));
    }
    if let Some(k) = &rule.keep_if {
        parts.push(format!("keepIf {} = {}", k.path, k.equals));
    }
    if let Some(v) = rule.ttl {
        parts.push(format!("ttl {v}"));
    }
    parts.join(", ")
}

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

fn policy_daemon_fields(p: &Policy) -> Vec<(&'static str, String, Value)> {
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

fn effective_daemon_fields(eff: &EffectivePolicy) -> Vec<(&'static str, String, Value)> {
    daemon_fields(
        Some(&eff.schedule),
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

/// A policy's `sla` block for people: `auditRequired yes, complianceTag gdpr, maxDataAgeHours
/// 720`.
fn sla_text(s: &Sla) -> String {
    let mut parts = vec![format!(
        "auditRequired {}",
        if s.audit_required { "yes" } else { "no" }
    )];
    if let Some(tag) = &s.compliance_tag {
        parts.push(format!("complianceTag {tag}"));
    }
    if let Some(hours) = s.max_data_age_hours {
        parts.push(format!("maxDataAgeHours {hours}"));
    }
    parts.join(", ")
}

/// A link as one layer writes it, for people: `orders by data.orderId, deleteWhen …`.
fn partial_link_text(l: &PartialSourceLink) -> String {
    let mut parts = Vec::new();
    if let Some(s) = &l.source {
        parts.push(format!("source {s}"));
    }
    if let Some(k) = &l.key {
        parts.push(format!("key {k}"));
    }
    if let Some(d) = l.delete_when {
        parts.push(format!("deleteWhen {d}"));
    }
    if let Some(k) = l.keep_for {
        parts.push(format!("keepFor {k}"));
    }
    if let Some(a) = l.action {
        parts.push(format!("action {a}"));
    }
    parts.join(", ")
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
fn source_json(s: &Source) -> Value {
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

/// `check --json`.
pub fn policy_set_json(set: &PolicySet) -> Value {
    json!({
        "file": set.source,
        "environment": set.environment,
        "aliases": set.aliases,
        "layouts": set.layouts.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        "policies": set.policies.iter().map(|p| json!({
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
        })).collect::<Vec<_>>(),
        "schedule": schedule_json(&set.schedule),
        "doctor": set.doctor.as_ref().map(|d| json!({
            "schedule": schedule_json(&d.schedule),
            "repair": d.repair.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        })),
        "sources": set.sources.iter().map(|(n, s)| (n.clone(), source_json(s))).collect::<BTreeMap<_, _>>(),
        "tenants": set.tenants.iter().map(|t| json!({
            "tenantId": t.tenant_id,
            "environment": t.environment,
            "overrides": rules_json(&t.overrides),
        })).collect::<Vec<_>>(),
    })
}

/// `check`'s line for the daemon's doctor runs, when the file asks for them.
fn doctor_line(set: &PolicySet) -> Option<String> {
    let d = set.doctor.as_ref()?;
    let repair: Vec<&str> = d.repair.iter().map(|k| k.as_str()).collect();
    let repair = if repair.is_empty() {
        "nothing (finds only)".to_string()
    } else {
        repair.join(", ")
    };
    Some(format!("doctor: {}, repairs {repair}", d.schedule))
}

/// `check` for people.
pub fn policy_set_text(set: &PolicySet) -> String {
    let mut out = String::new();
    let layouts: Vec<&str> = set.layouts.iter().map(|l| l.as_str()).collect();
    let _ = writeln!(out, "{}: valid", set.source);
    let _ = writeln!(
        out,
        "environment: {}",
        set.environment.as_deref().unwrap_or("(any)")
    );
    let _ = writeln!(out, "layouts: {}", layouts.join(", "));
    let _ = writeln!(out, "schedule: {}", set.schedule);
    if let Some(line) = doctor_line(set) {
        let _ = writeln!(out, "{line}");
    }
    let mut t = table(&["policy", "env", "queue", "tenant", "state", "rule"]);
    for p in &set.policies {
        let env = p.environment.as_deref().unwrap_or("*");
        let tenant = p.tenant.as_ref().map_or("-", |t| t.as_str());
        // A policy for one library's queues says which.
        let queue = match p.backend {
            Some(b) => format!("{} ({b})", p.queue.as_str()),
            None => p.queue.as_str().to_string(),
        };
        for (state, rule) in &p.rules {
            t.add_row(vec![
                &p.name,
                env,
                &queue,
                tenant,
                state.as_str(),
                &rule_text(rule),
            ]);
        }
        if !p.source.is_empty() {
            let text = partial_link_text(&p.source);
            t.add_row(vec![&p.name, env, &queue, tenant, "source", &text]);
        }
        for j in &p.jobs {
            if !j.source.is_empty() {
                let scope = format!("source (job {})", j.name);
                let text = partial_link_text(&j.source);
                t.add_row(vec![&p.name, env, &queue, tenant, &scope, &text]);
            }
            for (state, rule) in &j.rules {
                let scope = format!("{state} (job {})", j.name);
                t.add_row(vec![&p.name, env, &queue, tenant, &scope, &rule_text(rule)]);
            }
        }
    }
    let _ = writeln!(out, "{t}");
    if !set.sources.is_empty() {
        let mut t = table(&["source", "kind", "at", "timeout", "batchSize"]);
        for (name, s) in &set.sources {
            let v = source_json(s);
            t.add_row(vec![
                name.clone(),
                s.kind.as_str().to_string(),
                v["at"].as_str().unwrap_or_default().to_string(),
                s.timeout.to_string(),
                s.batch_size.to_string(),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    let mut daemon = table(&["policy", "daemon setting", "value"]);
    let mut any = false;
    for p in &set.policies {
        for (name, text, _) in policy_daemon_fields(p) {
            any = true;
            daemon.add_row(vec![p.name.clone(), name.to_string(), text]);
        }
    }
    if any {
        let _ = writeln!(out, "{daemon}");
    }
    if !set.tenants.is_empty() {
        let mut t = table(&["tenant override", "env", "state", "rule"]);
        for o in &set.tenants {
            for (state, rule) in &o.overrides {
                t.add_row(vec![
                    o.tenant_id.as_str(),
                    o.environment.as_deref().unwrap_or("*"),
                    state.as_str(),
                    &rule_text(rule),
                ]);
            }
        }
        let _ = writeln!(out, "{t}");
    }
    out.trim_end().to_string()
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

fn effective_rows(t: &mut Grid, scope: &str, states: &BTreeMap<JobState, EffectiveRule>) {
    for (state, rule) in states {
        for f in rule.fields() {
            t.add_row(vec![
                format!("{scope}{state}"),
                f.name.to_string(),
                f.shown,
                f.from.to_string(),
            ]);
        }
    }
}

/// The rows of a complete source link (`source` in the state column).
fn link_rows(t: &mut Grid, scope: &str, link: Option<&Sourced<SourceLink>>) {
    let Some(l) = link else {
        return;
    };
    let from = l.source.to_string();
    for (field, value) in [
        ("source", l.value.source.clone()),
        ("key", l.value.key.to_string()),
        ("deleteWhen", l.value.delete_when.to_string()),
        ("keepFor", l.value.keep_for.to_string()),
        ("action", l.value.action.to_string()),
    ] {
        t.add_row(vec![
            format!("{scope}source"),
            field.to_string(),
            value,
            from.clone(),
        ]);
    }
}

/// `explain` for people.
pub fn explain_text(set: &PolicySet, q: &QueueId, resolution: &Resolution) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "queue:  {} (key base {})", q.queue, q.base);
    let _ = writeln!(out, "tenant: {}", q.tenant.as_deref().unwrap_or("-"));
    let _ = writeln!(out, "env:    {}", q.env.as_deref().unwrap_or("-"));
    if q.backend == Backend::Bull {
        let _ = writeln!(out, "backend: bull (legacy Bull)");
    }
    let candidates: Vec<String> = set
        .candidates(q)
        .iter()
        .map(|p| match p.backend {
            Some(b) => format!("{} ({}, backend {b})", p.name, p.queue.as_str()),
            None => format!("{} ({})", p.name, p.queue.as_str()),
        })
        .collect();
    let _ = writeln!(
        out,
        "candidates, most specific first: {}",
        if candidates.is_empty() {
            "none".to_string()
        } else {
            candidates.join(", ")
        }
    );
    match resolution {
        Resolution::Covered(eff) => {
            let _ = writeln!(out, "policy: {}", eff.name);
            let mut t = table(&["state", "field", "value", "from"]);
            effective_rows(&mut t, "", &eff.states);
            link_rows(&mut t, "", eff.source.as_ref());
            for j in &eff.jobs {
                effective_rows(&mut t, &format!("job {}: ", j.name), &j.states);
                link_rows(&mut t, &format!("job {}: ", j.name), j.source.as_ref());
            }
            let _ = writeln!(out, "{t}");
            for (name, text, _) in effective_daemon_fields(eff) {
                let _ = writeln!(out, "{name}: {text}");
            }
            let sla = eff
                .sla
                .as_ref()
                .map_or_else(|| "none".to_string(), sla_text);
            let _ = writeln!(out, "sla: {sla}");
            if let Some(p) = &eff.pii {
                let list = |items: Vec<String>| {
                    if items.is_empty() {
                        "none".to_string()
                    } else {
                        items.join(", ")
                    }
                };
                let _ = writeln!(
                    out,
                    "pii: paths {}; patterns {}; replacement {:?}",
                    list(p.paths.iter().map(ToString::to_string).collect()),
                    list(p.patterns.iter().map(ToString::to_string).collect()),
                    p.replacement
                );
            }
        }
        Resolution::Uncovered => {
            let _ = writeln!(out, "policy: none; the queue is uncovered and left alone");
        }
        Resolution::Tie { first, second } => {
            let _ = writeln!(
                out,
                "policy: none; `{first}` and `{second}` tie (fix the policy file)"
            );
        }
    }
    out.trim_end().to_string()
}
