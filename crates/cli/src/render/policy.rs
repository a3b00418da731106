//! `check` and `explain`: the policy set and one queue's effective policy, as tables for
//! people and as JSON.

use super::table::{Grid, table};
use bullsweep_policy::{
    Backend, EffectiveRule, FlowSettings, JobState, PartialSourceLink, PolicySet, Provenance,
    QueueId, Resolution, Sla, SourceLink, Sourced, StateRule, effective_daemon_fields,
    other_backend_policy, policy_daemon_fields, source_json,
};
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
    if let Some(v) = rule.remind_every {
        parts.push(format!("remindEvery {v}"));
    }
    parts.join(", ")
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

/// `check`'s lines for what policies that set none take: the file's schedule (or the default)
/// and the flow settings' defaults.
fn defaults_lines(set: &PolicySet, out: &mut String) {
    let schedule = set.file_schedule();
    let _ = match schedule.source {
        Provenance::Default => writeln!(out, "schedule: {} (default)", schedule.value),
        _ => writeln!(out, "schedule: {}", schedule.value),
    };
    let defaults: Vec<String> = FlowSettings::default()
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name, f.shown))
        .collect();
    let _ = writeln!(
        out,
        "flows (default, for policies that set none): {}",
        defaults.join(", ")
    );
}

/// `check`'s table of each policy's own settings (daemon settings, `events`, the flow
/// settings it writes); `None` when no policy sets one.
fn settings_table(set: &PolicySet) -> Option<Grid> {
    let mut t = table(&["policy", "setting", "value"]);
    let mut any = false;
    for p in &set.policies {
        for (name, text, _) in policy_daemon_fields(p) {
            any = true;
            t.add_row(vec![p.name.clone(), name.to_string(), text]);
        }
        for f in p.flows.fields().into_iter().filter(|f| f.written) {
            any = true;
            t.add_row(vec![p.name.clone(), f.name.to_string(), f.shown]);
        }
    }
    any.then_some(t)
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
    defaults_lines(set, &mut out);
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
    if let Some(settings) = settings_table(set) {
        let _ = writeln!(out, "{settings}");
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
    if !q.backend.is_default() {
        let _ = writeln!(out, "backend: {} ({})", q.backend, q.backend.library());
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
            // Each setting with where it comes from: the schedule from the policy, the file's
            // top level or the default, the flow settings from the policy or the default, the
            // others from the policy alone.
            let own = format!("policy {}", eff.policy);
            for (name, text, _) in effective_daemon_fields(eff) {
                let from = match eff.field(name) {
                    Some(f) if name == "schedule" => f.from.to_string(),
                    _ => own.clone(),
                };
                let _ = writeln!(out, "{name}: {text} ({from})");
            }
            for f in FlowSettings::NAMES.iter().filter_map(|n| eff.field(n)) {
                let _ = writeln!(out, "{}: {} ({})", f.name, f.shown, f.from);
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
    // explain reads no Redis, so it takes the queue for the library `--backend` names.
    if let Some((backend, policy)) = other_backend_policy(set, q) {
        let library = match backend {
            Backend::Bull => "a legacy Bull queue",
            Backend::Bullmq => "a BullMQ queue",
            Backend::BullmqPostgres => "a BullMQ queue on PostgreSQL",
        };
        let _ = writeln!(
            out,
            "hint: as {library}, policy `{policy}` (backend {backend}) would govern it; pass `--backend {backend}` (explain reads no Redis, so it cannot tell the queue's library; `plan` does)"
        );
    }
    out.trim_end().to_string()
}
