//! Claiming, in a queue's record of noticed jobs, the jobs a notice lists
//! (`lua/claim_notices.lua`), and, for a plan, which jobs a run would claim (its read-only
//! build).

use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::{QueueKeys, notice_record};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// How long a claim holds, ms: a run that claimed jobs for a notice has this long to deliver
/// it and settle the claims (`settle_notices`); past it, another run takes the claimer as
/// stopped and notices the jobs itself. Longer than a run's deliveries take (each notice at
/// most four attempts of 10 s), short enough that a crashed run's jobs are noticed soon.
pub const CLAIM_HOLDS_MS: u64 = 15 * 60_000;

/// A job offered to a notice: its id, and how long after its last notice it is noticed again
/// (`remindEvery`; `None`: once).
#[derive(Clone, Copy, Debug)]
pub struct NoticeOffer<'a> {
    /// The job id.
    pub id: &'a str,
    /// Its rule's `remindEvery`, in ms.
    pub remind_every_ms: Option<u64>,
}

/// A job claimed for a notice: its id, and the claim as the record holds it (settled only if
/// the record still holds it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoticeClaim {
    /// The job id.
    pub id: String,
    /// The record's value the claim wrote.
    pub claim: String,
}

/// What one `claim_notices` call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claimed {
    /// Offers looked at before the budget or `most` stopped the call.
    pub handled: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
    /// The jobs claimed.
    pub claims: Vec<NoticeClaim>,
}

/// How a call claims: a run's claims what is due, judged by Redis's clock, in calls of a time
/// budget; a plan's (the script's read-only build) claims nothing and says which jobs a run
/// would claim, judged at the plan's time (a read-only user may not read Redis's clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claiming {
    /// A run's, each call within `budget_us` microseconds.
    Claim {
        /// The call's time budget.
        budget_us: u64,
    },
    /// A plan's, judged at `now_ms`.
    Count {
        /// The time the jobs are judged at, ms since the epoch.
        now_ms: i64,
    },
}

impl Scripts {
    /// Claims (or, `Claiming::Count`, counts without claiming), for a notice at `place` (the
    /// state its report names), up to `most` of `offers` that are due (see
    /// `lua/claim_notices.lua`).
    pub async fn claim_notices<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        (place, offers): (&str, &[NoticeOffer<'_>]),
        most: u64,
        how: Claiming,
    ) -> RedisResult<Claimed> {
        let (budget, now) = match how {
            // Judged by Redis's clock.
            Claiming::Claim { budget_us } => (budget_us.to_string(), String::new()),
            // No budget: the read-only build reads no clock.
            Claiming::Count { now_ms } => ("0".to_string(), now_ms.to_string()),
        };
        let mut args = vec![
            keys.job_prefix(),
            place.to_string(),
            CLAIM_HOLDS_MS.to_string(),
            most.to_string(),
            budget,
            now,
        ];
        for o in offers {
            args.push(o.id.to_string());
            args.push(o.remind_every_ms.unwrap_or(0).to_string());
        }
        let record = notice_record(keys.base());
        let reply: Value = match how {
            Claiming::Claim { .. } => {
                let mut invocation = self.claim_notices.key(record);
                invocation.arg(&args).invoke_async(con).await?
            }
            Claiming::Count { .. } => self.notices_due.invoke(con, &[record], &args).await?,
        };
        Claimed::decode(reply)
    }
}

impl Claimed {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["handled", "elapsedMicros", "claimed"];

    /// Decodes the reply by [`Self::LAYOUT`].
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("claim_notices", Self::LAYOUT, reply)?;
        let handled = f.next("handled").count()?;
        let elapsed_us = f.next("elapsedMicros").count()?;
        let claims = f
            .next("claimed")
            .rows(&["id", "claim"])?
            .into_iter()
            .map(|mut row| {
                Ok(NoticeClaim {
                    id: row.next("id").text()?,
                    claim: row.next("claim").text()?,
                })
            })
            .collect::<RedisResult<Vec<_>>>()?;
        Ok(Claimed {
            handled,
            elapsed_us,
            claims,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_a_claim_without_its_pair() {
        let claimed = Value::Array(vec![
            Value::Int(3),
            Value::Int(120),
            sample::texts(&["7", "c:1:5,,,"]),
        ]);
        let out = Claimed::decode(claimed).expect("decodes");
        assert_eq!((out.handled, out.elapsed_us), (3, 120));
        assert_eq!(
            out.claims,
            vec![NoticeClaim {
                id: "7".into(),
                claim: "c:1:5,,,".into()
            }]
        );
        let odd = Value::Array(vec![Value::Int(1), Value::Int(1), sample::texts(&["7"])]);
        let e = Claimed::decode(odd).expect_err("a lone id");
        assert!(e.to_string().contains("claim_notices"), "{e}");
    }
}
