//! The test file's format, read with the position of every case and expectation so that a
//! failing case names its `file:line`, and a malformed file every problem at once.

use crate::backend::Backend;
use crate::compile::{ConfigError, ConfigErrors, pos, syntax};
use crate::duration::{Millis, parse_duration_str};
use crate::fields::{FIELD_NAMES, is_field_name};
use crate::model::JobState;
use crate::position::SourcePos;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

/// A test file: the policy it tests and its cases.
#[derive(Clone, Debug)]
pub struct GoldenFile {
    /// `policy:`, relative to the test file; `None` for the `--config` file.
    pub policy: Option<String>,
    /// `env:`, the environment of queues whose layout has no `{env}` (as `--env` gives it);
    /// when set, it is the one the cases run in, whatever `--env` says.
    pub env: Option<String>,
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

/// One case: a queue, maybe a job, and what is expected of them.
#[derive(Clone, Debug)]
pub struct Case {
    /// Where the case starts.
    pub pos: SourcePos,
    /// `name:`, when given.
    pub name: Option<String>,
    /// The queue's key base (`bull:acme:prod:billing`).
    pub queue: String,
    /// `backend:`, the library that wrote the queue (`bullmq` when not given).
    pub backend: Backend,
    /// The job, for a job case.
    pub job: Option<JobCase>,
    /// Each expected field (`policy`, `completed.maxAge`, `outcome`…) with its value and where
    /// it is written, in file order.
    pub expect: Vec<(String, Value, SourcePos)>,
}

/// How the source of a source link answers for the job's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceSaid {
    /// No record has the key.
    Missing,
    /// A record has it (the source has no filter).
    Found,
    /// A record has it and matches the source's filter.
    Matching,
    /// A record has it and no longer matches the filter.
    NotMatching,
}

/// Which path of the daemon decides: the periodic sweep (and `run`), or the event path as
/// the job finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The sweep (`plan`, `run`, the daemon's schedule).
    Sweep,
    /// The daemon's event path (`mode: event`).
    Event,
}

/// The job of a job case.
#[derive(Clone, Debug)]
pub struct JobCase {
    /// Its state.
    pub state: JobState,
    /// `job.name`.
    pub name: String,
    /// How long ago it finished (finished states) or was added (pending states).
    pub ago: Millis,
    /// How many jobs of its group are newer (0: the newest).
    pub rank: u64,
    /// `data`, `returnvalue` and `failedReason`, as BullMQ keeps them.
    pub data: Value,
    /// `returnvalue`.
    pub returnvalue: Option<Value>,
    /// `failedReason`.
    pub failed_reason: Option<String>,
    /// The source's answer, for a source link.
    pub source: Option<SourceSaid>,
    /// How long ago the source's record last changed.
    pub source_changed_ago: Option<Millis>,
    /// The path that decides.
    pub via: Via,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    policy: Option<String>,
    env: Option<String>,
    cases: Vec<Spanned<RawCase>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: Option<String>,
    queue: String,
    backend: Option<Spanned<String>>,
    job: Option<Spanned<RawJob>>,
    expect: BTreeMap<String, Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawJob {
    state: Spanned<String>,
    name: Option<String>,
    finished_ago: Option<Spanned<String>>,
    created_ago: Option<Spanned<String>>,
    rank: Option<u64>,
    data: Option<Value>,
    returnvalue: Option<Value>,
    failed_reason: Option<String>,
    source: Option<Spanned<String>>,
    source_changed_ago: Option<Spanned<String>>,
    via: Option<Spanned<String>>,
}

/// Keys a queue case may expect besides the effective fields.
const QUEUE_KEYS: [&str; 4] = ["policy", "tenant", "env", "queue"];
/// Keys a job case may expect.
const JOB_KEYS: [&str; 4] = ["outcome", "rule", "reason", "redacted"];

/// Reads a test file; every problem at once, each at its `file:line:column`.
pub fn parse_golden(file: &str, text: &str) -> Result<GoldenFile, ConfigErrors> {
    let fail = |errors| ConfigErrors {
        file: file.to_string(),
        errors,
    };
    let raw: RawFile = syntax::parse(text).map_err(|e| fail(vec![syntax::syntax_error(&e)]))?;
    let mut errors = Vec::new();
    let mut cases = Vec::new();
    for (i, c) in raw.cases.into_iter().enumerate() {
        let at = pos(&c.referenced);
        let path = format!("cases[{i}]");
        let c = c.value;
        let mut problem = |p: SourcePos, key: &str, message: String| {
            errors.push(ConfigError {
                pos: p,
                path: format!("{path}{key}"),
                message,
                hint: None,
            })
        };
        let backend = match &c.backend {
            None => Backend::Bullmq,
            Some(b) => Backend::parse(&b.value).unwrap_or_else(|| {
                problem(
                    pos(&b.referenced),
                    ".backend",
                    format!("unknown backend `{}`; expected bullmq or bull", b.value),
                );
                Backend::Bullmq
            }),
        };
        let is_job = c.job.is_some();
        let job = c.job.and_then(|j| {
            let jp = pos(&j.referenced);
            job_case(j.value)
                .map_err(|all| {
                    for (p, k, m) in all {
                        problem(p.unwrap_or(jp), &format!(".job.{k}"), m);
                    }
                })
                .ok()
        });
        let allowed: &[&str] = if is_job { &JOB_KEYS } else { &QUEUE_KEYS };
        if c.expect.is_empty() {
            problem(
                at,
                ".expect",
                "a case expects nothing; name at least one field".into(),
            );
        }
        let mut expect = Vec::new();
        for (key, v) in c.expect {
            let p = pos(&v.referenced);
            let known = allowed.contains(&key.as_str()) || (!is_job && is_field_name(&key));
            if !known {
                let what = if is_job {
                    format!("a job case expects {}", JOB_KEYS.join(", "))
                } else {
                    format!(
                        "a queue case expects {}, or a field: {FIELD_NAMES}",
                        QUEUE_KEYS.join(", ")
                    )
                };
                problem(
                    p,
                    &format!(".expect.{key}"),
                    format!("unknown expectation `{key}`; {what}"),
                );
            }
            expect.push((key, v.value, p));
        }
        expect.sort_by_key(|(_, _, p)| (p.line, p.column));
        cases.push(Case {
            pos: at,
            name: c.name,
            queue: c.queue.trim_end_matches(':').to_string(),
            backend,
            job,
            expect,
        });
    }
    errors.sort_by_key(|e| (e.pos.line, e.pos.column));
    if errors.is_empty() {
        Ok(GoldenFile {
            policy: raw.policy,
            env: raw.env,
            cases,
        })
    } else {
        Err(fail(errors))
    }
}

/// A problem of a job case: where (when the field has a position), which field, what.
type Problem = (Option<SourcePos>, &'static str, String);

/// A duration field of a job case.
fn span(field: &'static str, v: &Spanned<String>, problems: &mut Vec<Problem>) -> Option<Millis> {
    parse_duration_str(&v.value)
        .map_err(|m| problems.push((Some(pos(&v.referenced)), field, m)))
        .ok()
}

/// A job case from its raw form, or every problem it has.
fn job_case(j: RawJob) -> Result<JobCase, Vec<Problem>> {
    let mut problems: Vec<Problem> = Vec::new();
    let state = JobState::from_name(&j.state.value);
    if state.is_none() {
        let names: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
        let m = format!(
            "unknown state `{}`; expected one of {}",
            j.state.value,
            names.join(", ")
        );
        problems.push((Some(pos(&j.state.referenced)), "state", m));
    }
    let finished = state.is_some_and(JobState::is_finished);
    let (wanted, given, other) = if finished {
        ("finishedAgo", &j.finished_ago, &j.created_ago)
    } else {
        ("createdAgo", &j.created_ago, &j.finished_ago)
    };
    if let Some(o) = other.as_ref().filter(|_| state.is_some()) {
        let why = format!("a job in `{}` is aged by `{wanted}`", j.state.value);
        problems.push((Some(pos(&o.referenced)), wanted, why));
    }
    let ago = match given {
        Some(v) => span(wanted, v, &mut problems),
        None => {
            if state.is_some() && other.is_none() {
                problems.push((None, wanted, format!("a job case needs `{wanted}`")));
            }
            None
        }
    };
    let source = j.source.as_ref().and_then(|s| match s.value.as_str() {
        "missing" => Some(SourceSaid::Missing),
        "found" => Some(SourceSaid::Found),
        "matching" => Some(SourceSaid::Matching),
        "notMatching" => Some(SourceSaid::NotMatching),
        other => {
            let m = format!(
                "unknown source answer `{other}`; expected missing, found, matching or notMatching"
            );
            problems.push((Some(pos(&s.referenced)), "source", m));
            None
        }
    });
    let source_changed_ago = j
        .source_changed_ago
        .as_ref()
        .and_then(|v| span("sourceChangedAgo", v, &mut problems));
    let via = match j.via.as_ref().map(|v| (v.value.as_str(), v)) {
        None | Some(("sweep", _)) => Via::Sweep,
        Some(("event", _)) if finished => Via::Event,
        Some((other, v)) => {
            let m = format!("`via: {other}`: expected sweep, or event for a finished state");
            problems.push((Some(pos(&v.referenced)), "via", m));
            Via::Sweep
        }
    };
    match (state, ago) {
        (Some(state), Some(ago)) if problems.is_empty() => Ok(JobCase {
            state,
            name: j.name.unwrap_or_default(),
            ago,
            rank: j.rank.unwrap_or(0),
            data: j.data.unwrap_or(Value::Object(Default::default())),
            returnvalue: j.returnvalue,
            failed_reason: j.failed_reason,
            source,
            source_changed_ago,
            via,
        }),
        _ => Err(problems),
    }
}
