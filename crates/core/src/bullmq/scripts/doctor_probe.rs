//! The read-only checks `doctor` makes of a batch of one queue's items
//! (`lua/doctor_probe.lua`).

use super::compiled::Scripts;
use super::reply::{Fields, wrong_shape};
use crate::bullmq::keys::QueueKeys;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What a probe call checks of each item (see the script's header for the codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeMode {
    /// Keys `SCAN` found: a hash? in a sorted set? its parent's hash?
    Jobs,
    /// Ids in no sorted set and in no list read: in a list within reach?
    Lists,
    /// Ids read from a state: does the hash exist?
    Missing,
    /// Ids read from `waiting-children`: does any dependency exist?
    Stuck,
}

impl ProbeMode {
    fn as_str(self) -> &'static str {
        match self {
            ProbeMode::Jobs => "jobs",
            ProbeMode::Lists => "lists",
            ProbeMode::Missing => "missing",
            ProbeMode::Stuck => "stuck",
        }
    }

    /// Characters of code per item.
    pub fn width(self) -> usize {
        if self == ProbeMode::Jobs { 2 } else { 1 }
    }
}

/// One probe call's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probed {
    /// Items checked before the budget ran out (the first `handled` of those sent).
    pub handled: usize,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
    /// The codes, [`ProbeMode::width`] characters per handled item.
    pub codes: Vec<u8>,
}

impl Probed {
    /// The code of the `i`-th handled item.
    pub fn code(&self, mode: ProbeMode, i: usize) -> &[u8] {
        let w = mode.width();
        &self.codes[i * w..(i + 1) * w]
    }
}

impl Scripts {
    /// Checks `items` of queue `keys` in `mode`, reading only (see `lua/doctor_probe.lua`).
    pub async fn doctor_probe<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        mode: ProbeMode,
        reach: u64,
        items: &[String],
        budget_us: u64,
    ) -> RedisResult<Probed> {
        let mut args: Vec<String> = vec![
            keys.job_prefix(),
            mode.as_str().to_string(),
            budget_us.to_string(),
            reach.to_string(),
        ];
        args.extend(items.iter().cloned());
        let reply: Value = self.doctor_probe.invoke(con, &[keys.meta()], &args).await?;
        Probed::decode(reply, mode, items.len())
    }
}

impl Probed {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["handled", "elapsedMicros", "codes"];

    /// Decodes the reply by [`Self::LAYOUT`]; the codes must fit the items handled.
    fn decode(reply: Value, mode: ProbeMode, sent: usize) -> RedisResult<Self> {
        let mut f = Fields::of("doctor_probe", Self::LAYOUT, reply)?;
        let handled = f.next("handled").count()? as usize;
        let elapsed_us = f.next("elapsedMicros").count()?;
        let codes = f.next("codes").bytes()?;
        if handled > sent || codes.len() != handled * mode.width() {
            return Err(wrong_shape(
                "doctor_probe",
                &format!(
                    "{} code bytes for {handled} items of {sent} sent",
                    codes.len()
                ),
            ));
        }
        Ok(Probed {
            handled,
            elapsed_us,
            codes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::text;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let reply =
            |h: i64, codes: &str| Value::Array(vec![Value::Int(h), Value::Int(9), text(codes)]);
        let p = Probed::decode(reply(2, "zpl-"), ProbeMode::Jobs, 3).unwrap();
        assert_eq!((p.handled, p.elapsed_us), (2, 9));
        assert_eq!(p.code(ProbeMode::Jobs, 1), b"l-");
        assert!(Probed::decode(reply(2, "zp"), ProbeMode::Jobs, 3).is_err());
        assert!(Probed::decode(reply(4, "0101"), ProbeMode::Missing, 3).is_err());
        let e = Probed::decode(Value::Array(vec![Value::Int(1)]), ProbeMode::Lists, 1).unwrap_err();
        assert!(e.to_string().contains("doctor_probe"), "{e}");
    }
}
