//! The shape of a policy file: every key each level allows, with the type of its value, whether
//! it may be left out or written as null, and what it means. [`FILE`] is the one list of the
//! file's keys: `compile::schema` walks a file against it to report every unknown key at once,
//! and `json_schema` turns it into the JSON Schema editors and CI read. A test keeps each
//! level's keys equal to the fields of its `raw` serde type, so the three cannot drift apart.

use crate::action::Action;
use crate::backend::Backend;
use crate::cost::PRESETS;
use crate::doctor::DoctorKind;
use crate::model::{ARCHIVE_COMPRESSION, RunMode, StalledAction};
use crate::pii::TextPattern;
use crate::source::{DeleteWhen, SOURCE_ACTIONS};

mod kinds;
mod source;

use kinds::{BOOL, MILLISECONDS, NUMBER, SCHEDULE, SECONDS, TEXT, TEXTS, def, opt, req};
pub(crate) use kinds::{Field, Presence, Shape, Value};
use source::SOURCE;

fn actions() -> Vec<&'static str> {
    Action::ALL.map(Action::as_str).to_vec()
}

fn source_actions() -> Vec<&'static str> {
    SOURCE_ACTIONS.map(Action::as_str).to_vec()
}

fn stalled_actions() -> Vec<&'static str> {
    StalledAction::ALL.map(StalledAction::as_str).to_vec()
}

fn backends() -> Vec<&'static str> {
    Backend::ALL.map(Backend::as_str).to_vec()
}

fn children_in_other_queues() -> Vec<&'static str> {
    crate::ChildrenInOtherQueues::ALL
        .map(crate::ChildrenInOtherQueues::as_str)
        .to_vec()
}

fn modes() -> Vec<&'static str> {
    RunMode::ALL.map(RunMode::as_str).to_vec()
}

fn delete_whens() -> Vec<&'static str> {
    DeleteWhen::ALL.map(DeleteWhen::as_str).to_vec()
}

fn text_patterns() -> Vec<&'static str> {
    TextPattern::ALL.map(TextPattern::as_str).to_vec()
}

fn cost_presets() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

fn compressions() -> Vec<&'static str> {
    vec![ARCHIVE_COMPRESSION]
}

fn doctor_kinds() -> Vec<&'static str> {
    let mut names = DoctorKind::ALL.map(DoctorKind::as_str).to_vec();
    names.push(DoctorKind::ALL_WORD);
    names
}

const STATE_RULE: Shape = Shape::Named(
    "stateRule",
    &Shape::Fields(&[
        opt(
            "maxAge",
            SECONDS,
            "Act on jobs finished longer ago than this (pending states: added longer ago).",
        ),
        opt(
            "maxCount",
            Shape::Value(Value::Count(0)),
            "Keep the newest N jobs (by `finishedOn`) and act on the rest; `0` keeps none. A number: `\"500\"` (quoted) is refused. Finished states only.",
        ),
        opt(
            "keepFor",
            MILLISECONDS,
            "Grace period: never act on a job finished (pending states: added) less than this ago, whatever `maxCount` says.",
        ),
        opt(
            "action",
            Shape::Value(Value::Name(actions)),
            "What to do with the selected jobs; default `remove`. `anonymize` is for completed and failed jobs, `notify` for failed and pending ones.",
        ),
        opt(
            "keepIf",
            Shape::Fields(&[
                req(
                    "path",
                    TEXT,
                    "A path over the job, starting with a hash field: `returnvalue.status`, `data.user.tier`, `name`, `failedReason`.",
                ),
                req(
                    "equals",
                    Shape::Value(Value::Any),
                    "The value the path must hold.",
                ),
            ]),
            "Keeps a job out of the event-driven path while a path over the job holds a value. Finished states only.",
        ),
        opt(
            "ttl",
            SECONDS,
            "Redis itself deletes each finished job's hash and logs this long after it finished (`PEXPIREAT`). Completed and failed only.",
        ),
        opt(
            "remindEvery",
            SECONDS,
            "With `action: notify` in the same rule: a job still selected is noticed again this long after its last notice. Without it, each job is noticed once (until it leaves the state or its id is reused).",
        ),
    ]),
);

const STATE_RULES: Shape = Shape::Named(
    "stateRules",
    &Shape::Fields(&[
        opt("completed", STATE_RULE, "The rule for completed jobs."),
        opt("failed", STATE_RULE, "The rule for failed jobs."),
        opt(
            "waiting",
            STATE_RULE,
            "The rule for waiting jobs (also those of a paused queue).",
        ),
        opt("delayed", STATE_RULE, "The rule for delayed jobs."),
        opt("prioritized", STATE_RULE, "The rule for prioritized jobs."),
        opt(
            "waiting-children",
            STATE_RULE,
            "The rule for parents waiting for their children.",
        ),
        opt(
            "stalled",
            Shape::Fields(&[
                req(
                    "maxAge",
                    SECONDS,
                    "How long ago the job must have started (`processedOn`).",
                ),
                req(
                    "action",
                    Shape::Value(Value::Name(stalled_actions)),
                    "`retry` does what BullMQ's stalled checker does; `remove` removes it as `job.remove()` does.",
                ),
            ]),
            "Active jobs whose lock is gone and that started longer ago than `maxAge`.",
        ),
    ]),
);

const PII: Shape = Shape::Named(
    "pii",
    &Shape::Fields(&[
        opt(
            "paths",
            TEXTS,
            "JSON paths in `data` and `returnvalue` whose values are replaced: `a.b`, `a[0]`, `a[*]`, `**.phone`.",
        ),
        opt(
            "patterns",
            Shape::List(&Shape::Value(Value::Name(text_patterns))),
            "Scrubbers of free text in `failedReason`, `stacktrace` and logs.",
        ),
        opt(
            "replacement",
            TEXT,
            "What a scrubbed value becomes; default `[REDACTED]`.",
        ),
    ]),
);

const SUBJECTS: Shape = Shape::List(&Shape::Named(
    "subject",
    &Shape::Fields(&[
        req(
            "name",
            TEXT,
            "The subject's name, as `forget --subject NAME=ID` gives it.",
        ),
        req(
            "paths",
            TEXTS,
            "JSON paths in job data that hold the subject's identifier.",
        ),
        opt(
            "tenantPath",
            TEXT,
            "The tenant in job data, for queues whose key has none.",
        ),
    ]),
));

const SOURCE_LINK: Shape = Shape::Named(
    "sourceLink",
    &Shape::Fields(&[
        opt("name", TEXT, "The source, by its name under `sources:`."),
        opt(
            "key",
            TEXT,
            "A path over the job that holds the record's key, e.g. `data.orderId`.",
        ),
        opt(
            "action",
            Shape::Value(Value::Name(source_actions)),
            "What to do with a job its source lets go; default `remove`.",
        ),
    ]),
);

const DELETE_WHEN: Shape = Shape::Value(Value::Name(delete_whens));
const DELETE_WHEN_DOC: &str = "Which answers of the source let a job go; default `sourceDeleted`.";
const SOURCE_KEEP_FOR_DOC: &str =
    "The grace after the record's last change and the job's own times; default `24h`.";

const POLICY: Shape = Shape::Fields(&[
    req("name", TEXT, "The policy's name, unique in the file."),
    opt(
        "environment",
        TEXT,
        "The environment whose queues it governs; absent = every environment.",
    ),
    req(
        "queueNamePattern",
        TEXT,
        "A glob on the queue name; `*` is the catch-all.",
    ),
    opt("tenant", TEXT, "A glob on the tenant from `{tenant}`."),
    opt(
        "backend",
        Shape::Value(Value::Name(backends)),
        "The queue library (and store) whose queues it governs: `bull`, `bullmq` or `bullmq-postgres`; absent = every one.",
    ),
    def("rules", STATE_RULES, "The rules, by job state."),
    def(
        "jobs",
        Shape::List(&Shape::Fields(&[
            req("name", TEXT, "The job name the rule is for."),
            opt(
                "completed",
                STATE_RULE,
                "The rule for completed jobs of this name.",
            ),
            opt(
                "failed",
                STATE_RULE,
                "The rule for failed jobs of this name.",
            ),
            opt(
                "waiting",
                STATE_RULE,
                "The rule for waiting jobs of this name.",
            ),
            opt(
                "delayed",
                STATE_RULE,
                "The rule for delayed jobs of this name.",
            ),
            opt(
                "prioritized",
                STATE_RULE,
                "The rule for prioritized jobs of this name.",
            ),
            opt(
                "waiting-children",
                STATE_RULE,
                "The rule for parents of this name waiting for their children.",
            ),
            opt(
                "source",
                SOURCE_LINK,
                "The source link of jobs of this name.",
            ),
            opt("deleteWhen", DELETE_WHEN, DELETE_WHEN_DOC),
            opt("keepFor", MILLISECONDS, SOURCE_KEEP_FOR_DOC),
        ])),
        "Rules per job name, merged field by field over `rules`.",
    ),
    opt(
        "sla",
        Shape::Fields(&[
            opt(
                "maxDataAgeHours",
                NUMBER,
                "The longest a job's data may be kept.",
            ),
            opt(
                "complianceTag",
                TEXT,
                "A tag carried into notices and reports.",
            ),
            def(
                "auditRequired",
                BOOL,
                "Refuse to change the queue while the audit store is down.",
            ),
        ]),
        "The policy's service levels.",
    ),
    opt(
        "pii",
        PII,
        "Overrides the top-level `pii` field by field, for `action: anonymize`.",
    ),
    def(
        "subjects",
        SUBJECTS,
        "Who a job belongs to, for `bullsweep forget`, in addition to the top-level ones.",
    ),
    opt(
        "schedule",
        SCHEDULE,
        "Daemon: this policy's own schedule (read in `timezone`).",
    ),
    opt(
        "timezone",
        TEXT,
        "The IANA time zone this policy's cron schedule is read in.",
    ),
    opt(
        "mode",
        Shape::Value(Value::Name(modes)),
        "Daemon: `event` or `both` also removes jobs as their events arrive; default `schedule`.",
    ),
    def("dependsOn", TEXTS, "Queues a run sweeps before these."),
    opt(
        "deadLetter",
        Shape::Fields(&[
            req(
                "warm",
                SECONDS,
                "From this age a job is archived and becomes a marker.",
            ),
            req("cold", SECONDS, "From this age the marker leaves Redis."),
            req(
                "purgeAfter",
                SECONDS,
                "From this age the archived copies go too.",
            ),
        ]),
        "Dead-letter phases of completed and failed jobs, each an age since the job finished.",
    ),
    opt(
        "moveExhaustedTo",
        TEXT,
        "Failed jobs with no attempts left move into this queue (same prefix).",
    ),
    opt(
        "protectWaitingParents",
        BOOL,
        "Leave finished children whose parent still waits (flows).",
    ),
    opt(
        "childrenInOtherQueues",
        Shape::Value(Value::Name(children_in_other_queues)),
        "Flows: `keepParent` (default) leaves a job with a child in another queue alone with its children; `remove` removes it with its children wherever they are, as BullMQ's Job.remove() does.",
    ),
    opt(
        "source",
        SOURCE_LINK,
        "The source link of every job of the policy's queues without a job rule of its own.",
    ),
    opt("deleteWhen", DELETE_WHEN, DELETE_WHEN_DOC),
    opt("keepFor", MILLISECONDS, SOURCE_KEEP_FOR_DOC),
    opt(
        "events",
        Shape::Fields(&[
            opt(
                "maxLen",
                Shape::Value(Value::Count(1)),
                "The most entries the events stream keeps.",
            ),
            opt(
                "maxAge",
                SECONDS,
                "The oldest entry the events stream keeps.",
            ),
        ]),
        "The bound of the queues' events streams, by length, by age, or both.",
    ),
]);

/// The keys a policy file may hold, level by level.
pub(crate) const FILE: Shape = Shape::Fields(&[
    req(
        "version",
        Shape::Value(Value::Version),
        "The file format's version; the only one so far is 1.",
    ),
    opt(
        "environment",
        TEXT,
        "The environment of queues whose layout has no `{env}`.",
    ),
    def(
        "environments",
        Shape::Map(&TEXTS),
        "Aliases: canonical name -> names seen in keys, e.g. `production: [prod]`.",
    ),
    opt(
        "discovery",
        Shape::Fields(&[def(
            "layouts",
            TEXTS,
            "How queue keys are named, tried in order; default `[\"bull:{queue}\"]`.",
        )]),
        "How queues are found.",
    ),
    def(
        "policies",
        Shape::List(&Shape::Named("policy", &POLICY)),
        "The policies; the most specific one that matches a queue governs it.",
    ),
    def(
        "tenants",
        Shape::List(&Shape::Fields(&[
            req(
                "tenantId",
                TEXT,
                "The exact tenant id as captured by `{tenant}`.",
            ),
            opt(
                "environment",
                TEXT,
                "The environment the overrides apply in; absent = every environment.",
            ),
            def(
                "overrides",
                STATE_RULES,
                "Rules merged field by field over the policy's and the job rules'.",
            ),
        ])),
        "Per-tenant overrides of the rules.",
    ),
    opt(
        "audit",
        Shape::Fields(&[req(
            "url",
            TEXT,
            "A file (`file://…` or a path) or `postgres://…`; default `./bullsweep-audit.jsonl`.",
        )]),
        "Where the audit trail is stored.",
    ),
    opt(
        "archive",
        Shape::Fields(&[
            req("url", TEXT, "`file:///path` or `s3://bucket/prefix`."),
            opt(
                "compression",
                Shape::Value(Value::Name(compressions)),
                "The only one, and the default.",
            ),
        ]),
        "Where `action: archive` copies jobs; needed by any `action: archive`.",
    ),
    opt(
        "notify",
        Shape::Fields(&[
            opt(
                "webhook",
                Shape::Fields(&[
                    req("url", TEXT, "Where notices are POSTed as JSON."),
                    def(
                        "headers",
                        Shape::Map(&TEXT),
                        "Headers sent with each notice.",
                    ),
                ]),
                "POST each notice as JSON.",
            ),
            def("log", BOOL, "Write each notice to stderr."),
        ]),
        "Where notices go; needed by any `action: notify`.",
    ),
    opt(
        "pii",
        PII,
        "What is personal in job data; needed by any `action: anonymize`.",
    ),
    def(
        "subjects",
        SUBJECTS,
        "Who a job belongs to, for `bullsweep forget`.",
    ),
    opt(
        "schedule",
        SCHEDULE,
        "Daemon: the default schedule of every policy; default `1h`.",
    ),
    opt(
        "timezone",
        TEXT,
        "The IANA time zone cron schedules are read in; default UTC.",
    ),
    opt(
        "cost",
        Shape::Fields(&[
            opt(
                "perGbMonth",
                NUMBER,
                "The price of one GiB of Redis memory for a month, in any currency; default 9.80.",
            ),
            opt(
                "preset",
                Shape::Value(Value::Name(cost_presets)),
                "A managed offer's dated list price, instead of `perGbMonth`.",
            ),
            opt(
                "replicas",
                NUMBER,
                "Replicas holding a copy of every byte, each priced like the primary.",
            ),
            opt(
                "maxLeak",
                NUMBER,
                "How much reclaimable memory may cost per day, for `schedule: auto` and the cost-leak alert.",
            ),
        ]),
        "What Redis memory costs, for `report`, `schedule: auto` and the cost-leak alert.",
    ),
    def(
        "sources",
        Shape::Map(&Shape::Named("source", &SOURCE)),
        "Where source-linked rules look their jobs' records up, by name; each exactly one of `postgres` and `redis`.",
    ),
    opt(
        "doctor",
        Shape::Fields(&[
            opt(
                "schedule",
                SCHEDULE,
                "How often the daemon runs `doctor`; default `24h`; not `auto`.",
            ),
            def(
                "repair",
                Shape::List(&Shape::Value(Value::TrimmedName(doctor_kinds))),
                "The kinds the daemon repairs (or `all`); the other kinds are found and counted only.",
            ),
        ]),
        "Daemon: when it runs `bullsweep doctor`, and which kinds it repairs.",
    ),
    opt(
        "bullBoard",
        Shape::Fields(&[
            req(
                "url",
                TEXT,
                "bull-board's base URL (where its UI is mounted), `http(s)://…/queues`.",
            ),
            opt(
                "queueName",
                TEXT,
                "The name bull-board knows a queue by, from `{queue}`, `{tenant}`, `{env}` and `{prefix}`; default `{queue}`.",
            ),
        ]),
        "Dashboard: link every queue and archived job to its bull-board page.",
    ),
]);

#[cfg(test)]
mod tests;
