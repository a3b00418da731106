//! Batch sizing by time: each call's size follows the rate Redis reported for the last one,
//! so a call takes about the time budget whatever the jobs cost.

/// Fewest jobs one call looks at.
const MIN_LIMIT: u64 = 16;
/// Most jobs one call looks at; the script's own clock check stops it earlier when needed.
const MAX_LIMIT: u64 = 5_000;

/// Adapts the number of jobs per Lua call to a time budget.
#[derive(Clone, Debug)]
pub struct BatchSizer {
    budget_us: u64,
    limit: u64,
}

impl BatchSizer {
    /// Starts small; the first measured call sets the pace.
    pub fn new(budget_us: u64) -> Self {
        BatchSizer {
            budget_us: budget_us.max(1),
            limit: 64,
        }
    }

    /// Jobs the next call may look at.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Records that a call handled `jobs` in `elapsed_us` (as measured inside Redis).
    pub fn observe(&mut self, jobs: u64, elapsed_us: u64) {
        if jobs == 0 {
            return;
        }
        // Aim a little past the budget: the script stops itself once the budget is spent, so
        // the limit only needs to be large enough not to end a call early.
        let per_job = elapsed_us.max(1) as f64 / jobs as f64;
        let fit = (self.budget_us as f64 * 1.25 / per_job) as u64;
        // Grow at most fourfold per call, so one cheap batch cannot jump to the cap.
        self.limit = fit
            .min(self.limit.saturating_mul(4))
            .clamp(MIN_LIMIT, MAX_LIMIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_measured_rate() {
        let mut s = BatchSizer::new(2_000);
        for _ in 0..10 {
            s.observe(s.limit(), s.limit() * 4); // 4 µs per job
        }
        assert_eq!(s.limit(), 625);
        s.observe(100, 10_000); // suddenly 100 µs per job
        assert_eq!(s.limit(), 25);
        s.observe(0, 0);
        assert_eq!(s.limit(), 25, "an empty call says nothing about the rate");
        s.observe(25, 1);
        assert_eq!(s.limit(), 100, "growth is capped at 4x");
    }

    #[test]
    fn stays_within_bounds() {
        let mut s = BatchSizer::new(2_000);
        s.observe(1, 1_000_000);
        assert_eq!(s.limit(), MIN_LIMIT);
        for _ in 0..20 {
            s.observe(1_000_000, 1);
        }
        assert_eq!(s.limit(), MAX_LIMIT);
    }
}
