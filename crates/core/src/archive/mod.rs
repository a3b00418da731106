//! The archive for `action: archive`: full job records written to segments (zstd-compressed
//! JSON lines, one record per job) named `<tenant>/<env>/<queue>/<YYYY-MM-DD>/…`, each with a
//! manifest, in a local directory or an S3-compatible bucket. A segment is durable (fsynced and
//! renamed into place locally, a completed upload remotely) and read back and verified before
//! any job in it is deleted from Redis.

mod local;
mod record;
mod redact;
mod s3;
mod segment;
mod sink;
mod staging;
mod stream;

pub use local::LocalArchive;
pub use record::{ArchiveRecord, JobCopy, RecordFields};
pub use s3::S3Archive;
pub use segment::{SegmentManifest, SegmentMeta};
pub use sink::ArchiveSink;
pub use stream::{StreamedJob, StreamedSegment};

use segment::{digest_reader, hex};

#[cfg(test)]
mod tests;
