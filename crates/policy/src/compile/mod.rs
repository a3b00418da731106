//! Parsing and validation: policy text in, a [`PolicySet`] or every problem found out.
//! [`compile`] reads as its list of checks; each lives in the file named after what it checks:
//! `schema` (unknown keys, all at once), `values` (durations, counts, rules, schedules),
//! `privacy` (`pii:`, `subjects:`), `policies` (the lists and the file's settings), `targets`
//! (audit, archive, notify, and the action check), `bull_board` (the dashboard's links to
//! bull-board), `expiry` (`events:`, and where a `ttl` may
//! not be), `graph` (ties, `dependsOn` cycles) and `syntax` (parser errors, "did you mean").

mod bull_board;
mod doctor;
mod expiry;
mod graph;
mod policies;
mod privacy;
mod schema;
mod sources;
mod suggest;
pub(crate) use suggest::suggest;
pub(crate) mod syntax;
mod targets;
mod values;

use crate::model::PolicySet;
use crate::position::SourcePos;
use crate::raw::RawPolicyFile;
use serde_saphyr::{Location, Spanned};
use std::fmt;
use std::sync::Arc;

/// The policy file format's version, the one `version:` must say.
pub(crate) const FORMAT_VERSION: i64 = 1;

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

pub(crate) fn pos(loc: &Location) -> SourcePos {
    SourcePos {
        line: loc.line(),
        column: loc.column(),
    }
}

/// Collects errors and warnings while walking the raw file.
struct Checker {
    file: String,
    errors: Vec<ConfigError>,
    warnings: Vec<String>,
}

impl Checker {
    /// Records what `check` should warn about, located like an error.
    fn warn(&mut self, loc: &Location, path: &str, message: impl fmt::Display) {
        self.warnings.push(format!(
            "{}:{}: {message} (at `{path}`)",
            self.file,
            pos(loc)
        ));
    }

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

    /// `version:`, which must be present and 1.
    fn version(&mut self, raw: &RawPolicyFile, start: &Location) {
        match &raw.version {
            Some(v) if v.value == FORMAT_VERSION => {}
            Some(v) => self.error_hint(
                &v.referenced,
                "version",
                format!("unsupported policy file version {}", v.value),
                "this bullsweep reads `version: 1`",
            ),
            None => self.error_hint(
                start,
                "version",
                "the policy file has no `version`",
                "add `version: 1` as its first line",
            ),
        }
    }
}

/// Parses and validates a policy file, reporting every problem at once. `file` names the
/// source in messages. YAML and JSON are both accepted (JSON is YAML).
pub fn compile(file: &str, text: &str) -> Result<PolicySet, ConfigErrors> {
    let failed = |errors: Vec<ConfigError>| ConfigErrors {
        file: file.to_string(),
        errors,
    };
    let walked: Spanned<schema::UnknownKeys> =
        syntax::parse(text).map_err(|e| failed(vec![syntax::syntax_error(&e)]))?;
    // Unknown keys are found by a first reading, all at once; the typed parse skips them, so
    // the checks below report everything else in the same pass.
    let unknown = walked.value.0;
    let mut raw: RawPolicyFile = syntax::parse(text).map_err(|e| {
        let mut errors = unknown.clone();
        errors.push(syntax::syntax_error(&e));
        failed(errors)
    })?;
    let mut c = Checker {
        file: file.to_string(),
        errors: unknown,
        warnings: Vec::new(),
    };
    c.version(&raw, &walked.referenced);
    let aliases = c.aliases(&raw);
    let environment = c.env(raw.environment.as_ref(), &aliases, "environment");
    let layouts = c.layouts(&raw);
    let global_pii = raw.pii.as_ref().map(|p| Arc::new(c.pii(p, None, "pii")));
    let schedule = c.file_schedule(&raw);
    let cost = c.cost(&raw);
    let subjects = c.subjects(&raw.subjects, "subjects");
    let sources = c.sources(&raw);
    let doctor = c.doctor(&raw);
    // These two read the policies as written, before compiling them takes them out of `raw`.
    c.actions_have_targets(&raw);
    c.ttl_conflicts(&raw);
    let written = std::mem::take(&mut raw.policies);
    let policies = c.policies(written, &raw, &aliases, global_pii.as_ref());
    let tenants = c.tenants(&raw, &aliases);
    graph::check_ties(&mut c, &policies);
    graph::check_dependency_cycles(&mut c, &policies);
    let audit = c.audit(&raw);
    let archive = c.archive(&raw);
    let notify = c.notify(&raw);
    let bull_board = c.bull_board(&raw);
    match (c.errors.is_empty(), audit) {
        (true, Some(audit)) => Ok(PolicySet {
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
            sources,
            schedule,
            cost,
            doctor,
            bull_board,
            warnings: c.warnings,
        }),
        _ => {
            c.errors.sort_by_key(|e| (e.pos.line, e.pos.column));
            Err(failed(c.errors))
        }
    }
}
