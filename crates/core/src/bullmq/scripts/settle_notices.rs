//! Settling the claims of a notice once it was delivered (or could not be), with its audit
//! event in the same call (`lua/settle_notices.lua`).

use super::audit_keys::audited;
use super::claim_notices::NoticeClaim;
use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::{QueueKeys, audit_tag, notice_record};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// How a notice's delivery ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Delivered: each claim becomes the record that its job was noticed.
    Noticed,
    /// Not delivered: each claim is dropped, and the next run notices the jobs again.
    Released,
}

/// The audit event a settling call appends: the notice's context and every job it listed.
#[derive(Clone, Copy, Debug)]
pub struct NoticeEvent<'a> {
    /// The audit context, as JSON.
    pub ctx: &'a str,
    /// The ids the notice listed.
    pub ids: &'a [String],
}

impl Scripts {
    /// Settles `claims` of a notice at `place` as `delivery` says, appending `event` (when
    /// given) in the same call; returns how many claims it settled (the others were taken
    /// over since).
    pub async fn settle_notices<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        place: &str,
        delivery: Delivery,
        event: Option<NoticeEvent<'_>>,
        claims: &[NoticeClaim],
    ) -> RedisResult<u64> {
        let mut invocation = self.settle_notices.prepare_invoke();
        let ids = event
            .map(|e| serde_json::to_string(e.ids).unwrap_or_else(|_| "[]".into()))
            .unwrap_or_else(|| "[]".into());
        invocation
            .key(notice_record(keys.base()))
            .arg(place)
            .arg(match delivery {
                Delivery::Noticed => "noticed",
                Delivery::Released => "released",
            })
            .arg(event.map_or("", |e| e.ctx))
            .arg(ids);
        for c in claims {
            invocation.arg(&c.id).arg(&c.claim);
        }
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        let reply: Value = invocation.invoke_async(con).await?;
        let mut f = Fields::of("settle_notices", &["settled", "seq"], reply)?;
        let settled = f.next("settled").count()?;
        f.next("seq").count()?;
        Ok(settled)
    }
}
