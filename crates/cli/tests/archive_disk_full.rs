//! Issue 24, finding 6: a write that fails (here a full disk: the archive is a 128 KiB tmpfs)
//! leaves no staging file holding job data behind, on the batch path and on the streamed path
//! of an oversized job, and every job stays in Redis.

mod common;

use common::*;
use redis::Commands;
use std::process::Command;

/// `n` bytes of hex that zstd cannot shrink much (a xorshift stream).
fn noise(seed: u64, n: usize) -> String {
    let mut x = seed | 1;
    let mut out = String::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(&format!("{x:016x}"));
    }
    out.truncate(n);
    out
}

#[test]
fn a_full_disk_leaves_no_staging_file_and_no_job_lost() {
    let w = World::new();
    let now = now_ms();
    // `mail`: 200 ordinary jobs whose segment cannot fit; `big`: one streamed 9 MB job.
    w.seed(spec("bull:mail", 200, 0, 1), now);
    w.seed(spec("bull:big", 1, 0, 1), now);
    let mut con = w.con();
    for id in 1..=200 {
        let data = format!(r#"{{"blob":"{}"}}"#, noise(id, 4096));
        let _: () = con
            .hset(format!("bull:mail:{id}"), "data", data)
            .expect("hset");
    }
    let big = format!(r#"{{"blob":"{}"}}"#, noise(7, 9 << 20));
    let _: () = con.hset("bull:big:1", "data", big).expect("hset");

    let root = w.dir.path().join("archive");
    std::fs::create_dir_all(&root).expect("dir");
    let policy = w.policy(&format!(
        "version: 1\narchive: {{ url: \"file://{}\" }}\npolicies: [{{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        root.display()
    ));
    // A private mount namespace holds the tmpfs, so what is left in it is listed from inside.
    let script = r#"mount -t tmpfs -o size=128k tmpfs "$1" || exit 99
"$2" --redis "$3" --config "$4" --json run >"$5" 2>&1
echo "exit=$?"
find "$1" -name '*.tmp'"#;
    let out = Command::new("unshare")
        .current_dir(w.dir.path())
        .args(["-rm", "sh", "-c", script, "sh"])
        .arg(&root)
        .arg(env!("CARGO_BIN_EXE_bullsweep"))
        .arg(w.url_for(&["run"]))
        .arg(&policy)
        .arg(w.dir.path().join("stderr"))
        .output()
        .expect("unshare runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let run_stderr = std::fs::read_to_string(w.dir.path().join("stderr")).unwrap_or_default();
    assert_eq!(
        text.lines().next(),
        Some("exit=1"),
        "the run fails on the full disk (a tmpfs needs `unshare -rm`): {text}{}{run_stderr}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        run_stderr.matches("No space left on device").count(),
        2,
        "both queues (a batch, a streamed job) met the full disk: {run_stderr}"
    );
    let left: Vec<&str> = text.lines().skip(1).collect();
    assert!(
        left.is_empty(),
        "staging files left with job data: {left:?}"
    );
    let mail: u64 = con.zcard("bull:mail:completed").expect("zcard");
    let big: u64 = con.zcard("bull:big:completed").expect("zcard");
    assert_eq!((mail, big), (200, 1), "every job was put back");
}
