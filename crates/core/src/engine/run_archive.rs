//! The archive a run writes to ([`RunArchive`]), and the sizes archiving works in: jobs per
//! segment, jobs per read, and what makes a job large enough to be streamed alone.

use crate::archive::ArchiveSink;
use bullsweep_policy::ArchiveTarget;
use redis::aio::ConnectionLike;

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

/// Opens the archive at `target` for a run on the database `con` reaches: the sink, checked
/// writable, with that database's source id; why not when it cannot be.
pub(crate) async fn open_run_archive<C: ConnectionLike>(
    con: &mut C,
    target: &ArchiveTarget,
) -> Result<RunArchive, String> {
    let sink = ArchiveSink::open(target).map_err(|e| e.to_string())?;
    sink.check_writable().await.map_err(|e| e.to_string())?;
    match with_retry!(crate::audit::source_of(con)) {
        Ok(source) => Ok(RunArchive {
            sink,
            source: source.id,
        }),
        Err(e) => Err(format!("cannot read this database's source id: {e}")),
    }
}
