//! The drop step of an archive batch: staged entries freed once their copies are durable, or
//! once they were put back (`lua/drop_staged.lua`).

use super::compiled::Scripts;
use super::reply::{Fields, wrong_shape};
use crate::bullmq::keys::{QueueKeys, StagedBatch, staging_index};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What one `drop_staged` call found (see `lua/drop_staged.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropStep {
    /// The tail was freed; this many entries remain.
    Dropped(u64),
    /// The list does not have the length the caller expected: it has this many entries.
    Length(u64),
    /// Entry `n` is not the caller's (or, putting back, its staged hash is still there).
    NotOurs(u64),
}

/// Which entries a drop may free.
#[derive(Clone, Copy, Debug)]
pub enum DropTail<'a> {
    /// These, the list's last entries: their copies are durable.
    Copied(&'a [Vec<u8>]),
    /// The last `k`, whose staged hashes must already be gone (put back).
    Gone(u64),
}

impl Scripts {
    /// Frees the last entries of a staged batch whose list has `len` entries, and the batch
    /// itself with its last entry, after checking them (see `lua/drop_staged.lua`).
    pub async fn drop_staged<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        batch: &StagedBatch,
        len: u64,
        tail: DropTail<'_>,
    ) -> RedisResult<DropStep> {
        let mut invocation = self.drop_staged.of(keys).prepare_invoke();
        invocation
            .key(batch.list())
            .key(staging_index(keys.base()))
            .arg(batch.name())
            .arg(len);
        match tail {
            DropTail::Copied(entries) => {
                invocation.arg("copied");
                for e in entries {
                    invocation.arg(e.as_slice());
                }
            }
            DropTail::Gone(k) => {
                invocation.arg("gone").arg(k);
            }
        }
        DropStep::decode(invocation.invoke_async(con).await?)
    }
}

impl DropStep {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["code", "n"];

    /// Decodes `{0, remaining}`, `{1, length}` or `{2, n}`.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("drop_staged", Self::LAYOUT, reply)?;
        let code = f.next("code").count()?;
        let n = f.next("n").count()?;
        match code {
            0 => Ok(DropStep::Dropped(n)),
            1 => Ok(DropStep::Length(n)),
            2 => Ok(DropStep::NotOurs(n)),
            _ => Err(wrong_shape("drop_staged", "`code` should be 0, 1 or 2")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::ints;
    use super::*;

    #[test]
    fn decodes_each_code_and_refuses_another_shape() {
        assert_eq!(
            DropStep::decode(ints(&[0, 4])).unwrap(),
            DropStep::Dropped(4)
        );
        assert_eq!(
            DropStep::decode(ints(&[1, 9])).unwrap(),
            DropStep::Length(9)
        );
        assert_eq!(
            DropStep::decode(ints(&[2, 3])).unwrap(),
            DropStep::NotOurs(3)
        );
        assert!(DropStep::decode(ints(&[3, 3])).is_err());
        let e = DropStep::decode(ints(&[0])).unwrap_err();
        assert!(e.to_string().contains("drop_staged"), "{e}");
    }
}
