//! `drop_staged.lua`, the drop of a staged archive batch, run directly against a real server:
//! it frees a batch's tail only when the server's list is the one the caller copied (or, when
//! putting back, when the staged hashes are gone), so a drop split across a failover frees
//! no copy nobody wrote and orphans none. The sentinel test exercises it through a failover;
//! this one builds each mismatch on purpose.

use bullsweep_testkit::PrivateRedis;
use redis::Commands;

const SCRIPT: &str = include_str!("../../core/src/bullmq/lua/drop_staged.lua");
const LIST: &str = "bullsweep:{bull}:staged:r1-completed-1";
const INDEX: &str = "bullsweep:{bull}:staging:bull:mail";

/// A batch of `n` entries `j1..jn`, each with its staged hash and logs, listed in the index.
fn stage(con: &mut redis::Connection, n: u64) {
    let _: () = redis::cmd("FLUSHALL").query(con).expect("flush");
    for i in 1..=n {
        let _: () = con.rpush(LIST, format!("j{i}")).expect("rpush");
        let _: () = con
            .hset(format!("{LIST}:{i}"), "finishedOn", i)
            .expect("hset");
        let _: () = con.rpush(format!("{LIST}:{i}:logs"), "line").expect("logs");
    }
    let _: () = con.hset(INDEX, "r1-completed-1", "{}").expect("index");
}

fn drop(con: &mut redis::Connection, len: u64, mode: &str, args: &[String]) -> (u8, u64) {
    redis::Script::new(SCRIPT)
        .key(LIST)
        .key(INDEX)
        .arg("r1-completed-1")
        .arg(len)
        .arg(mode)
        .arg(args)
        .invoke(con)
        .expect("drop_staged")
}

fn entries(range: std::ops::RangeInclusive<u64>) -> Vec<String> {
    range.map(|i| format!("j{i}")).collect()
}

fn keys(con: &mut redis::Connection) -> usize {
    let all: Vec<String> = con.keys("bullsweep:*").expect("keys");
    all.len()
}

#[test]
fn a_drop_frees_only_the_entries_it_checks() {
    let redis = PrivateRedis::start().expect("redis");
    let mut con = redis
        .client(0)
        .expect("client")
        .get_connection()
        .expect("connect");

    // The copied batch, dropped from its tail, then whole: the index entry goes last.
    stage(&mut con, 5);
    assert_eq!(drop(&mut con, 5, "copied", &entries(4..=5)), (0, 3));
    assert_eq!(con.llen::<_, u64>(LIST).expect("llen"), 3);
    assert!(!con.exists::<_, bool>(format!("{LIST}:5")).expect("exists"));
    assert!(con.exists::<_, bool>(format!("{LIST}:3")).expect("exists"));
    assert!(
        con.hexists::<_, _, bool>(INDEX, "r1-completed-1")
            .expect("hexists")
    );
    assert_eq!(drop(&mut con, 3, "copied", &entries(1..=3)), (0, 0));
    assert_eq!(keys(&mut con), 0, "list, staged keys and index all gone");

    // A list longer than the caller knows (a detach reply that never arrived): nothing freed.
    stage(&mut con, 5);
    assert_eq!(drop(&mut con, 4, "copied", &entries(3..=4)), (1, 5));
    assert_eq!(keys(&mut con), 5 * 2 + 2);

    // Another entry where the caller copied one (a detach call lost with the old master):
    // nothing freed, and the first such entry is named.
    let _: () = redis::cmd("LSET")
        .arg(LIST)
        .arg(3)
        .arg("j9")
        .query(&mut con)
        .expect("lset");
    assert_eq!(drop(&mut con, 5, "copied", &entries(4..=5)), (2, 4));
    assert_eq!(keys(&mut con), 5 * 2 + 2);

    // Putting back: a staged hash still there stops the drop; once it is gone, the tail goes.
    stage(&mut con, 3);
    assert_eq!(drop(&mut con, 3, "gone", &["3".into()]), (2, 1));
    assert_eq!(keys(&mut con), 3 * 2 + 2);
    for i in 1..=3 {
        let _: () = con.del(format!("{LIST}:{i}")).expect("del");
    }
    assert_eq!(drop(&mut con, 3, "gone", &["3".into()]), (0, 0));
    assert_eq!(keys(&mut con), 0);
}
