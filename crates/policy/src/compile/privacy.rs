//! `pii:` layers and `subjects:` lists.

use super::suggest::suggest;
use super::{Checker, pos};
use crate::jsonpath::JsonPath;
use crate::pii::{DEFAULT_REPLACEMENT, PiiRules, TextPattern};
use crate::raw::{RawPii, RawSubject};
use crate::subject::Subject;
use serde_saphyr::Spanned;

impl Checker {
    /// One `pii:` layer laid over `base` field by field.
    pub(super) fn pii(
        &mut self,
        raw: &Spanned<RawPii>,
        base: Option<&PiiRules>,
        path: &str,
    ) -> PiiRules {
        let r = &raw.value;
        let errors_before = self.errors.len();
        let paths = match &r.paths {
            Some(list) => self.json_paths(list, path),
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

    /// The `paths:` list under `path`, each compiled; each one that does not compile is an
    /// error at `<path>.paths[i]` and is left out.
    fn json_paths(&mut self, list: &[Spanned<String>], path: &str) -> Vec<JsonPath> {
        list.iter()
            .enumerate()
            .filter_map(|(i, p)| {
                JsonPath::new(&p.value)
                    .map_err(|m| self.error(&p.referenced, format!("{path}.paths[{i}]"), m))
                    .ok()
            })
            .collect()
    }

    /// A `subjects:` list; names must be unique within it.
    pub(super) fn subjects(&mut self, raw: &[Spanned<RawSubject>], path: &str) -> Vec<Subject> {
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
            let paths = self.json_paths(&r.paths, &at);
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
}
