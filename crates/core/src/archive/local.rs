//! The local directory sink: every object is written to a staging file, fsynced, linked into
//! place, and its directory fsynced, so a name that exists holds its whole content. The link
//! fails when the name exists: a write never replaces another object. A staging file is
//! removed whatever fails, so no copy of job data outlives a failed write (`staging`).

use super::staging::{StagingFile, remove_stale_staging, staging_name};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A local directory archive.
#[derive(Clone, Debug)]
pub struct LocalArchive {
    root: PathBuf,
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl LocalArchive {
    /// An archive rooted at `root` (created on first write).
    pub fn new(root: &Path) -> Self {
        LocalArchive {
            root: root.to_path_buf(),
        }
    }

    /// Checks that the root can be created and written, and removes the staging files that
    /// runs killed mid-write left (see [`super::staging`]).
    pub fn check_writable(&self) -> io::Result<()> {
        remove_stale_staging(&self.root);
        fs::create_dir_all(&self.root).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create {}: {e}", self.root.display()),
            )
        })?;
        // One probe per process: two runs opening one archive at once must not remove each
        // other's.
        let probe = self
            .root
            .join(format!(".bullsweep-write-check-{}", std::process::id()));
        File::create(&probe)
            .and_then(|mut f| f.write_all(b"ok").and_then(|_| f.sync_all()))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot write in {}: {e}", self.root.display()),
                )
            })?;
        fs::remove_file(probe)
    }

    /// Writes `name` (a `/`-separated path under the root) durably: staged, fsynced, linked
    /// into place. A name that exists is not replaced (`AlreadyExists`).
    pub(super) fn put(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let staged = StagingFile::new(self.staging_path(name)?);
        let mut f = File::create(staged.path())?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        self.put_staged(name, staged.path())
    }

    /// A staging file beside `name`'s final place (its directory created).
    pub(super) fn staging_path(&self, name: &str) -> io::Result<PathBuf> {
        let path = self.root.join(name);
        let dir = path
            .parent()
            .map_or_else(|| self.root.clone(), Path::to_path_buf);
        fs::create_dir_all(&dir)?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(dir.join(staging_name(&file_name)))
    }

    /// Links a staged, fsynced file into place as `name`, removes the staging name, and
    /// fsyncs the directory. Unlike a rename, the link refuses a name that exists
    /// (`AlreadyExists`), atomically: two writers of one name never replace each other.
    /// A file system without hard links (FAT, some FUSE mounts) gets a look, then a rename:
    /// names are unique by construction, so no other writer races for the name between them.
    pub(super) fn put_staged(&self, name: &str, staged: &Path) -> io::Result<()> {
        let path = self.root.join(name);
        let linked = match fs::hard_link(staged, &path) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Unsupported | io::ErrorKind::PermissionDenied
                ) =>
            {
                if path.try_exists()? {
                    Err(io::Error::from(io::ErrorKind::AlreadyExists))
                } else {
                    fs::rename(staged, &path)
                }
            }
            other => other,
        };
        let _ = fs::remove_file(staged);
        linked.map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => io::Error::new(
                e.kind(),
                format!("{name} exists in the archive; it was not replaced"),
            ),
            _ => e,
        })?;
        sync_dir(path.parent().unwrap_or(&self.root))
    }

    /// Deletes `name` and fsyncs its directory; a name already gone is not an error.
    pub(super) fn remove(&self, name: &str) -> io::Result<()> {
        let path = self.root.join(name);
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(path.parent().unwrap_or(&self.root)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Size and SHA-256 of `name`, read in blocks.
    pub(super) fn digest(&self, name: &str) -> io::Result<(u64, String)> {
        super::digest_reader(File::open(self.root.join(name))?)
    }

    /// Reads `name`.
    pub(super) fn get(&self, name: &str) -> io::Result<Vec<u8>> {
        fs::read(self.root.join(name))
    }

    /// Every manifest under the root, as `/`-separated names.
    pub(super) fn manifest_names(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in entries {
                let path = entry?.path();
                let hidden = path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'));
                if path.is_dir() {
                    stack.push(path);
                } else if !hidden && path.to_string_lossy().ends_with(".manifest.json") {
                    let rel = path.strip_prefix(&self.root).unwrap_or(&path);
                    out.push(
                        rel.components()
                            .map(|c| c.as_os_str().to_string_lossy())
                            .collect::<Vec<_>>()
                            .join("/"),
                    );
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    /// A pid no process has (above any `pid_max`).
    const NO_PID: u32 = 99_999_999;

    #[test]
    fn only_this_hosts_files_are_judged_by_pid_others_by_age() {
        let dir = tempfile::tempdir().expect("dir");
        let archive = LocalArchive::new(dir.path());
        let mine = archive.staging_path("q/seg-a.jsonl.zst").expect("path");
        let q = dir.path().join("q");
        let own = mine
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let writer = own.strip_suffix(".tmp").and_then(|s| s.rsplit_once('.'));
        let pid = std::process::id().to_string();
        assert!(
            writer.is_some_and(|(_, w)| w.ends_with(&format!("-{pid}")) && w.len() > pid.len()),
            "the name says its host and pid: {own}"
        );
        let dead_here = own.replace(&format!("-{pid}.tmp"), &format!("-{NO_PID}.tmp"));
        let other_host = format!(".seg-b.jsonl.zst.0123456789ab-{NO_PID}.tmp");
        let old_format = format!(".seg-c.jsonl.zst.{NO_PID}.tmp");
        let no_pid = ".seg-d.jsonl.zst.tmp".to_string();
        let other_old = format!(".seg-e.jsonl.zst.0123456789ab-{NO_PID}.tmp");
        let old_format_old = format!(".seg-f.jsonl.zst.{NO_PID}.tmp");
        for name in [
            &own,
            &dead_here,
            &other_host,
            &old_format,
            &no_pid,
            &other_old,
            &old_format_old,
        ] {
            fs::write(q.join(name), b"job data").expect("write");
        }
        let hours_ago = SystemTime::now() - Duration::from_secs(2 * 3600);
        for name in [&other_old, &old_format_old] {
            let f = fs::File::options()
                .write(true)
                .open(q.join(name))
                .expect("open");
            f.set_modified(hours_ago).expect("mtime");
        }

        remove_stale_staging(dir.path());
        let mut left: Vec<String> = fs::read_dir(&q)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut kept = vec![own, other_host, old_format, no_pid];
        kept.sort();
        assert_eq!(
            left, kept,
            "this host's dead writer's file and files over an hour old go; another host's \
             live-looking file and names without a host stay"
        );
    }
}
