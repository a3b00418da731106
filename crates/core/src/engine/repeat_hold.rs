//! A repeat chain's next iteration held out of what a page of a rule removes or archives
//! (pending rules, source links), in a plan as in a run: the chain would end with it
//! ([`crate::bullmq::repeat_chain`]). `job_remove.lua` holds it again in the call that would
//! remove it; counting it here first makes the plan show what the run leaves.

use super::observer::{Event, SkipReason};
use super::options::Mode;
use super::queue_run::QueueRun;
use super::report::Skipped;
use crate::bullmq::QueueKeys;
use crate::bullmq::repeat_chain::next_iterations;
use crate::error::Result;
use redis::aio::ConnectionLike;

impl QueueRun<'_> {
    /// Takes out of `items` every repeat chain's next iteration among those `taken` names (the
    /// id of an item the page would remove or archive; `None` for one it only lists in a
    /// notice). Returns how many, counted in `skipped` as `scheduler` (and told to the
    /// observer in a run).
    pub(super) async fn hold_repeat_chains<C: ConnectionLike, T>(
        &self,
        con: &mut C,
        items: &mut Vec<T>,
        taken: impl Fn(&T) -> Option<&str>,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let keys = QueueKeys::of(self.queue);
        let ids: Vec<&str> = items.iter().map(|t| taken(t).unwrap_or("")).collect();
        let held = with_retry!(next_iterations(con, &keys, &ids))?;
        let before = items.len();
        let mut flags = held.into_iter();
        items.retain(|_| !flags.next().unwrap_or(false));
        let count = (before - items.len()) as u64;
        skipped.add(SkipReason::Scheduler, count);
        if count > 0 && self.mode == Mode::Run {
            let reason = SkipReason::Scheduler;
            self.observer.event(&Event::Skipped { reason, count });
        }
        Ok(count)
    }
}
