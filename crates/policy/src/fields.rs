//! The effective fields of a queue by the names the policy file uses (`completed.maxAge`,
//! `sla.auditRequired`, `jobs.charge.failed.action`), each with its value and the layer that
//! set it: what `explain` lists and what a `bullsweep test` case compares.

use crate::duration::Millis;
use crate::model::JobState;
use crate::resolve::{EffectivePolicy, EffectiveRule, Provenance, Sourced};
use crate::schedule::Schedule;
use crate::source::SourceLink;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One field of an effective rule: its name, its JSON key and value (durations in ms), the
/// value as people read it, its span when it is a duration, and its origin.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleField {
    /// The name in the policy file (`maxAge`).
    pub name: &'static str,
    /// The key in `explain --json` (`maxAgeMs`).
    pub key: &'static str,
    /// The JSON value (durations in ms).
    pub json: Value,
    /// The value as people read it (`7d`).
    pub shown: String,
    /// The span, when the field is a duration.
    pub millis: Option<Millis>,
    /// The layer that set it.
    pub from: Provenance,
}

fn duration(name: &'static str, key: &'static str, v: &Sourced<Millis>) -> RuleField {
    RuleField {
        name,
        key,
        json: json!(v.value.as_millis()),
        shown: v.value.to_string(),
        millis: Some(v.value),
        from: v.source.clone(),
    }
}

fn plain(name: &'static str, json: Value, shown: String, from: &Provenance) -> RuleField {
    RuleField {
        name,
        key: name,
        json,
        shown,
        millis: None,
        from: from.clone(),
    }
}

impl EffectiveRule {
    /// The rule's fields in display order; the action always, the others when set.
    pub fn fields(&self) -> Vec<RuleField> {
        let mut fields = Vec::new();
        if let Some(v) = &self.max_age {
            fields.push(duration("maxAge", "maxAgeMs", v));
        }
        if let Some(v) = &self.max_count {
            fields.push(plain(
                "maxCount",
                json!(v.value),
                v.value.to_string(),
                &v.source,
            ));
        }
        if let Some(v) = &self.keep_for {
            fields.push(duration("keepFor", "keepForMs", v));
        }
        if let Some(v) = &self.keep_if {
            let shown = format!("{} = {}", v.value.path, v.value.equals);
            fields.push(plain("keepIf", json!(shown), shown, &v.source));
        }
        if let Some(v) = &self.ttl {
            fields.push(duration("ttl", "ttlMs", v));
        }
        if let Some(v) = &self.remind_every {
            fields.push(duration("remindEvery", "remindEveryMs", v));
        }
        let action = self.action.value.as_str();
        fields.push(plain(
            "action",
            json!(action),
            action.into(),
            &self.action.source,
        ));
        fields
    }
}

/// The fields of a source link, by the names of `source:`.
fn link_fields(link: &Sourced<SourceLink>) -> Vec<RuleField> {
    let l = &link.value;
    let from = &link.source;
    let keep_for = Sourced {
        value: l.keep_for,
        source: from.clone(),
    };
    vec![
        plain("source", json!(l.source), l.source.clone(), from),
        plain("key", json!(l.key.to_string()), l.key.to_string(), from),
        plain(
            "deleteWhen",
            json!(l.delete_when.as_str()),
            l.delete_when.as_str().into(),
            from,
        ),
        duration("keepFor", "keepForMs", &keep_for),
        plain(
            "action",
            json!(l.action.as_str()),
            l.action.as_str().into(),
            from,
        ),
    ]
}

/// Why a field name names nothing: the message for a test file.
pub const FIELD_NAMES: &str = "`<state>.<field>` (completed, failed, waiting, delayed, prioritized, waiting-children; maxAge, maxCount, keepFor, keepIf, ttl, remindEvery, action), `jobs.<name>.<state>.<field>`, `source.<field>` and `jobs.<name>.source.<field>` (source, key, deleteWhen, keepFor, action), `sla.auditRequired`, `sla.maxDataAgeHours`, `sla.complianceTag`, `events.maxLen`, `events.maxAge`, `schedule`, `mode`, `stalled.maxAge`, `stalled.action`, `deadLetter.warm`, `deadLetter.cold`, `deadLetter.purgeAfter`, `protectWaitingParents`, `childrenInOtherQueues`, `moveExhaustedTo`, `dependsOn`, `pii.replacement`";

/// The fields of a state's rule, by name, in the order `explain` lists them.
pub const RULE_FIELDS: [&str; 7] = [
    "maxAge",
    "maxCount",
    "keepFor",
    "keepIf",
    "ttl",
    "remindEvery",
    "action",
];

/// Whether `name` is a field [`EffectivePolicy::field`] knows (set or not).
pub fn is_field_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    let rule_field = |f: &str| RULE_FIELDS.contains(&f);
    let link_field = |f: &str| ["source", "key", "deleteWhen", "keepFor", "action"].contains(&f);
    let state_field = |s: &str, f: &str| JobState::from_name(s).is_some() && rule_field(f);
    match parts.as_slice() {
        [s, f] if state_field(s, f) => true,
        ["jobs", _, s, f] if state_field(s, f) => true,
        ["source", f] | ["jobs", _, "source", f] => link_field(f),
        ["sla", f] => ["auditRequired", "maxDataAgeHours", "complianceTag"].contains(f),
        ["events", f] => ["maxLen", "maxAge"].contains(f),
        ["stalled", f] => ["maxAge", "action"].contains(f),
        ["deadLetter", f] => ["warm", "cold", "purgeAfter"].contains(f),
        ["pii", "replacement"] => true,
        [f] => [
            "schedule",
            "mode",
            "protectWaitingParents",
            "childrenInOtherQueues",
            "moveExhaustedTo",
            "dependsOn",
        ]
        .contains(f),
        _ => false,
    }
}

impl EffectivePolicy {
    /// The field named `name` (see [`FIELD_NAMES`]), or `None` when it is not set (or names
    /// nothing; check with [`is_field_name`]).
    pub fn field(&self, name: &str) -> Option<RuleField> {
        let parts: Vec<&str> = name.split('.').collect();
        let own = Provenance::Policy {
            policy: self.policy.clone(),
        };
        let of_rule = |rule: Option<&EffectiveRule>, f: &str| {
            rule?.fields().into_iter().find(|r| r.name == f)
        };
        let of_link = |link: Option<&Sourced<SourceLink>>, f: &str| {
            link_fields(link?).into_iter().find(|r| r.name == f)
        };
        let job = |n: &str| self.jobs.iter().find(|j| j.name == n);
        match parts.as_slice() {
            ["jobs", n, "source", f] => of_link(job(n)?.source.as_ref(), f),
            ["jobs", n, s, f] => of_rule(job(n)?.states.get(&JobState::from_name(s)?), f),
            ["source", f] => of_link(self.source.as_ref(), f),
            ["sla", f] => {
                let sla = self.sla.as_ref()?;
                match *f {
                    "auditRequired" => {
                        let v = sla.audit_required;
                        Some(plain("auditRequired", json!(v), v.to_string(), &own))
                    }
                    "maxDataAgeHours" => sla
                        .max_data_age_hours
                        .map(|h| plain("maxDataAgeHours", json!(h), h.to_string(), &own)),
                    "complianceTag" => sla
                        .compliance_tag
                        .as_ref()
                        .map(|t| plain("complianceTag", json!(t), t.clone(), &own)),
                    _ => None,
                }
            }
            ["events", f] => {
                let events = self.events.as_ref()?;
                match *f {
                    "maxLen" => events
                        .max_len
                        .map(|n| plain("maxLen", json!(n), n.to_string(), &own)),
                    "maxAge" => events.max_age.map(|m| {
                        let sourced = Sourced {
                            value: m,
                            source: own.clone(),
                        };
                        duration("maxAge", "maxAgeMs", &sourced)
                    }),
                    _ => None,
                }
            }
            [group @ ("stalled" | "deadLetter"), f] => self.lifecycle_field(group, f, &own),
            ["pii", "replacement"] => {
                let r = &self.pii.as_ref()?.replacement;
                Some(plain("replacement", json!(r), r.clone(), &own))
            }
            [s, f] => of_rule(self.states.get(&JobState::from_name(s)?), f),
            ["schedule"] => Some(self.schedule_field()),
            ["mode"] => {
                let m = self.mode.as_str();
                Some(plain("mode", json!(m), m.into(), &own))
            }
            [f @ ("protectWaitingParents" | "childrenInOtherQueues")] => {
                let flow = self.flows.fields().into_iter().find(|x| x.name == *f)?;
                let from = if flow.written {
                    own
                } else {
                    Provenance::Default
                };
                Some(plain(flow.name, flow.json, flow.shown, &from))
            }
            ["moveExhaustedTo"] => self
                .move_exhausted_to
                .as_ref()
                .map(|q| plain("moveExhaustedTo", json!(q), q.clone(), &own)),
            ["dependsOn"] => {
                let d = self.depends_on.join(", ");
                Some(plain("dependsOn", json!(self.depends_on), d, &own))
            }
            _ => None,
        }
    }

    /// `schedule`, from the layer that set it: an interval is a duration (`every 1h`, compared
    /// by its length), a cron expression or `auto` is text.
    fn schedule_field(&self) -> RuleField {
        let s = &self.schedule;
        let shown = s.value.to_string();
        let millis = match s.value {
            Schedule::Every(every) => Some(every),
            Schedule::Cron(_) | Schedule::Auto => None,
        };
        RuleField {
            name: "schedule",
            key: "schedule",
            json: json!(shown),
            shown,
            millis,
            from: s.source.clone(),
        }
    }

    /// A field of `stalled` or `deadLetter`.
    fn lifecycle_field(&self, group: &str, f: &str, own: &Provenance) -> Option<RuleField> {
        match (group, f) {
            ("stalled", f) => {
                let stalled = self.stalled.as_ref()?;
                match f {
                    "maxAge" => Some(duration(
                        "maxAge",
                        "maxAgeMs",
                        &Sourced {
                            value: stalled.max_age,
                            source: own.clone(),
                        },
                    )),
                    "action" => {
                        let a = stalled.action.as_str();
                        Some(plain("action", json!(a), a.into(), own))
                    }
                    _ => None,
                }
            }
            ("deadLetter", f) => {
                let d = self.dead_letter.as_ref()?;
                let (name, key, value) = match f {
                    "warm" => ("warm", "warmMs", d.warm),
                    "cold" => ("cold", "coldMs", d.cold),
                    "purgeAfter" => ("purgeAfter", "purgeAfterMs", d.purge_after),
                    _ => return None,
                };
                let sourced = Sourced {
                    value,
                    source: own.clone(),
                };
                Some(duration(name, key, &sourced))
            }
            _ => None,
        }
    }

    /// Every field that is set, by its name (see [`FIELD_NAMES`]): what `plan --against`
    /// compares between two versions of a policy file.
    pub fn set_fields(&self) -> BTreeMap<String, RuleField> {
        const LINK: [&str; 5] = ["source", "key", "deleteWhen", "keepFor", "action"];
        let mut names: Vec<String> = Vec::new();
        let rules = |prefix: &str, states: &BTreeMap<JobState, EffectiveRule>| {
            states
                .keys()
                .flat_map(|s| RULE_FIELDS.map(|f| format!("{prefix}{}.{f}", s.as_str())))
                .collect::<Vec<_>>()
        };
        names.extend(rules("", &self.states));
        if self.source.is_some() {
            names.extend(LINK.map(|f| format!("source.{f}")));
        }
        for j in &self.jobs {
            names.extend(rules(&format!("jobs.{}.", j.name), &j.states));
            if j.source.is_some() {
                names.extend(LINK.map(|f| format!("jobs.{}.source.{f}", j.name)));
            }
        }
        names.extend(
            [
                "sla.auditRequired",
                "sla.maxDataAgeHours",
                "sla.complianceTag",
                "events.maxLen",
                "events.maxAge",
                "stalled.maxAge",
                "stalled.action",
                "deadLetter.warm",
                "deadLetter.cold",
                "deadLetter.purgeAfter",
                "pii.replacement",
                "schedule",
                "mode",
                "protectWaitingParents",
                "childrenInOtherQueues",
                "moveExhaustedTo",
                "dependsOn",
            ]
            .map(String::from),
        );
        names
            .into_iter()
            .filter_map(|n| self.field(&n).map(|f| (n, f)))
            // An empty `dependsOn` is no field set.
            .filter(|(_, f)| !f.shown.is_empty())
            .collect()
    }

    /// The source link covering jobs named `name`: their job rule's, else the policy's.
    pub fn link_of(&self, name: &str) -> Option<&Sourced<SourceLink>> {
        match self.jobs.iter().find(|j| j.name == name) {
            Some(j) => j.source.as_ref(),
            None => self.source.as_ref(),
        }
    }
}
