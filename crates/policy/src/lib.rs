//! Retention policies for BullMQ queues: the policy file's schema, validation with
//! `file:line:column` errors, resolution by specificity with provenance, and the pure
//! arithmetic of which jobs a rule selects. This crate does no I/O.
#![deny(missing_docs)]

mod action;
mod backend;
mod bull_board;
mod compile;
mod cost;
mod credentials;
mod decide;
mod describe;
mod doctor;
mod duration;
mod fields;
mod flows;
mod golden;
mod groups;
mod json_schema;
mod json_walk;
mod jsonpath;
mod layout;
mod model;
mod one_state;
mod pattern;
mod pii;
mod position;
mod printable;
mod raw;
mod redaction;
mod resolve;
mod schedule;
mod selection;
mod shape;
mod source;
mod subject;
mod tokens;

pub use action::Action;
pub use backend::{Backend, EventFeed, Store};
pub use bull_board::BullBoard;
pub use compile::{ConfigError, ConfigErrors, DEFAULT_LAYOUT, compile};
pub use cost::{CostModel, CostPreset, PRESETS, preset};
pub use credentials::masked_url;
pub use decide::{Decision, JobFacts, decide};
pub use describe::{
    PolicySetJson, effective_daemon_fields, explain_json, other_backend_policy,
    policy_daemon_fields, policy_set_json, source_json,
};
pub use doctor::{DoctorKind, DoctorSettings};
pub use duration::{BareUnit, Millis, parse_duration_str};
pub use fields::{FIELD_NAMES, RULE_FIELDS, RuleField, is_field_name};
pub use flows::{ChildrenInOtherQueues, FlowField, FlowSettings, FlowsWritten};
pub use golden::{
    Case, CaseResult, GoldenFile, JobCase, Mismatch, SourceSaid, Via, parse_golden, run_cases,
};
pub use groups::{RuleGroup, RuleGroups};
pub use json_schema::{SCHEMA_ID, json_schema};
pub use json_walk::Malformed;
pub use jsonpath::JsonPath;
pub use layout::{Layout, LayoutMatch};
pub use model::{
    ArchiveTarget, AuditTarget, DEFAULT_AUDIT_FILE, DaemonSettings, DeadLetter, EventsBound,
    JobRule, JobState, KeepIf, NotifyTargets, Policy, PolicySet, RunMode, Sla, StalledAction,
    StalledRule, StateRule, StateRules, TenantOverride, Webhook,
};
pub use pattern::{NamePattern, Specificity};
pub use pii::{DEFAULT_REPLACEMENT, PiiRules, TextPattern, Unreadable};
pub use position::SourcePos;
pub use printable::unprintable;
pub use redaction::{DATA_FIELDS, JobRedaction, WITHHELD};
pub use resolve::{
    EffectiveJobRule, EffectivePolicy, EffectiveRule, Provenance, QueueId, Resolution, Sourced,
    dependency_order,
};
pub use schedule::{AUTO_MAX, AUTO_MIN, CronSchedule, DEFAULT_SCHEDULE, Schedule};
pub use selection::{Selection, Verdict};
pub use source::{
    DEFAULT_SOURCE_BATCH, DEFAULT_SOURCE_KEEP_FOR, DEFAULT_SOURCE_TIMEOUT, DeleteWhen, JobTimes,
    KeyTemplate, PartialSourceLink, SOURCE_ACTIONS, Source, SourceAnswer, SourceKind, SourceLink,
    SourceReason,
};
pub use subject::{
    Prefilter, Subject, SubjectReading, mentions_anywhere, read_subjects, text_mentions,
};
pub use tokens::{Permission, Role, Token, TokenSet, compile_tokens};
