//! Checks of single values: durations (with a warning for bare numbers), counts, rules,
//! schedules, `rules.stalled`, `deadLetter`, environments and name patterns.

use super::Checker;
use super::suggest::suggest;
use crate::action::Action;
use crate::duration::{BareUnit, Millis, from_bare_number, parse_duration_str};
use crate::jsonpath::JsonPath;
use crate::model::{
    DeadLetter, JobState, KeepIf, StalledAction, StalledRule, StateRule, StateRules,
};
use crate::pattern::NamePattern;
use crate::raw::{RawCount, RawDeadLetter, RawDuration, RawStalled, RawStateRule};
use crate::schedule::Schedule;
use serde_saphyr::{Location, Spanned};
use std::collections::BTreeMap;

impl Checker {
    /// A duration; a bare number is read in `unit`, and `check` warns about it, since the
    /// unit differs between fields.
    pub(super) fn duration(
        &mut self,
        d: &Spanned<RawDuration>,
        unit: BareUnit,
        path: &str,
    ) -> Option<Millis> {
        let result = match &d.value {
            RawDuration::Number(n) => from_bare_number(*n, unit),
            RawDuration::Text(t) => parse_duration_str(t),
        };
        match result {
            Ok(ms) => {
                if let RawDuration::Number(n) = &d.value {
                    self.warn_bare(&d.referenced, path, *n, unit, ms);
                }
                Some(ms)
            }
            Err(m) => {
                self.error(&d.referenced, path, m);
                None
            }
        }
    }

    /// The warning for a bare number read as a duration.
    fn warn_bare(&mut self, at: &Location, path: &str, n: f64, unit: BareUnit, ms: Millis) {
        let unit = match unit {
            BareUnit::Seconds => "seconds",
            BareUnit::Milliseconds => "milliseconds",
        };
        self.warn(
            at,
            path,
            format!("the bare number {n} is read as {unit} ({ms}); write `{ms}` to say so"),
        );
    }

    /// `maxCount`: a whole number, zero or more, written as a number.
    pub(super) fn count(&mut self, c: &Spanned<RawCount>, path: &str) -> Option<u64> {
        match &c.value {
            RawCount::Number(n) if *n >= 0.0 && n.fract() == 0.0 && *n <= u64::MAX as f64 => {
                Some(*n as u64)
            }
            RawCount::Number(n) => {
                let what = if *n < 0.0 {
                    "zero or more"
                } else {
                    "a whole number"
                };
                self.error(
                    &c.referenced,
                    path,
                    format!("maxCount must be {what}, got {n}"),
                );
                None
            }
            RawCount::Text(t) => {
                self.error_hint(
                    &c.referenced,
                    path,
                    format!("maxCount must be a number, got the string \"{t}\""),
                    format!("write it unquoted: `maxCount: {}`", t.trim()),
                );
                None
            }
        }
    }

    pub(super) fn state_rule(
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
        let max_count = r
            .max_count
            .as_ref()
            .and_then(|c| self.count(c, &format!("{path}.maxCount")));
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
        if !state.is_finished() {
            self.finished_only(r, state, path);
        }
        let ttl = r.ttl.as_ref().and_then(|d| {
            let ttl = self.duration(d, BareUnit::Seconds, &format!("{path}.ttl"));
            match ttl {
                Some(Millis(0)) => {
                    self.error(&d.referenced, format!("{path}.ttl"), "ttl must be above 0");
                    None
                }
                _ if state.is_finished() => ttl,
                _ => None,
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
        let remind_every = self.remind_every(r, action, path);
        StateRule {
            max_age,
            max_count,
            keep_for,
            action,
            keep_if,
            ttl,
            remind_every,
        }
    }

    /// `remindEvery:`, which only a rule whose own `action` is `notify` may set (reminders of
    /// a notice; another action has none to repeat).
    fn remind_every(
        &mut self,
        r: &RawStateRule,
        action: Option<Action>,
        path: &str,
    ) -> Option<Millis> {
        let d = r.remind_every.as_ref()?;
        let key = format!("{path}.remindEvery");
        let every = self.duration(d, BareUnit::Seconds, &key)?;
        match (action, &r.action) {
            (Some(Action::Notify), _) => Some(every),
            // The action itself is wrong: that error is the one to read.
            (None, Some(_)) => None,
            (Some(other), _) => {
                self.error_hint(
                    &d.referenced,
                    key,
                    format!("`remindEvery` is for `action: notify`, not `{other}`"),
                    "a reminder repeats a notice; remove `remindEvery` or set `action: notify`",
                );
                None
            }
            (None, None) => {
                self.error_hint(
                    &d.referenced,
                    key,
                    "`remindEvery` needs `action: notify` in the same rule",
                    "write `action: notify` beside it: a notice is sent once unless its rule asks for reminders",
                );
                None
            }
        }
    }

    /// A pending state's rule may not count (`maxCount`), keep jobs from the events
    /// (`keepIf`) or expire them (`ttl`): those are for a finished set.
    fn finished_only(&mut self, r: &RawStateRule, state: JobState, path: &str) {
        if let Some(c) = &r.max_count {
            self.error_hint(
                &c.referenced,
                format!("{path}.maxCount"),
                format!("`maxCount` is for finished jobs, not {state} jobs"),
                "a pending job goes by its age: use `maxAge` (from the job's timestamp)",
            );
        }
        if let Some(k) = &r.keep_if {
            self.error_hint(
                &k.referenced,
                format!("{path}.keepIf"),
                format!("`keepIf` is for finished jobs, not {state} jobs"),
                "`keepIf` decides on a completed or failed event; pending jobs have none",
            );
        }
        if let Some(t) = &r.ttl {
            self.error_hint(
                &t.referenced,
                format!("{path}.ttl"),
                format!("`ttl` is for finished jobs, not {state} jobs"),
                "a key-level expiry fits only jobs that are done: set it on `completed` or `failed`",
            );
        }
    }

    /// `schedule:` as written (a number is milliseconds), read in `timezone` if it is cron.
    pub(super) fn schedule(
        &mut self,
        raw: &Spanned<RawDuration>,
        timezone: Option<&str>,
        path: &str,
    ) -> Option<Schedule> {
        let parsed = match &raw.value {
            RawDuration::Number(_) => self
                .duration(raw, BareUnit::Milliseconds, path)
                .map(|ms| Ok(Schedule::Every(ms)))?,
            RawDuration::Text(t) => Schedule::parse(t, timezone),
        };
        parsed
            .map_err(|m| self.error(&raw.referenced, path, m))
            .ok()
    }

    /// `rules.stalled`: both fields are required.
    pub(super) fn stalled(&mut self, raw: &Spanned<RawStalled>, path: &str) -> Option<StalledRule> {
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
            Some(a) => match StalledAction::from_name(&a.value) {
                Some(action) => Some(action),
                None => {
                    let other = &a.value;
                    let names = StalledAction::ALL.map(StalledAction::as_str);
                    let hint = match suggest(other, &names) {
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
    pub(super) fn dead_letter(
        &mut self,
        raw: &Spanned<RawDeadLetter>,
        path: &str,
    ) -> Option<DeadLetter> {
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

    /// The rules written for each state (`states` in `JobState::ALL`'s order).
    pub(super) fn state_rules(
        &mut self,
        states: [Option<&Spanned<RawStateRule>>; 6],
        path: &str,
    ) -> StateRules {
        let mut out = BTreeMap::new();
        for (state, rule) in JobState::ALL.into_iter().zip(states) {
            if let Some(rule) = rule {
                let rule = self.state_rule(state, rule, &format!("{path}.{state}"));
                out.insert(state, Box::new(rule));
            }
        }
        out
    }

    pub(super) fn env(
        &mut self,
        raw: Option<&Spanned<String>>,
        aliases: &BTreeMap<String, String>,
        path: &str,
    ) -> Option<String> {
        let e = raw?;
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

    pub(super) fn pattern(&mut self, raw: &Spanned<String>, path: &str) -> Option<NamePattern> {
        NamePattern::new(&raw.value)
            .map_err(|m| self.error(&raw.referenced, path, m))
            .ok()
    }
}
