//! `sources:` (each a PostgreSQL query or a Redis key template) and the source links of
//! policies and job rules (`source`, `deleteWhen`, `keepFor`).

use super::Checker;
use super::suggest::suggest;
use crate::action::Action;
use crate::duration::{BareUnit, Millis};
use crate::jsonpath::JsonPath;
use crate::raw::{
    RawCount, RawDuration, RawPolicyFile, RawPostgresSource, RawRedisSource, RawSource,
    RawSourceLink,
};
use crate::source::{
    DEFAULT_SOURCE_BATCH, DEFAULT_SOURCE_TIMEOUT, DeleteWhen, KeyTemplate, PartialSourceLink,
    SOURCE_ACTIONS, Source, SourceKind,
};
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

/// The most keys one lookup may ask about.
const MAX_SOURCE_BATCH: u64 = 100_000;

impl Checker {
    /// `sources:`: each exactly one kind, with what that kind needs.
    pub(super) fn sources(&mut self, raw: &RawPolicyFile) -> BTreeMap<String, Source> {
        let mut out = BTreeMap::new();
        for (name, s) in &raw.sources {
            let path = format!("sources.{name}");
            if let Some(source) = self.source(name, s, &path) {
                out.insert(name.clone(), source);
            }
        }
        out
    }

    fn source(&mut self, name: &str, s: &Spanned<RawSource>, path: &str) -> Option<Source> {
        let (kind, timeout, batch) = match (&s.value.postgres, &s.value.redis) {
            (Some(pg), None) => (
                self.postgres_source(pg, &format!("{path}.postgres")),
                &pg.value.timeout,
                &pg.value.batch_size,
            ),
            (None, Some(r)) => (
                self.redis_source(r, &format!("{path}.redis")),
                &r.value.timeout,
                &r.value.batch_size,
            ),
            _ => {
                self.error_hint(
                    &s.referenced,
                    path,
                    format!("source `{name}` must be exactly one of `postgres` and `redis`"),
                    "e.g. `postgres: { url: postgres://app@db/shop, query: \"SELECT …\" }`",
                );
                return None;
            }
        };
        let timeout = self.source_timeout(timeout, path);
        let batch_size = self.source_batch(batch, path);
        Some(Source {
            name: name.to_string(),
            kind: kind?,
            timeout: timeout?,
            batch_size: batch_size?,
            pos: super::pos(&s.referenced),
        })
    }

    fn source_timeout(&mut self, t: &Option<Spanned<RawDuration>>, path: &str) -> Option<Millis> {
        let Some(t) = t else {
            return Some(DEFAULT_SOURCE_TIMEOUT);
        };
        let ms = self.duration(t, BareUnit::Milliseconds, &format!("{path}.timeout"))?;
        if ms.0 == 0 {
            self.error(
                &t.referenced,
                format!("{path}.timeout"),
                "timeout must be above 0",
            );
            return None;
        }
        Some(ms)
    }

    fn source_batch(&mut self, b: &Option<Spanned<RawCount>>, path: &str) -> Option<u64> {
        let Some(b) = b else {
            return Some(DEFAULT_SOURCE_BATCH);
        };
        let n = self.count(b, &format!("{path}.batchSize"))?;
        if n == 0 || n > MAX_SOURCE_BATCH {
            self.error(
                &b.referenced,
                format!("{path}.batchSize"),
                format!("batchSize must be from 1 to {MAX_SOURCE_BATCH}, got {n}"),
            );
            return None;
        }
        Some(n)
    }

    fn postgres_source(
        &mut self,
        pg: &Spanned<RawPostgresSource>,
        path: &str,
    ) -> Option<SourceKind> {
        let p = &pg.value;
        let url = match &p.url {
            Some(u)
                if u.value.starts_with("postgres://") || u.value.starts_with("postgresql://") =>
            {
                Some(u.value.clone())
            }
            Some(u) => {
                self.error_hint(
                    &u.referenced,
                    format!("{path}.url"),
                    "a postgres source's url must start with postgres:// or postgresql://",
                    "e.g. postgres://app@db/shop",
                );
                None
            }
            None => {
                self.error(&pg.referenced, path, "a postgres source needs `url`");
                None
            }
        };
        let query = match &p.query {
            Some(q) if q.value.contains("$1") => Some(q.value.clone()),
            Some(q) => {
                self.error_hint(
                    &q.referenced,
                    format!("{path}.query"),
                    "the query must take the keys as `$1` (a text array)",
                    "e.g. SELECT id::text AS key FROM orders WHERE id::text = ANY($1)",
                );
                None
            }
            None => {
                self.error(&pg.referenced, path, "a postgres source needs `query`");
                None
            }
        };
        Some(SourceKind::Postgres {
            url: url?,
            query: query?,
        })
    }

    fn redis_source(&mut self, r: &Spanned<RawRedisSource>, path: &str) -> Option<SourceKind> {
        let v = &r.value;
        let url = match &v.url {
            Some(u) if u.value.starts_with("redis://") || u.value.starts_with("rediss://") => {
                Some(Some(u.value.clone()))
            }
            Some(u) => {
                self.error_hint(
                    &u.referenced,
                    format!("{path}.url"),
                    "a redis source's url must start with redis:// or rediss://",
                    "leave `url` out to look records up in the governed Redis",
                );
                None
            }
            None => Some(None),
        };
        let key = match &v.key {
            Some(k) => KeyTemplate::new(&k.value)
                .map_err(|m| self.error(&k.referenced, format!("{path}.key"), m))
                .ok(),
            None => {
                self.error_hint(
                    &r.referenced,
                    path,
                    "a redis source needs `key`",
                    "e.g. `key: \"cart:{key}\"`",
                );
                None
            }
        };
        let field = v.field.as_ref().map(|f| f.value.clone());
        let equals = v.equals.as_ref().map(|e| e.value.clone());
        if field.is_some() != equals.is_some() {
            self.error_hint(
                &r.referenced,
                path,
                "`field` and `equals` go together",
                "e.g. `field: status, equals: open`: the record matches while status is open",
            );
            return None;
        }
        Some(SourceKind::Redis {
            url: url?,
            key: key?,
            field,
            equals,
        })
    }

    /// A policy's or job rule's `source`, `deleteWhen` and `keepFor`, over `base` (the
    /// policy's, for a job rule); what they make together must name a source and a key path.
    pub(super) fn source_link(
        &mut self,
        raw: &RawPolicyFile,
        link: Option<&Spanned<RawSourceLink>>,
        delete_when: Option<&Spanned<String>>,
        keep_for: Option<&Spanned<RawDuration>>,
        base: &PartialSourceLink,
        path: &str,
    ) -> PartialSourceLink {
        let mut own = PartialSourceLink::default();
        if let Some(l) = link {
            own.source = self.source_name(raw, l, path);
            own.key = l.value.key.as_ref().and_then(|k| {
                JsonPath::new(&k.value)
                    .map_err(|m| self.error(&k.referenced, format!("{path}.source.key"), m))
                    .ok()
            });
            own.action = l.value.action.as_ref().and_then(|a| {
                let names: Vec<&str> = SOURCE_ACTIONS.iter().map(|a| a.as_str()).collect();
                match Action::from_name(&a.value) {
                    Some(action) if SOURCE_ACTIONS.contains(&action) => Some(action),
                    _ => {
                        self.error_hint(
                            &a.referenced,
                            format!("{path}.source.action"),
                            format!("action `{}` is not valid for a source link", a.value),
                            format!("expected one of {}", names.join(", ")),
                        );
                        None
                    }
                }
            });
        }
        own.delete_when = delete_when.as_ref().and_then(|d| {
            let names: Vec<&str> = DeleteWhen::ALL.iter().map(|d| d.as_str()).collect();
            let found = DeleteWhen::ALL.into_iter().find(|m| m.as_str() == d.value);
            if found.is_none() {
                let hint = match suggest(&d.value, &names) {
                    Some(s) => format!("did you mean `{s}`? expected one of {}", names.join(", ")),
                    None => format!("expected one of {}", names.join(", ")),
                };
                self.error_hint(
                    &d.referenced,
                    format!("{path}.deleteWhen"),
                    format!("unknown deleteWhen `{}`", d.value),
                    hint,
                );
            }
            found
        });
        own.keep_for = keep_for
            .as_ref()
            .and_then(|k| self.duration(k, BareUnit::Milliseconds, &format!("{path}.keepFor")));
        let merged = own.over(base);
        let at = link
            .as_ref()
            .map(|l| &l.referenced)
            .or(delete_when.as_ref().map(|d| &d.referenced))
            .or(keep_for.as_ref().map(|k| &k.referenced));
        if let Some(at) = at
            && merged.source.is_none()
            // A link that names no known source has its own error.
            && link.is_none()
        {
            self.error_hint(
                at,
                path,
                "`deleteWhen` and `keepFor` here need a `source`",
                "add `source: { name: <a name under sources:>, key: data.<field> }`",
            );
        }
        if let (Some(at), Some(name)) = (at, &merged.source)
            && merged.key.is_none()
            && raw.sources.contains_key(name)
            && !template_has_path(raw, name)
        {
            self.error_hint(
                at,
                format!("{path}.source"),
                "the source link names no `key`",
                "say where the job keeps its record's key, e.g. `key: data.orderId`",
            );
        }
        own
    }

    /// `source.name`, which must name an entry of `sources:`.
    fn source_name(
        &mut self,
        raw: &RawPolicyFile,
        l: &Spanned<RawSourceLink>,
        path: &str,
    ) -> Option<String> {
        let Some(n) = &l.value.name else {
            self.error_hint(
                &l.referenced,
                format!("{path}.source"),
                "the source link names no source",
                "e.g. `source: { name: orders, key: data.orderId }`",
            );
            return None;
        };
        if raw.sources.contains_key(&n.value) {
            return Some(n.value.clone());
        }
        let names: Vec<&str> = raw.sources.keys().map(String::as_str).collect();
        let hint = match suggest(&n.value, &names) {
            Some(s) => format!("did you mean `{s}`?"),
            None if names.is_empty() => "declare it under the top-level `sources:`".to_string(),
            None => format!("the sources are {}", names.join(", ")),
        };
        self.error_hint(
            &n.referenced,
            format!("{path}.source.name"),
            format!("unknown source `{}`", n.value),
            hint,
        );
        None
    }
}

/// Whether the source is a Redis source whose key template reads a path of the job.
fn template_has_path(raw: &RawPolicyFile, name: &str) -> bool {
    raw.sources
        .get(name)
        .and_then(|s| s.value.redis.as_ref())
        .and_then(|r| r.value.key.as_ref())
        .and_then(|k| KeyTemplate::new(&k.value).ok())
        .is_some_and(|t| t.path.is_some())
}
