//! The file's settings and its lists: environment aliases, layouts, the file's schedule and
//! cost model, `policies:` (each one's rules, job rules, scrubbing, subjects and daemon
//! settings) and `tenants:` overrides.

use super::{Checker, DEFAULT_LAYOUT, pos};
use crate::backend::Backend;
use crate::cost::{CostModel, PRESETS, preset};
use crate::flows::{ChildrenInOtherQueues, FlowSettings, FlowsWritten};
use crate::layout::Layout;
use crate::model::{DaemonSettings, JobRule, Policy, RunMode, Sla, TenantOverride};
use crate::pii::PiiRules;
use crate::position::SourcePos;
use crate::raw::{RawPolicy, RawPolicyFile};
use crate::schedule::Schedule;
use crate::source::PartialSourceLink;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

impl Checker {
    /// `environments:`: alias → canonical name; an alias may stand for one name only.
    pub(super) fn aliases(&mut self, raw: &RawPolicyFile) -> BTreeMap<String, String> {
        let mut aliases: BTreeMap<String, String> = BTreeMap::new();
        for (canonical, names) in &raw.environments {
            for alias in &names.value {
                if let Some(prev) = aliases.insert(alias.value.clone(), canonical.clone())
                    && prev != *canonical
                {
                    self.error(
                        &alias.referenced,
                        format!("environments.{canonical}"),
                        format!("alias `{}` already stands for `{prev}`", alias.value),
                    );
                }
            }
        }
        aliases
    }

    /// `discovery.layouts`, or the default layout.
    pub(super) fn layouts(&mut self, raw: &RawPolicyFile) -> Vec<Layout> {
        let raw_layouts = raw
            .discovery
            .as_ref()
            .map(|d| d.layouts.as_slice())
            .unwrap_or(&[]);
        let mut layouts = Vec::new();
        for (i, l) in raw_layouts.iter().enumerate() {
            match Layout::new(&l.value) {
                Ok(layout) => layouts.push(layout),
                Err(m) => self.error(&l.referenced, format!("discovery.layouts[{i}]"), m),
            }
        }
        if raw_layouts.is_empty()
            && let Ok(default) = Layout::new(DEFAULT_LAYOUT)
        {
            layouts.push(default);
        }
        layouts
    }

    /// The file's `schedule:` in its `timezone:`; `None` when it writes none (or a wrong one,
    /// reported).
    pub(super) fn file_schedule(&mut self, raw: &RawPolicyFile) -> Option<Schedule> {
        if let Some(tz) = &raw.timezone
            && let Err(m) = crate::schedule::check_timezone(&tz.value)
        {
            self.error(&tz.referenced, "timezone", m);
        }
        let timezone = raw.timezone.as_ref().map(|t| t.value.as_str());
        match &raw.schedule {
            Some(s) => self.schedule(s, timezone, "schedule"),
            None => None,
        }
    }

    /// `cost:`: a price (`perGbMonth`, or a `preset`, not both), `replicas` and `maxLeak`;
    /// each number must be positive, `replicas` a whole number from 0 to 16.
    pub(super) fn cost(&mut self, raw: &RawPolicyFile) -> CostModel {
        let mut cost = CostModel::default();
        let Some(raw_cost) = &raw.cost else {
            return cost;
        };
        if let Some(name) = &raw_cost.preset {
            match preset(&name.value) {
                Some(p) => {
                    cost.per_gb_month = p.per_gb_month;
                    cost.preset = Some(p);
                }
                None => {
                    let known: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
                    self.error_hint(
                        &name.referenced,
                        "cost.preset",
                        format!("unknown cost preset `{}`", name.value),
                        format!(
                            "the presets are {}; or give your own price as cost.perGbMonth",
                            known.join(", ")
                        ),
                    );
                }
            }
            if let Some(v) = &raw_cost.per_gb_month {
                self.error(
                    &v.referenced,
                    "cost.perGbMonth",
                    "cost.perGbMonth and cost.preset both set the price; keep one",
                );
            }
        }
        for (field, name, slot) in [
            (&raw_cost.per_gb_month, "perGbMonth", &mut cost.per_gb_month),
            (&raw_cost.max_leak, "maxLeak", &mut cost.max_leak),
        ] {
            if let Some(v) = field {
                if v.value > 0.0 && v.value.is_finite() {
                    *slot = v.value;
                } else {
                    self.error(
                        &v.referenced,
                        format!("cost.{name}"),
                        format!("cost.{name} must be a positive number, got {}", v.value),
                    );
                }
            }
        }
        if let Some(v) = &raw_cost.replicas {
            if v.value >= 0.0 && v.value <= 16.0 && v.value.fract() == 0.0 {
                cost.replicas = v.value as u32;
            } else {
                self.error(
                    &v.referenced,
                    "cost.replicas",
                    format!(
                        "cost.replicas must be a whole number from 0 to 16, got {}",
                        v.value
                    ),
                );
            }
        }
        cost
    }

    /// `policies:` as written (taken out of `raw`); names must be unique. Each written policy
    /// is dropped as soon as it is compiled, so that the file's policies are not held twice.
    pub(super) fn policies(
        &mut self,
        written: Vec<Spanned<Box<RawPolicy>>>,
        raw: &RawPolicyFile,
        aliases: &BTreeMap<String, String>,
        global_pii: Option<&Arc<PiiRules>>,
    ) -> Vec<Policy> {
        let mut names: HashMap<String, SourcePos> = HashMap::new();
        let mut out = Vec::with_capacity(written.len());
        for (i, p) in written.into_iter().enumerate() {
            let path = format!("policies[{i}]");
            let name = self.policy_name(&p, &path, &mut names);
            if let Some(policy) = self.policy(raw, &p, &path, name, aliases, global_pii) {
                out.push(policy);
            }
        }
        out
    }

    /// A policy's `name`, checked for presence and uniqueness.
    fn policy_name(
        &mut self,
        p: &Spanned<Box<RawPolicy>>,
        path: &str,
        names: &mut HashMap<String, SourcePos>,
    ) -> Option<String> {
        match &p.value.name {
            Some(n) if !n.value.trim().is_empty() => {
                if let Some(first) = names.get(&n.value) {
                    self.error(
                        &n.referenced,
                        format!("{path}.name"),
                        format!(
                            "duplicate policy name `{}` (first defined at line {})",
                            n.value, first.line
                        ),
                    );
                } else {
                    names.insert(n.value.clone(), pos(&n.referenced));
                }
                Some(n.value.clone())
            }
            Some(n) => {
                self.error(
                    &n.referenced,
                    format!("{path}.name"),
                    "policy name is empty",
                );
                None
            }
            None => {
                self.error(&p.referenced, path, "policy is missing `name`");
                None
            }
        }
    }

    /// One policy: what it matches, its rules and job rules, scrubbing, subjects and daemon
    /// settings. `None` when it cannot be built (its problems are recorded).
    fn policy(
        &mut self,
        raw: &RawPolicyFile,
        p: &Spanned<Box<RawPolicy>>,
        path: &str,
        name: Option<String>,
        aliases: &BTreeMap<String, String>,
        global_pii: Option<&Arc<PiiRules>>,
    ) -> Option<Policy> {
        let rp = &p.value;
        let environment = self.env(
            rp.environment.as_deref(),
            aliases,
            &format!("{path}.environment"),
        );
        let queue = match &rp.queue_name_pattern {
            Some(q) => self.pattern(q, &format!("{path}.queueNamePattern")),
            None => {
                self.error_hint(
                    &p.referenced,
                    path,
                    "policy is missing `queueNamePattern`",
                    "use `queueNamePattern: \"*\"` for a catch-all policy",
                );
                None
            }
        };
        let tenant = rp
            .tenant
            .as_ref()
            .and_then(|t| self.pattern(t, &format!("{path}.tenant")));
        let tenant_failed = rp.tenant.is_some() && tenant.is_none();
        let backend = rp.backend.as_ref().and_then(|b| self.backend(b, path));
        let rules = self.state_rules(rp.rules.states(), &format!("{path}.rules"));
        let source = self.source_link(
            raw,
            rp.source.as_deref(),
            rp.delete_when.as_deref(),
            rp.keep_for.as_deref(),
            &PartialSourceLink::default(),
            path,
        );
        let jobs = self.job_rules(raw, rp, &source, path);
        let pii = match &rp.pii {
            Some(own) => Some(Arc::new(self.pii(
                own,
                global_pii.map(|g| &**g),
                &format!("{path}.pii"),
            ))),
            // Shared, not copied: every policy without its own `pii` holds the file's.
            None => global_pii.cloned(),
        };
        let subjects = self.subjects(&rp.subjects, &format!("{path}.subjects"));
        let daemon = self.daemon_settings(raw, rp, path);
        let flows = self.flows(rp, path);
        let events = rp
            .events
            .as_ref()
            .and_then(|e| self.events(e, &format!("{path}.events")));
        let sla = rp.sla.as_ref().map(|s| Sla {
            max_data_age_hours: s.max_data_age_hours,
            compliance_tag: s.compliance_tag.clone(),
            audit_required: s.audit_required,
        });
        let (name, queue) = (name?, queue?);
        let backend_failed = rp.backend.is_some() && backend.is_none();
        (!tenant_failed && !backend_failed).then(|| Policy {
            name,
            environment,
            queue,
            tenant,
            backend,
            rules,
            jobs,
            source,
            sla,
            pii,
            subjects,
            daemon,
            flows,
            events,
            pos: pos(&p.referenced),
        })
    }

    /// A policy's flow settings: `protectWaitingParents`, and `childrenInOtherQueues`, a
    /// closed list of names.
    fn flows(&mut self, rp: &RawPolicy, path: &str) -> FlowSettings {
        let children_in_other_queues = match &rp.children_in_other_queues {
            None => ChildrenInOtherQueues::default(),
            Some(c) => ChildrenInOtherQueues::from_name(&c.value).unwrap_or_else(|| {
                let names: Vec<&str> = ChildrenInOtherQueues::ALL.map(|c| c.as_str()).to_vec();
                self.error_hint(
                    &c.referenced,
                    format!("{path}.childrenInOtherQueues"),
                    format!("unknown value `{}`", c.value),
                    format!("expected one of {}", names.join(", ")),
                );
                ChildrenInOtherQueues::default()
            }),
        };
        FlowSettings {
            protect_waiting_parents: rp.protect_waiting_parents.unwrap_or_default(),
            children_in_other_queues,
            written: FlowsWritten {
                protect_waiting_parents: rp.protect_waiting_parents.is_some(),
                children_in_other_queues: rp.children_in_other_queues.is_some(),
            },
        }
    }

    /// A policy's `backend:`, a closed list of names.
    fn backend(&mut self, b: &Spanned<String>, path: &str) -> Option<Backend> {
        let found = Backend::parse(&b.value);
        if found.is_none() {
            let names: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
            self.error_hint(
                &b.referenced,
                format!("{path}.backend"),
                format!("unknown backend `{}`", b.value),
                format!("expected one of {}", names.join(", ")),
            );
        }
        found
    }

    /// A policy's `jobs:`; names must be unique within it.
    fn job_rules(
        &mut self,
        raw: &RawPolicyFile,
        rp: &RawPolicy,
        policy_link: &PartialSourceLink,
        path: &str,
    ) -> Vec<JobRule> {
        let mut jobs = Vec::new();
        let mut seen: HashMap<String, ()> = HashMap::new();
        for (j, job) in rp.jobs.iter().enumerate() {
            let jpath = format!("{path}.jobs[{j}]");
            let jv = &job.value;
            let rules = self.state_rules(jv.states(), &jpath);
            let source = self.source_link(
                raw,
                jv.source.as_deref(),
                jv.delete_when.as_deref(),
                jv.keep_for.as_deref(),
                policy_link,
                &jpath,
            );
            match &job.value.name {
                Some(n) if !n.value.is_empty() => {
                    if seen.insert(n.value.clone(), ()).is_some() {
                        self.error(
                            &n.referenced,
                            format!("{jpath}.name"),
                            format!("duplicate job rule `{}` in this policy", n.value),
                        );
                    }
                    jobs.push(JobRule {
                        name: n.value.clone(),
                        rules,
                        source,
                    });
                }
                _ => self.error(&job.referenced, &jpath, "job rule is missing `name`"),
            }
        }
        jobs
    }

    /// What the daemon reads of a policy: schedule (in its time zone), mode, stalled jobs,
    /// dependencies, dead-letter phases and where exhausted jobs move.
    fn daemon_settings(
        &mut self,
        raw: &RawPolicyFile,
        rp: &RawPolicy,
        path: &str,
    ) -> DaemonSettings {
        if let Some(tz) = &rp.timezone
            && let Err(m) = crate::schedule::check_timezone(&tz.value)
        {
            self.error(&tz.referenced, format!("{path}.timezone"), m);
        }
        let timezone = rp
            .timezone
            .as_deref()
            .or(raw.timezone.as_ref())
            .map(|t| t.value.as_str());
        let schedule = match (rp.schedule.as_deref(), &raw.schedule, &rp.timezone) {
            (Some(own), _, _) => self.schedule(own, timezone, &format!("{path}.schedule")),
            // The file's schedule read in the policy's own time zone.
            (None, Some(file), Some(_)) => {
                self.schedule(file, timezone, &format!("{path}.timezone"))
            }
            _ => None,
        };
        let mode = match &rp.mode {
            None => RunMode::Schedule,
            Some(m) => match RunMode::ALL.into_iter().find(|r| r.as_str() == m.value) {
                Some(mode) => mode,
                None => {
                    let names: Vec<&str> = RunMode::ALL.iter().map(|r| r.as_str()).collect();
                    self.error_hint(
                        &m.referenced,
                        format!("{path}.mode"),
                        format!("unknown mode `{}`", m.value),
                        format!("expected one of {}", names.join(", ")),
                    );
                    RunMode::Schedule
                }
            },
        };
        let stalled = rp
            .rules
            .stalled
            .as_ref()
            .and_then(|st| self.stalled(st, &format!("{path}.rules.stalled")));
        let dead_letter = rp
            .dead_letter
            .as_ref()
            .and_then(|d| self.dead_letter(d, &format!("{path}.deadLetter")));
        let mut depends_on = Vec::new();
        for (j, d) in rp.depends_on.iter().enumerate() {
            if d.value.trim().is_empty() {
                self.error(
                    &d.referenced,
                    format!("{path}.dependsOn[{j}]"),
                    "queue name is empty",
                );
            } else {
                depends_on.push(d.value.clone());
            }
        }
        let move_exhausted_to = rp.move_exhausted_to.as_ref().and_then(|m| {
            if m.value.trim().is_empty() || m.value.contains(':') {
                self.error_hint(
                    &m.referenced,
                    format!("{path}.moveExhaustedTo"),
                    format!("`{}` is not a queue name", m.value),
                    "name a queue of the same prefix, e.g. `moveExhaustedTo: billing-dlq`",
                );
                None
            } else {
                Some(m.value.clone())
            }
        });
        DaemonSettings {
            schedule,
            mode,
            stalled,
            depends_on,
            dead_letter,
            move_exhausted_to,
        }
    }

    /// `tenants:` overrides; one per tenant and environment.
    pub(super) fn tenants(
        &mut self,
        raw: &RawPolicyFile,
        aliases: &BTreeMap<String, String>,
    ) -> Vec<TenantOverride> {
        let mut tenants = Vec::new();
        let mut seen: HashMap<(String, Option<String>), SourcePos> = HashMap::new();
        for (i, t) in raw.tenants.iter().enumerate() {
            let path = format!("tenants[{i}]");
            let environment = self.env(
                t.value.environment.as_ref(),
                aliases,
                &format!("{path}.environment"),
            );
            let o = &t.value.overrides;
            let overrides = self.state_rules(o.states(), &format!("{path}.overrides"));
            if let Some(st) = &o.stalled {
                self.error_hint(
                    &st.referenced,
                    format!("{path}.overrides.stalled"),
                    "a tenant override cannot set `stalled`",
                    "set `rules.stalled` in the policy instead",
                );
            }
            match &t.value.tenant_id {
                Some(id) if !id.value.is_empty() => {
                    let key = (id.value.clone(), environment.clone());
                    if let Some(first) = seen.get(&key) {
                        self.error(
                            &id.referenced,
                            format!("{path}.tenantId"),
                            format!(
                                "tenant `{}` already has overrides for this environment (line {})",
                                id.value, first.line
                            ),
                        );
                    } else {
                        seen.insert(key, pos(&id.referenced));
                    }
                    tenants.push(TenantOverride {
                        tenant_id: id.value.clone(),
                        environment,
                        overrides,
                    });
                }
                _ => self.error(
                    &t.referenced,
                    &path,
                    "tenant override is missing `tenantId`",
                ),
            }
        }
        tenants
    }
}
