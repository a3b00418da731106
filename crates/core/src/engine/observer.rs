//! What a plan or run tells as it goes ([`Event`]), pushed to an [`Observer`]: the CLI's
//! progress bar, the daemon's metrics, logs and history each consume the events instead of
//! recounting the report afterwards. One producer, many consumers, no shared counters.

/// Why selected jobs were left alone: the key of the report's table of reasons
/// ([`SkipReason::text`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Held by a worker's lock.
    Locked,
    /// The hash is malformed.
    Malformed,
    /// Moved or re-finished between selection and the action.
    Changed,
    /// A flow still waits: the parent waits for its other children (`protectWaitingParents`),
    /// or the job is a finished parent waiting for a child retried since.
    ParentWaiting,
    /// On a Redis Cluster, the parent lives in another slot.
    CrossSlot,
    /// Restored from the archive and held until the hold ends.
    Restored,
    /// Archive: an id without a job hash.
    Dangling,
    /// Anonymize: scrubbed by an earlier run.
    AlreadyAnonymized,
    /// A repeat chain's next iteration: a job scheduler's current one (`Job.remove()` refuses
    /// it too) or a repeatable job's of either library, whose chain would end with it.
    Scheduler,
    /// Further into a long wait list than a bounded removal looks.
    OutOfReach,
    /// A source-linked job whose data holds no key at the link's path.
    NoSourceKey,
    /// A source-linked job whose source could not be asked (down, slow or failing).
    SourceUnavailable,
    /// A flow parent with a child in another queue, under `childrenInOtherQueues: keepParent`.
    ChildrenElsewhere,
    /// An unlocked active job of a legacy Bull queue that Bull's stalled check has not
    /// confirmed yet (a worker may be taking it).
    Unconfirmed,
    /// A source-linked job whose key its source refuses (a NUL byte, a value the query
    /// cannot take).
    RefusedSourceKey,
    /// Notify: named by an earlier notice (or by one another run is delivering), and not due
    /// for a reminder.
    AlreadyNoticed,
    /// Notify: past the jobs one notice names; the next run's notice names it.
    NoticeLater,
}

impl SkipReason {
    /// Every reason, in the order the report lists them.
    pub const ALL: [SkipReason; 17] = [
        SkipReason::Locked,
        SkipReason::Malformed,
        SkipReason::Changed,
        SkipReason::ParentWaiting,
        SkipReason::CrossSlot,
        SkipReason::Restored,
        SkipReason::Dangling,
        SkipReason::AlreadyAnonymized,
        SkipReason::Scheduler,
        SkipReason::OutOfReach,
        SkipReason::NoSourceKey,
        SkipReason::SourceUnavailable,
        SkipReason::ChildrenElsewhere,
        SkipReason::Unconfirmed,
        SkipReason::RefusedSourceKey,
        SkipReason::AlreadyNoticed,
        SkipReason::NoticeLater,
    ];

    /// The reason as the report words it after the count (`3 held by a worker's lock`).
    pub fn text(self) -> &'static str {
        match self {
            SkipReason::Locked => "held by a worker's lock",
            SkipReason::Malformed => {
                "malformed (not a hash, finishedOn missing or unequal to its score, logs that are not a list, or, to anonymize, data that pii paths cannot be applied to: not JSON, or nested deeper than 128 levels)"
            }
            SkipReason::Changed => "changed since selection",
            SkipReason::ParentWaiting => {
                "wait on their flow: a finished child for its parent's other children (protectWaitingParents), or a finished parent for a child retried since"
            }
            SkipReason::CrossSlot => {
                "have their flow's parent under another hash tag: on a Redis Cluster it lives in another slot, so BullMQ cannot run such a flow there either; left untouched"
            }
            SkipReason::Restored => {
                "restored from the archive and held until their hold ends (archive restore --hold)"
            }
            SkipReason::Dangling => {
                "dangling ids (no job hash): nothing to copy, so not archived; left in the set"
            }
            SkipReason::AlreadyAnonymized => "already anonymized by an earlier run",
            SkipReason::Scheduler => {
                "the next iteration of a repeat chain (a job scheduler's, which BullMQ's Job.remove refuses too, or a repeatable job's of BullMQ or Bull): the library adds the one after it only when it runs, so taking it would end the chain"
            }
            SkipReason::OutOfReach => {
                "further into a long wait list than a bounded removal looks; met by a later run"
            }
            SkipReason::NoSourceKey => "hold no key at the source link's path; left alone",
            SkipReason::SourceUnavailable => {
                "their source could not be asked (down, slow or failing); nothing was done to them"
            }
            SkipReason::ChildrenElsewhere => {
                "have flow children in another queue, which their removal would take along; left alone with their children (childrenInOtherQueues: keepParent)"
            }
            SkipReason::Unconfirmed => {
                "not confirmed stalled by Bull's own rule yet: a Bull worker takes a job into active before it locks it, so a job is taken only when a stalled check (a Bull worker's, or a run's, at most one per 30 s) finds it still unlocked in active after an earlier check marked it there and no worker took it since; a later run confirms them"
            }
            SkipReason::RefusedSourceKey => {
                "have a key their source refuses (a NUL byte, or a value the query cannot take); nothing was done to them"
            }
            SkipReason::AlreadyNoticed => {
                "already noticed: each job is noticed once, and again only when it comes back as another job (retried into this state, or its id reused) or, with remindEvery on its rule, when a reminder is due"
            }
            SkipReason::NoticeLater => {
                "past the 1,000 jobs one notice names; the next run notices them"
            }
        }
    }
}

/// One thing that happened during a plan or run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Jobs acted on (removed, archived once their copy is durable, scrubbed, moved, retried,
    /// turned cold): the count a progress bar adds up.
    Progress {
        /// How many.
        acted: u64,
    },
    /// One script call of the batch loop finished.
    BatchDone {
        /// Items the call looked at.
        handled: u64,
        /// Jobs the call acted on (also told as [`Event::Progress`]).
        acted: u64,
        /// Time the call held Redis, as Redis measured it, in microseconds.
        elapsed_us: u64,
    },
    /// Selected jobs a call left alone.
    Skipped {
        /// Why.
        reason: SkipReason,
        /// How many.
        count: u64,
    },
    /// A source could not be asked about a batch of keys: nothing was done to those jobs.
    SourceFailed {
        /// The source's name in `sources:`.
        source: &'a str,
        /// What failed (`unreachable`, `timeout`, `query`, `auth`).
        kind: &'a str,
    },
    /// Flow jobs a call took along with the jobs it acted on.
    TakenAlong {
        /// Parents removed with their last child (same queue).
        parents_removed: u64,
        /// Parents released to wait (moved, not removed).
        parents_released: u64,
        /// Children removed with their removed parent.
        children_removed: u64,
    },
    /// A step of one queue (a state, `stalled`, `failed:exhausted`, …) is done, failed or
    /// not: its action and how many jobs it acted on (0 in a plan).
    StateDone {
        /// The queue's key base.
        queue: &'a str,
        /// The step, as the report names it.
        state: &'a str,
        /// The step's action, as the report labels it.
        action: &'a str,
        /// Jobs acted on.
        done: u64,
    },
}

/// Receives a plan's or run's events, from every queue and shard of it (hence `Sync`).
pub trait Observer: Sync {
    /// Takes one event; called between batches, never while a script runs.
    fn event(&self, event: &Event<'_>);
}

/// An observer that ignores every event, for callers that only want the report.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn event(&self, _: &Event<'_>) {}
}

/// Passes every event on but [`Event::Progress`]: for a step whose jobs count as done later
/// (an archive batch, once its copies are durable).
pub(crate) struct WithoutProgress<'a>(pub &'a dyn Observer);

impl Observer for WithoutProgress<'_> {
    fn event(&self, event: &Event<'_>) {
        if !matches!(event, Event::Progress { .. }) {
            self.0.event(event)
        }
    }
}
