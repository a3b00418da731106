//! `bullBoard:`: where a team's bull-board is and the name it knows a queue by, for the
//! dashboard's links (built in the dashboard's `links`).

/// The placeholders `queueName` may use.
pub(crate) const NAME_PLACEHOLDERS: [&str; 4] = ["queue", "tenant", "env", "prefix"];

/// The validated `bullBoard:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BullBoard {
    /// bull-board's base URL, without a trailing `/`.
    pub url: String,
    /// The template of the name bull-board knows a queue by (`{queue}`, `{tenant}`, `{env}`,
    /// `{prefix}`); `{queue}` by default.
    pub queue_name: String,
}
