//! The archive a run writes to ([`RunArchive`]), and the sizes archiving works in: jobs per
//! segment, jobs per read, and what makes a job large enough to be streamed alone.

use crate::archive::ArchiveSink;

/// Jobs per archive segment file.
pub(crate) const SEGMENT_JOBS: u64 = 1_000;
/// Jobs read per pipelined round trip while archiving.
pub(crate) const READ_JOBS: usize = 100;
/// A job whose `data` and `returnvalue` (the fields that carry user payloads) hold more than
/// this is archived alone and streamed: read one field and one page of logs at a time.
pub(crate) const LARGE_JOB_BYTES: u64 = 8 << 20;
/// A job with more log lines than this is streamed too.
pub(crate) const LARGE_JOB_LOGS: u64 = 10_000;

/// The archive a run writes to, and the Redis database it writes for (the audit's source
/// id), which every record names.
pub(crate) struct RunArchive {
    /// Where segments go.
    pub sink: ArchiveSink,
    /// The source id of the database the run governs.
    pub source: String,
}
