//! Parsing and validation: policy text in, a [`PolicySet`] or every problem found out.

use crate::duration::{BareUnit, Millis, from_bare_number, parse_duration_str};
use crate::jsonpath::JsonPath;
use crate::layout::Layout;
use crate::model::{
    Action, ArchiveTarget, AuditTarget, DEFAULT_AUDIT_FILE, DeadLetter, JobRule, JobState, KeepIf,
    NotifyTargets, Policy, PolicySet, RunMode, Sla, SourcePos, StalledAction, StalledRule,
    StateRule, StateRules, TenantOverride, Webhook,
};
use crate::pattern::NamePattern;
use crate::pii::{DEFAULT_REPLACEMENT, PiiRules, TextPattern};
use crate::raw::{
    RawDeadLetter, RawDuration, RawPii, RawPolicyFile, RawStalled, RawStateRule, RawSubject,
};
use crate::schedule::{CostModel, DEFAULT_SCHEDULE, Schedule};
use crate::subject::Subject;
use serde_saphyr::{Location, Spanned};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The layout used when the file names none.
pub const DEFAULT_LAYOUT: &str = "bull:{queue}";

/// One problem in a policy file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the problem is.
    pub pos: SourcePos,
    /// The key path, such as `policies[0].rules.completed.maxAge`.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// A suggestion, when one is known.
    pub hint: Option<String>,
}

/// Every problem found in one policy file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The file name used in messages.
    pub file: String,
    /// The problems, in file order.
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{}: {}", self.file, e.pos, e.message)?;
            if !e.path.is_empty() {
                write!(f, " (at `{}`)", e.path)?;
            }
            if let Some(hint) = &e.hint {
                write!(f, "\n  hint: {hint}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

fn pos(loc: &Location) -> SourcePos {
    SourcePos {
        line: loc.line(),
        column: loc.column(),
    }
}

/// Collects errors while walking the raw file.
struct Checker {
    errors: Vec<ConfigError>,
}

impl Checker {
    fn error(&mut self, loc: &Location, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigError {
            pos: pos(loc),
            path: path.into(),
            message: message.into(),
            hint: None,
        });
    }

    fn error_hint(
        &mut self,
        loc: &Location,
        path: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.errors.push(ConfigError {
            pos: pos(loc),
            path: path.into(),
            message: message.into(),
            hint: Some(hint.into()),
        });
    }

    fn duration(&mut self, d: &Spanned<RawDuration>, unit: BareUnit, path: &str) -> Option<Millis> {
        let result = match &d.value {
            RawDuration::Number(n) => from_bare_number(*n, unit),
            RawDuration::Text(t) => parse_duration_str(t),
        };
        result.map_err(|m| self.error(&d.referenced, path, m)).ok()
    }

    fn state_rule(
        &mut self,
        state: JobState,
        raw: &Spanned<RawStateRule>,
        path: &str,
    ) -> StateRule {
        let r = &raw.value;
        let max_age = r
            .max_age
            .as_ref()
            .and_then(|d| self.duration(d, BareUnit::Seconds, &format!("{path}.maxAge")));
        let keep_for = r
            .keep_for
            .as_ref()
            .and_then(|d| self.duration(d, BareUnit::Milliseconds, &format!("{path}.keepFor")));
        let max_count = r.max_count.as_ref().and_then(|c| {
            u64::try_from(c.value)
                .map_err(|_| {
                    self.error(
                        &c.referenced,
                        format!("{path}.maxCount"),
                        format!("maxCount must be zero or more, got {}", c.value),
                    )
                })
                .ok()
        });
        let action = r.action.as_ref().and_then(|a| {
            let allowed = state.allowed_actions();
            match Action::from_name(&a.value) {
                Some(action) if allowed.contains(&action) => Some(action),
                found => {
                    let names: Vec<&str> = allowed.iter().map(|a| a.as_str()).collect();
                    let what = if found.is_some() {
                        format!("action `{}` is not valid for {state} jobs", a.value)
                    } else {
                        format!("unknown action `{}`", a.value)
                    };
                    let hint = match suggest(&a.value, &names) {
                        Some(s) => {
                            format!("did you mean `{s}`? expected one of {}", names.join(", "))
                        }
                        None => format!("expected one of {}", names.join(", ")),
                    };
                    self.error_hint(&a.referenced, format!("{path}.action"), what, hint);
                    None
                }
            }
        });
        let keep_if = r.keep_if.as_ref().and_then(|k| {
            JsonPath::new(&k.value.path.value)
                .map_err(|m| self.error(&k.value.path.referenced, format!("{path}.keepIf.path"), m))
                .ok()
                .map(|p| KeepIf {
                    path: p,
                    equals: k.value.equals.clone(),
                })
        });
        StateRule {
            max_age,
            max_count,
            keep_for,
            action,
            keep_if,
        }
    }

    /// `schedule:` as written (a number is milliseconds), read in `timezone` if it is cron.
    fn schedule(
        &mut self,
        raw: &Spanned<RawDuration>,
        timezone: Option<&str>,
        path: &str,
    ) -> Option<Schedule> {
        let parsed = match &raw.value {
            RawDuration::Number(n) => {
                from_bare_number(*n, BareUnit::Milliseconds).map(Schedule::Every)
            }
            RawDuration::Text(t) => Schedule::parse(t, timezone),
        };
        parsed
            .map_err(|m| self.error(&raw.referenced, path, m))
            .ok()
    }

    /// `rules.stalled`: both fields are required.
    fn stalled(&mut self, raw: &Spanned<RawStalled>, path: &str) -> Option<StalledRule> {
        let max_age = match &raw.value.max_age {
            Some(d) => self.duration(d, BareUnit::Seconds, &format!("{path}.maxAge")),
            None => {
                self.error_hint(
                    &raw.referenced,
                    path,
                    "stalled rule is missing `maxAge`",
                    "e.g. `stalled: { maxAge: 1h, action: retry }`",
                );
                None
            }
        };
        let action = match &raw.value.action {
            Some(a) => match a.value.as_str() {
                "remove" => Some(StalledAction::Remove),
                "retry" => Some(StalledAction::Retry),
                other => {
                    let hint = match suggest(other, &["remove", "retry"]) {
                        Some(s) => format!("did you mean `{s}`? expected remove or retry"),
                        None => "expected remove or retry".to_string(),
                    };
                    self.error_hint(
                        &a.referenced,
                        format!("{path}.action"),
                        format!("unknown stalled action `{other}`"),
                        hint,
                    );
                    None
                }
            },
            None => {
                self.error_hint(
                    &raw.referenced,
                    path,
                    "stalled rule is missing `action`",
                    "expected remove or retry",
                );
                None
            }
        };
        Some(StalledRule {
            max_age: max_age?,
            action: action?,
        })
    }

    /// `deadLetter:`: three ages since the job finished, each later than the one before.
    fn dead_letter(&mut self, raw: &Spanned<RawDeadLetter>, path: &str) -> Option<DeadLetter> {
        let r = &raw.value;
        let mut age = |field: &Option<Spanned<RawDuration>>, name: &str| match field {
            Some(d) => self.duration(d, BareUnit::Seconds, &format!("{path}.{name}")),
            None => {
                self.error_hint(
                    &raw.referenced,
                    path,
                    format!("deadLetter is missing `{name}`"),
                    "e.g. `deadLetter: { warm: 2h, cold: 30d, purgeAfter: 90d }`",
                );
                None
            }
        };
        let warm = age(&r.warm, "warm");
        let cold = age(&r.cold, "cold");
        let purge_after = age(&r.purge_after, "purgeAfter");
        let (warm, cold, purge_after) = (warm?, cold?, purge_after?);
        if warm >= cold || cold > purge_after {
            self.error_hint(
                &raw.referenced,
                path,
                format!(
                    "deadLetter phases must follow each other: warm ({warm}) < cold ({cold}) <= purgeAfter ({purge_after})"
                ),
                "each is an age since the job finished",
            );
            return None;
        }
        Some(DeadLetter {
            warm,
            cold,
            purge_after,
        })
    }

    fn state_rules(
        &mut self,
        completed: &Option<Spanned<RawStateRule>>,
        failed: &Option<Spanned<RawStateRule>>,
        path: &str,
    ) -> StateRules {
        let mut out = BTreeMap::new();
        for (state, rule) in [(JobState::Completed, completed), (JobState::Failed, failed)] {
            if let Some(rule) = rule {
                let rule = self.state_rule(state, rule, &format!("{path}.{state}"));
                out.insert(state, rule);
            }
        }
        out
    }

    fn env(
        &mut self,
        raw: &Option<Spanned<String>>,
        aliases: &BTreeMap<String, String>,
        path: &str,
    ) -> Option<String> {
        let e = raw.as_ref()?;
        if e.value.trim().is_empty() {
            self.error(&e.referenced, path, "environment is empty");
            return None;
        }
        Some(
            aliases
                .get(&e.value)
                .cloned()
                .unwrap_or_else(|| e.value.clone()),
        )
    }

    /// One `pii:` layer laid over `base` field by field.
    fn pii(&mut self, raw: &Spanned<RawPii>, base: Option<&PiiRules>, path: &str) -> PiiRules {
        let r = &raw.value;
        let errors_before = self.errors.len();
        let paths = match &r.paths {
            Some(list) => list
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    JsonPath::new(&p.value)
                        .map_err(|m| self.error(&p.referenced, format!("{path}.paths[{i}]"), m))
                        .ok()
                })
                .collect(),
            None => base.map(|b| b.paths.clone()).unwrap_or_default(),
        };
        let patterns = match &r.patterns {
            Some(list) => list
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let found = TextPattern::from_name(&p.value);
                    if found.is_none() {
                        let names: Vec<&str> =
                            TextPattern::ALL.iter().map(|t| t.as_str()).collect();
                        let hint = match suggest(&p.value, &names) {
                            Some(s) => {
                                format!("did you mean `{s}`? expected one of {}", names.join(", "))
                            }
                            None => format!("expected one of {}", names.join(", ")),
                        };
                        self.error_hint(
                            &p.referenced,
                            format!("{path}.patterns[{i}]"),
                            format!("unknown pattern `{}`", p.value),
                            hint,
                        );
                    }
                    found
                })
                .collect(),
            None => base.map(|b| b.patterns.clone()).unwrap_or_default(),
        };
        let replacement = match &r.replacement {
            Some(s) => s.value.clone(),
            None => base.map_or_else(
                || DEFAULT_REPLACEMENT.to_string(),
                |b| b.replacement.clone(),
            ),
        };
        if paths.is_empty() && patterns.is_empty() && self.errors.len() == errors_before {
            self.error_hint(
                &raw.referenced,
                path,
                "pii names no paths and no patterns, so it would scrub nothing",
                "e.g. `pii: { paths: [user.email], patterns: [email, credit-card] }`",
            );
        }
        PiiRules {
            paths,
            patterns,
            replacement,
        }
    }

    /// A `subjects:` list; names must be unique within it.
    fn subjects(&mut self, raw: &[Spanned<RawSubject>], path: &str) -> Vec<Subject> {
        let mut out: Vec<Subject> = Vec::new();
        for (i, entry) in raw.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let r = &entry.value;
            let errors_before = self.errors.len();
            let name = match &r.name {
                Some(n) if n.value.trim().is_empty() => {
                    self.error(&n.referenced, format!("{at}.name"), "subject name is empty");
                    None
                }
                Some(n) if out.iter().any(|s| s.name == n.value) => {
                    self.error(
                        &n.referenced,
                        format!("{at}.name"),
                        format!("duplicate subject `{}` in this list", n.value),
                    );
                    None
                }
                Some(n) => Some(n.value.clone()),
                None => {
                    self.error_hint(
                        &entry.referenced,
                        &at,
                        "subject is missing `name`",
                        "e.g. `- { name: user, paths: [user.id] }`",
                    );
                    None
                }
            };
            if r.paths.is_empty() {
                self.error_hint(
                    &entry.referenced,
                    format!("{at}.paths"),
                    "subject names no `paths`, so it would find nothing",
                    "e.g. `paths: [user.id, customerId]`",
                );
            }
            let paths: Vec<JsonPath> = r
                .paths
                .iter()
                .enumerate()
                .filter_map(|(j, p)| {
                    JsonPath::new(&p.value)
                        .map_err(|m| self.error(&p.referenced, format!("{at}.paths[{j}]"), m))
                        .ok()
                })
                .collect();
            let tenant_path = r.tenant_path.as_ref().and_then(|p| {
                JsonPath::new(&p.value)
                    .map_err(|m| self.error(&p.referenced, format!("{at}.tenantPath"), m))
                    .ok()
            });
            if let (Some(name), true) = (name, self.errors.len() == errors_before) {
                out.push(Subject {
                    name,
                    paths,
                    tenant_path,
                    pos: pos(&entry.referenced),
                });
            }
        }
        out
    }

    fn pattern(&mut self, raw: &Spanned<String>, path: &str) -> Option<NamePattern> {
        NamePattern::new(&raw.value)
            .map_err(|m| self.error(&raw.referenced, path, m))
            .ok()
    }
}

/// Parses and validates a policy file. `file` names the source in messages.
/// YAML and JSON are both accepted (JSON is YAML).
pub fn compile(file: &str, text: &str) -> Result<PolicySet, ConfigErrors> {
    let raw: RawPolicyFile = serde_saphyr::from_str(text).map_err(|e| ConfigErrors {
        file: file.to_string(),
        errors: vec![syntax_error(&e)],
    })?;
    let mut c = Checker { errors: Vec::new() };

    if raw.version.value != 1 {
        c.error_hint(
            &raw.version.referenced,
            "version",
            format!("unsupported policy file version {}", raw.version.value),
            "this bullsweep reads `version: 1`",
        );
    }

    // Aliases first: everything else names environments through them.
    let mut aliases: BTreeMap<String, String> = BTreeMap::new();
    for (canonical, names) in &raw.environments {
        for alias in &names.value {
            if let Some(prev) = aliases.insert(alias.value.clone(), canonical.clone())
                && prev != *canonical
            {
                c.error(
                    &alias.referenced,
                    format!("environments.{canonical}"),
                    format!("alias `{}` already stands for `{prev}`", alias.value),
                );
            }
        }
    }
    let environment = c.env(&raw.environment, &aliases, "environment");

    let mut layouts = Vec::new();
    let raw_layouts = raw
        .discovery
        .as_ref()
        .map(|d| d.layouts.as_slice())
        .unwrap_or(&[]);
    for (i, l) in raw_layouts.iter().enumerate() {
        match Layout::new(&l.value) {
            Ok(layout) => layouts.push(layout),
            Err(m) => c.error(&l.referenced, format!("discovery.layouts[{i}]"), m),
        }
    }
    if raw_layouts.is_empty() {
        layouts.push(Layout::new(DEFAULT_LAYOUT).expect("the default layout is valid"));
    }

    let global_pii = raw.pii.as_ref().map(|p| c.pii(p, None, "pii"));
    let file_timezone = raw.timezone.as_ref().map(|t| t.value.as_str());
    if let Some(tz) = &raw.timezone
        && let Err(m) = crate::schedule::check_timezone(&tz.value)
    {
        c.error(&tz.referenced, "timezone", m);
    }
    let schedule = match &raw.schedule {
        Some(s) => c.schedule(s, file_timezone, "schedule"),
        None => Some(Schedule::Every(DEFAULT_SCHEDULE)),
    };
    let mut cost = CostModel::default();
    if let Some(raw_cost) = &raw.cost {
        for (field, name, slot) in [
            (&raw_cost.per_gb_month, "perGbMonth", &mut cost.per_gb_month),
            (&raw_cost.max_leak, "maxLeak", &mut cost.max_leak),
        ] {
            if let Some(v) = field {
                if v.value > 0.0 && v.value.is_finite() {
                    *slot = v.value;
                } else {
                    c.error(
                        &v.referenced,
                        format!("cost.{name}"),
                        format!("cost.{name} must be a positive number, got {}", v.value),
                    );
                }
            }
        }
    }
    let subjects = c.subjects(&raw.subjects, "subjects");
    let mut policies = Vec::new();
    let mut names: HashMap<String, SourcePos> = HashMap::new();
    for (i, p) in raw.policies.iter().enumerate() {
        let path = format!("policies[{i}]");
        let rp = &p.value;
        let name = match &rp.name {
            Some(n) if !n.value.trim().is_empty() => {
                if let Some(first) = names.get(&n.value) {
                    c.error(
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
                c.error(
                    &n.referenced,
                    format!("{path}.name"),
                    "policy name is empty",
                );
                None
            }
            None => {
                c.error(&p.referenced, &path, "policy is missing `name`");
                None
            }
        };
        let environment = c.env(&rp.environment, &aliases, &format!("{path}.environment"));
        let queue = match &rp.queue_name_pattern {
            Some(q) => c.pattern(q, &format!("{path}.queueNamePattern")),
            None => {
                c.error_hint(
                    &p.referenced,
                    &path,
                    "policy is missing `queueNamePattern`",
                    "use `queueNamePattern: \"*\"` for a catch-all policy",
                );
                None
            }
        };
        let tenant = rp
            .tenant
            .as_ref()
            .and_then(|t| c.pattern(t, &format!("{path}.tenant")));
        let tenant_failed = rp.tenant.is_some() && tenant.is_none();
        let rules = c.state_rules(
            &rp.rules.completed,
            &rp.rules.failed,
            &format!("{path}.rules"),
        );
        let mut jobs = Vec::new();
        let mut job_names: HashMap<String, ()> = HashMap::new();
        for (j, job) in rp.jobs.iter().enumerate() {
            let jpath = format!("{path}.jobs[{j}]");
            let rules = c.state_rules(&job.value.completed, &job.value.failed, &jpath);
            match &job.value.name {
                Some(n) if !n.value.is_empty() => {
                    if job_names.insert(n.value.clone(), ()).is_some() {
                        c.error(
                            &n.referenced,
                            format!("{jpath}.name"),
                            format!("duplicate job rule `{}` in this policy", n.value),
                        );
                    }
                    jobs.push(JobRule {
                        name: n.value.clone(),
                        rules,
                    });
                }
                _ => c.error(&job.referenced, &jpath, "job rule is missing `name`"),
            }
        }
        let pii = match &rp.pii {
            Some(own) => Some(c.pii(own, global_pii.as_ref(), &format!("{path}.pii"))),
            None => global_pii.clone(),
        };
        let uses = |a: Action| {
            rules
                .values()
                .chain(jobs.iter().flat_map(|j| j.rules.values()))
                .any(|r| r.action == Some(a))
        };
        if uses(Action::Anonymize) && pii.is_none() {
            c.error_hint(
                &p.referenced,
                &path,
                "policy uses `action: anonymize` but no `pii:` rules apply to it",
                "add `pii: { paths: [...], patterns: [email, credit-card] }` to the policy or the file",
            );
        }
        let policy_subjects = c.subjects(&rp.subjects, &format!("{path}.subjects"));
        if let Some(tz) = &rp.timezone
            && let Err(m) = crate::schedule::check_timezone(&tz.value)
        {
            c.error(&tz.referenced, format!("{path}.timezone"), m);
        }
        let timezone = rp
            .timezone
            .as_ref()
            .map(|t| t.value.as_str())
            .or(file_timezone);
        let policy_schedule = match (&rp.schedule, &raw.schedule, &rp.timezone) {
            (Some(own), _, _) => c.schedule(own, timezone, &format!("{path}.schedule")),
            // The file's schedule read in the policy's own time zone.
            (None, Some(file), Some(_)) => c.schedule(file, timezone, &format!("{path}.timezone")),
            _ => None,
        };
        let mode = match &rp.mode {
            None => RunMode::Schedule,
            Some(m) => match RunMode::ALL.into_iter().find(|r| r.as_str() == m.value) {
                Some(mode) => mode,
                None => {
                    let names: Vec<&str> = RunMode::ALL.iter().map(|r| r.as_str()).collect();
                    c.error_hint(
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
            .and_then(|st| c.stalled(st, &format!("{path}.rules.stalled")));
        let dead_letter = rp
            .dead_letter
            .as_ref()
            .and_then(|d| c.dead_letter(d, &format!("{path}.deadLetter")));
        let mut depends_on = Vec::new();
        for (j, d) in rp.depends_on.iter().enumerate() {
            if d.value.trim().is_empty() {
                c.error(
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
                c.error_hint(
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
        let sla = rp.sla.as_ref().map(|s| Sla {
            max_data_age_hours: s.max_data_age_hours,
            compliance_tag: s.compliance_tag.clone(),
            audit_required: s.audit_required,
        });
        if let (Some(name), Some(queue), false) = (name, queue, tenant_failed) {
            policies.push(Policy {
                name,
                environment,
                queue,
                tenant,
                rules,
                jobs,
                sla,
                pii,
                subjects: policy_subjects,
                schedule: policy_schedule,
                mode,
                stalled,
                depends_on,
                dead_letter,
                move_exhausted_to,
                pos: pos(&p.referenced),
            });
        }
    }

    let mut tenants = Vec::new();
    let mut seen_tenants: HashMap<(String, Option<String>), SourcePos> = HashMap::new();
    for (i, t) in raw.tenants.iter().enumerate() {
        let path = format!("tenants[{i}]");
        let environment = c.env(
            &t.value.environment,
            &aliases,
            &format!("{path}.environment"),
        );
        let o = &t.value.overrides;
        let overrides = c.state_rules(&o.completed, &o.failed, &format!("{path}.overrides"));
        if let Some(st) = &o.stalled {
            c.error_hint(
                &st.referenced,
                format!("{path}.overrides.stalled"),
                "a tenant override cannot set `stalled`",
                "set `rules.stalled` in the policy instead",
            );
        }
        match &t.value.tenant_id {
            Some(id) if !id.value.is_empty() => {
                let key = (id.value.clone(), environment.clone());
                if let Some(first) = seen_tenants.get(&key) {
                    c.error(
                        &id.referenced,
                        format!("{path}.tenantId"),
                        format!(
                            "tenant `{}` already has overrides for this environment (line {})",
                            id.value, first.line
                        ),
                    );
                } else {
                    seen_tenants.insert(key, pos(&id.referenced));
                }
                tenants.push(TenantOverride {
                    tenant_id: id.value.clone(),
                    environment,
                    overrides,
                });
            }
            _ => c.error(
                &t.referenced,
                &path,
                "tenant override is missing `tenantId`",
            ),
        }
    }

    check_ties(&mut c, &policies);
    check_dependency_cycles(&mut c, &policies);
    let audit = match &raw.audit {
        None => Some(AuditTarget::File(DEFAULT_AUDIT_FILE.into())),
        Some(a) => match audit_target(&a.url.value) {
            Ok(t) => Some(t),
            Err((message, hint)) => {
                c.error_hint(&a.url.referenced, "audit.url", message, hint);
                None
            }
        },
    };

    let archive = raw.archive.as_ref().and_then(|a| {
        if let Some(comp) = &a.compression
            && comp.value != "zstd"
        {
            c.error_hint(
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
                    c.error_hint(
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
                c.error_hint(
                    &a.url.referenced,
                    "archive.url",
                    format!("unsupported archive url `{url}`"),
                    "expected file:///path/to/archive or s3://bucket/prefix",
                );
                None
            }
        }
    });
    let wants_archive = policies.iter().any(|p| {
        p.rules
            .values()
            .chain(p.jobs.iter().flat_map(|j| j.rules.values()))
            .any(|r| r.action == Some(Action::Archive))
    }) || tenants_want(&raw, Action::Archive);
    if wants_archive && raw.archive.is_none() {
        c.errors.push(ConfigError {
            pos: SourcePos { line: 1, column: 1 },
            path: "archive".into(),
            message: "a policy uses `action: archive` but the file has no `archive:` sink".into(),
            hint: Some("add `archive: { url: file:///var/lib/bullsweep/archive }`".into()),
        });
    }
    if tenants_want(&raw, Action::Anonymize)
        && global_pii.is_none()
        && policies.iter().any(|p| p.pii.is_none())
    {
        c.errors.push(ConfigError {
            pos: SourcePos { line: 1, column: 1 },
            path: "pii".into(),
            message:
                "a tenant override uses `action: anonymize` but the file has no top-level `pii:`"
                    .into(),
            hint: Some("add `pii: { paths: [...], patterns: [email, credit-card] }`".into()),
        });
    }
    let mut notify = NotifyTargets::default();
    if let Some(n) = &raw.notify {
        notify.log = n.log;
        if let Some(w) = &n.webhook {
            if w.url.value.starts_with("http://") || w.url.value.starts_with("https://") {
                notify.webhook = Some(Webhook {
                    url: w.url.value.clone(),
                    headers: w.headers.clone().into_iter().collect(),
                });
            } else {
                c.error_hint(
                    &w.url.referenced,
                    "notify.webhook.url",
                    format!("webhook url `{}` is not http(s)", w.url.value),
                    "e.g. https://hooks.example.com/bullsweep",
                );
            }
        }
    }
    let wants_notify = policies.iter().any(|p| {
        p.rules
            .values()
            .chain(p.jobs.iter().flat_map(|j| j.rules.values()))
            .any(|r| r.action == Some(Action::Notify))
    });
    if wants_notify
        && raw
            .notify
            .as_ref()
            .is_none_or(|n| n.webhook.is_none() && !n.log)
    {
        c.errors.push(ConfigError {
            pos: SourcePos { line: 1, column: 1 },
            path: "notify".into(),
            message: "a policy uses `action: notify` but the file names no notify target".into(),
            hint: Some(
                "add `notify: { log: true }` or `notify: { webhook: { url: https://… } }`".into(),
            ),
        });
    }
    if let (true, Some(audit), Some(schedule)) = (c.errors.is_empty(), audit, schedule) {
        Ok(PolicySet {
            source: file.to_string(),
            environment,
            aliases,
            layouts,
            policies,
            tenants,
            audit,
            archive,
            notify,
            subjects,
            schedule,
            cost,
            warnings: Vec::new(),
        })
    } else {
        c.errors.sort_by_key(|e| (e.pos.line, e.pos.column));
        Err(ConfigErrors {
            file: file.to_string(),
            errors: c.errors,
        })
    }
}

/// Whether a tenant override sets `action` anywhere.
fn tenants_want(raw: &RawPolicyFile, action: Action) -> bool {
    raw.tenants.iter().any(|t| {
        [&t.value.overrides.completed, &t.value.overrides.failed]
            .into_iter()
            .flatten()
            .any(|r| {
                r.value
                    .action
                    .as_ref()
                    .is_some_and(|a| a.value == action.as_str())
            })
    })
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

/// Two policies tie when they can apply to one queue with equal specificity.
fn check_ties(c: &mut Checker, policies: &[Policy]) {
    for (i, a) in policies.iter().enumerate() {
        for b in &policies[i + 1..] {
            let envs_meet = match (&a.environment, &b.environment) {
                (Some(x), Some(y)) => x == y,
                _ => a.environment == b.environment,
            };
            let tenants_meet = match (&a.tenant, &b.tenant) {
                (None, None) => true,
                (Some(x), Some(y)) => x.specificity() == y.specificity() && x.may_overlap(y),
                _ => false,
            };
            if envs_meet
                && tenants_meet
                && a.queue.specificity() == b.queue.specificity()
                && a.queue.may_overlap(&b.queue)
            {
                c.errors.push(ConfigError {
                    pos: b.pos,
                    path: String::new(),
                    message: format!(
                        "policies `{}` (line {}) and `{}` tie: both can match the same queue with equal specificity",
                        a.name, a.pos.line, b.name
                    ),
                    hint: Some(
                        "make one pattern more specific, or give one a `tenant` or `environment`".into(),
                    ),
                });
            }
        }
    }
}

/// Refuses `dependsOn` lists that loop. A name depends on the most specific policies whose
/// pattern matches it; a policy's own queues are not counted as its dependencies.
fn check_dependency_cycles(c: &mut Checker, policies: &[Policy]) {
    let targets = |name: &str, from: usize| -> Vec<usize> {
        let matching: Vec<usize> = (0..policies.len())
            .filter(|&i| i != from && policies[i].queue.matches(name))
            .collect();
        let best = matching
            .iter()
            .map(|&i| policies[i].queue.specificity())
            .max();
        matching
            .into_iter()
            .filter(|&i| Some(policies[i].queue.specificity()) == best)
            .collect()
    };
    let edges: Vec<Vec<usize>> = policies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut out: Vec<usize> = p.depends_on.iter().flat_map(|n| targets(n, i)).collect();
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect();
    // Depth-first search with colours; the first back edge found names the cycle.
    let mut colour = vec![0u8; policies.len()];
    let mut stack: Vec<usize> = Vec::new();
    fn visit(
        at: usize,
        edges: &[Vec<usize>],
        colour: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        colour[at] = 1;
        stack.push(at);
        for &next in &edges[at] {
            if colour[next] == 1 {
                let from = stack.iter().position(|&s| s == next).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(next);
                return Some(cycle);
            }
            if colour[next] == 0
                && let Some(cycle) = visit(next, edges, colour, stack)
            {
                return Some(cycle);
            }
        }
        stack.pop();
        colour[at] = 2;
        None
    }
    for start in 0..policies.len() {
        if colour[start] != 0 {
            continue;
        }
        if let Some(cycle) = visit(start, &edges, &mut colour, &mut stack) {
            let names: Vec<&str> = cycle.iter().map(|&i| policies[i].name.as_str()).collect();
            let first = &policies[cycle[0]];
            c.errors.push(ConfigError {
                pos: first.pos,
                path: String::new(),
                message: format!("dependsOn forms a cycle: {}", names.join(" -> ")),
                hint: Some("remove one of the dependencies so queues can be ordered".into()),
            });
            return;
        }
    }
}

/// Turns a parse error into a located [`ConfigError`], with "did you mean" for unknown fields.
fn syntax_error(e: &serde_saphyr::Error) -> ConfigError {
    let rendered = e.without_snippet().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    let message = strip_location_suffix(strip_location_prefix(first)).to_string();
    let hint = unknown_field_hint(&message);
    ConfigError {
        pos: e.location().map(|l| pos(&l)).unwrap_or_default(),
        path: String::new(),
        message,
        hint,
    }
}

fn strip_location_prefix(line: &str) -> &str {
    let line = line.strip_prefix("error: ").unwrap_or(line);
    if line.starts_with("line ")
        && let Some(idx) = line.find(": ")
    {
        return &line[idx + 2..];
    }
    line
}

/// Drops a trailing ` at line N, column M`: the position is printed in front already.
fn strip_location_suffix(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(idx) if message[idx..].contains(", column ") => &message[..idx],
        _ => message,
    }
}

/// `unknown field `maxAg`, expected one of name, maxAge` → `did you mean `maxAge`?`
fn unknown_field_hint(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let end = rest.find('`')?;
    let field = &rest[..end];
    let expected = rest[end..]
        .split_once("expected one of ")
        .map(|(_, list)| list)
        .or_else(|| rest[end..].split_once("expected ").map(|(_, list)| list))?;
    let names: Vec<&str> = expected
        .split(',')
        .map(|s| s.trim().trim_matches('`'))
        .filter(|s| !s.is_empty())
        .collect();
    suggest(field, &names).map(|s| format!("did you mean `{s}`?"))
}

/// The closest candidate within a small edit distance, if any.
pub(crate) fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.len() / 3).max(2);
    candidates
        .iter()
        .map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
