//! Which finished jobs a rule selects, as pure arithmetic over sorted-set scores.
//!
//! A finished set is ordered by `finishedOn` (its score). `maxAge` selects a prefix (all
//! scores at or below a cutoff), `maxCount` selects a prefix (all but the newest N), and
//! `keepFor` bounds both (nothing newer than its cutoff). The union of two prefixes cut by a
//! third is again a prefix, which lets one bounded script walk a set from its oldest end.

use crate::resolve::EffectiveRule;

/// Why a rule selects a job or keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Selected: finished longer ago than `maxAge`.
    ByAge,
    /// Selected: older than the newest `maxCount` of its group.
    ByCount,
    /// Kept: `maxAge` or `maxCount` would select it, but it is inside `keepFor`.
    InGrace,
    /// Kept: neither `maxAge` nor `maxCount` selects it.
    NotSelected,
}

/// A rule turned into score cutoffs at a given instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// Jobs with a score at or below this are past `maxAge`.
    pub age_cutoff: Option<i64>,
    /// Keep the newest N jobs; the rest are past `maxCount`.
    pub keep_newest: Option<u64>,
    /// Jobs with a score above this are inside `keepFor` and are never selected.
    pub grace_cutoff: Option<i64>,
}

impl Selection {
    /// The selection a rule makes at `now_ms` (milliseconds since the epoch).
    pub fn at(rule: &EffectiveRule, now_ms: i64) -> Selection {
        Selection {
            age_cutoff: rule.max_age.as_ref().map(|a| a.value.before(now_ms)),
            keep_newest: rule.max_count.as_ref().map(|c| c.value),
            grace_cutoff: rule.keep_for.as_ref().map(|k| k.value.before(now_ms)),
        }
    }

    /// Whether the rule can select anything at all.
    pub fn selects_anything(&self) -> bool {
        self.age_cutoff.is_some() || self.keep_newest.is_some()
    }

    /// Whether a job is selected, given its score and how many jobs of its group are newer.
    pub fn selects(&self, score: i64, newer: u64) -> bool {
        matches!(
            self.verdict(score, newer),
            Verdict::ByAge | Verdict::ByCount
        )
    }

    /// Why a job is selected or kept, given its score and how many jobs of its group are
    /// newer: past `maxAge` (first), past `maxCount`, inside `keepFor`, or neither.
    pub fn verdict(&self, score: i64, newer: u64) -> Verdict {
        let by_age = self.age_cutoff.is_some_and(|c| score <= c);
        let by_count = self.keep_newest.is_some_and(|n| newer >= n);
        let in_grace = self.grace_cutoff.is_some_and(|g| score > g);
        match (by_age, by_count, in_grace) {
            (true, _, false) => Verdict::ByAge,
            (false, true, false) => Verdict::ByCount,
            (true, _, true) | (_, true, true) => Verdict::InGrace,
            (false, false, _) => Verdict::NotSelected,
        }
    }

    /// Whether a job is selected on its own score alone, as the event-driven path decides:
    /// past `maxAge`, or `maxCount: 0`, and not inside `keepFor`. A job a `maxCount` above zero
    /// might select is left to the periodic sweep, which counts.
    pub fn selects_alone(&self, score: i64) -> bool {
        self.alone_bound().is_some_and(|bound| score <= bound)
    }

    /// The highest score [`Selection::selects_alone`] accepts; `None` when it accepts none.
    pub fn alone_bound(&self) -> Option<i64> {
        let by_rule = if self.keep_newest == Some(0) {
            Some(i64::MAX)
        } else {
            self.age_cutoff
        };
        by_rule.map(|b| b.min(self.grace_cutoff.unwrap_or(i64::MAX)))
    }

    /// How many of the oldest jobs are selected, given the set's size and how many jobs have
    /// a score at or below the age and grace cutoffs.
    pub fn prefix_len(&self, total: u64, at_or_below_age: u64, at_or_below_grace: u64) -> u64 {
        let by_age = if self.age_cutoff.is_some() {
            at_or_below_age
        } else {
            0
        };
        let by_count = self.keep_newest.map_or(0, |n| total.saturating_sub(n));
        let selected = by_age.max(by_count);
        if self.grace_cutoff.is_some() {
            selected.min(at_or_below_grace)
        } else {
            selected
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn count_le(scores: &[i64], cutoff: Option<i64>) -> u64 {
        cutoff.map_or(0, |c| scores.iter().filter(|s| **s <= c).count() as u64)
    }

    proptest! {
        /// The prefix count equals the per-job decision applied to every job.
        #[test]
        fn prefix_agrees_with_per_job_decision(
            mut scores in proptest::collection::vec(0i64..100, 0..60),
            age in proptest::option::of(0i64..100),
            keep in proptest::option::of(0u64..70),
            grace in proptest::option::of(0i64..100),
        ) {
            scores.sort();
            let sel = Selection { age_cutoff: age, keep_newest: keep, grace_cutoff: grace };
            let n = scores.len();
            let per_job = scores.iter().enumerate()
                .filter(|(i, s)| sel.selects(**s, (n - 1 - i) as u64))
                .count() as u64;
            let prefix = sel.prefix_len(n as u64, count_le(&scores, age), count_le(&scores, grace));
            prop_assert_eq!(per_job, prefix);
            // And the selected jobs really are a prefix.
            let flags: Vec<bool> = scores.iter().enumerate()
                .map(|(i, s)| sel.selects(*s, (n - 1 - i) as u64)).collect();
            prop_assert!(flags.windows(2).all(|w| w[0] || !w[1]));
        }
    }

    #[test]
    fn alone_means_age_or_keep_none_outside_grace() {
        let sel = |age, keep, grace| Selection {
            age_cutoff: age,
            keep_newest: keep,
            grace_cutoff: grace,
        };
        assert!(sel(Some(100), None, None).selects_alone(100));
        assert!(!sel(Some(100), None, None).selects_alone(101));
        assert!(sel(None, Some(0), None).selects_alone(i64::MAX));
        assert!(!sel(None, Some(5), None).selects_alone(0));
        assert!(!sel(None, Some(0), Some(50)).selects_alone(60));
        assert!(!sel(None, None, None).selects_alone(0));
        assert_eq!(sel(Some(100), None, Some(50)).alone_bound(), Some(50));
        assert_eq!(sel(None, Some(0), None).alone_bound(), Some(i64::MAX));
        assert_eq!(sel(None, Some(3), None).alone_bound(), None);
    }

    #[test]
    fn examples() {
        let sel = Selection {
            age_cutoff: Some(50),
            keep_newest: Some(2),
            grace_cutoff: Some(90),
        };
        assert!(sel.selects(10, 5));
        assert!(sel.selects(60, 2), "older than the newest two");
        assert!(!sel.selects(60, 1), "one of the newest two, and young");
        assert!(!sel.selects(95, 9), "inside keepFor");
        let none = Selection {
            age_cutoff: None,
            keep_newest: None,
            grace_cutoff: None,
        };
        assert!(!none.selects_anything());
        assert!(!none.selects(0, 100));
    }
}
