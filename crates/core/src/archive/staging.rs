//! Staging files: where a segment is written before the sink takes it. Each is held by a
//! [`StagingFile`] that removes it whatever fails, and named after its writer,
//! `.<name>.<host>-<pid>.tmp`, so that the next run can tell a file a killed writer left from
//! one being written, on an archive directory that replicas on several hosts share.
//!
//! A file of this host (the same boot and the same PID namespace, so the same `/proc`) is
//! left behind when its pid is gone. A file of another host cannot be judged by its pid (a pid
//! means nothing in another `/proc`), so it counts as left behind only when it is older than
//! [`STALE_STAGING`]; the same goes for a name that does not say its host (`.<name>.<pid>.tmp`
//! and `.<name>.tmp`, written by older versions, perhaps on another host).

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A staging file, removed when dropped: whatever fails between its creation and the sink
/// taking it (a full disk, a Redis error mid-stream, a segment given up), it leaves no copy
/// of job data behind.
pub(super) struct StagingFile(PathBuf);

impl StagingFile {
    /// Guards `path` (the caller creates the file).
    pub(super) fn new(path: PathBuf) -> Self {
        StagingFile(path)
    }

    /// Where it is.
    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for StagingFile {
    fn drop(&mut self) {
        // Gone already once the sink took it; any other error leaves it to the next run.
        let _ = fs::remove_file(&self.0);
    }
}

/// How old a staging file of a live process, of another host or of unknown origin must be to
/// count as left behind: a file being written is touched far more often than this.
pub(super) const STALE_STAGING: std::time::Duration = std::time::Duration::from_secs(3600);

/// Hexadecimal digits of a host's identity in a staging name.
const HOST_DIGITS: usize = 12;

/// This host's identity as staging names carry it: a digest of the boot id (random at each
/// boot, so no two machines share it) and of the PID namespace (containers on one machine
/// share its boot id, not their `/proc`). `None` where either cannot be read (not Linux): a
/// pid cannot be judged there, so this process's files are judged by age like another host's.
fn host_id() -> Option<&'static str> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| {
        let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let namespace = fs::read_link("/proc/self/ns/pid").ok()?;
        let mut sha = Sha256::new();
        sha.update(boot.trim().as_bytes());
        sha.update(b"\n");
        sha.update(namespace.as_os_str().as_encoded_bytes());
        Some(super::hex(&sha.finalize())[..HOST_DIGITS].to_string())
    })
    .as_deref()
}

/// The name of this process's staging file for the object file `file_name`.
pub(super) fn staging_name(file_name: &str) -> String {
    let pid = std::process::id();
    match host_id() {
        Some(host) => format!(".{file_name}.{host}-{pid}.tmp"),
        None => format!(".{file_name}.{pid}.tmp"),
    }
}

/// The writer a staging file's name gives: its host and pid, when it says both.
fn writer_of(file_name: &str) -> Option<(&str, u32)> {
    let (_, writer) = file_name.strip_suffix(".tmp")?.rsplit_once('.')?;
    let (host, pid) = writer.split_once('-')?;
    let hex = host.len() == HOST_DIGITS && host.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then_some(())?;
    Some((host, pid.parse().ok()?))
}

/// Whether the staging file `file_name`, last written `age` ago, was left behind: by a writer
/// of this host that is gone, or, whoever wrote it, more than [`STALE_STAGING`] ago.
fn left_behind(file_name: &str, age: Option<std::time::Duration>) -> bool {
    if age.is_some_and(|age| age > STALE_STAGING) {
        return true;
    }
    match (writer_of(file_name), host_id()) {
        (Some((host, pid)), Some(here)) if host == here => {
            pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
        }
        _ => false,
    }
}

/// Removes, under `dir`, the staging files (`.<name>….tmp`) that killed runs left (see the
/// module's doc). They may hold job data, so none may outlive the next run of its host, or
/// an hour on another. Errors are ignored: this never stops a run.
pub(super) fn remove_stale_staging(dir: &Path) {
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                dirs.push(path);
            } else if name.starts_with('.') && name.ends_with(".tmp") {
                let age = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok());
                if left_behind(&name, age) {
                    let _ = fs::remove_file(&path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_is_read_only_from_a_name_that_says_its_host() {
        assert_eq!(
            writer_of(".s.zst.0123456789ab-42.tmp"),
            Some(("0123456789ab", 42))
        );
        assert_eq!(writer_of(".s.zst.42.tmp"), None);
        assert_eq!(writer_of(".s.zst.tmp"), None);
        assert_eq!(writer_of(".s.zst.0123456789ax-42.tmp"), None);
        assert_eq!(writer_of(".s.zst.0123456789ab-x.tmp"), None);
    }
}
