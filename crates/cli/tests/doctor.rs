//! `doctor`: each kind of damage made in BullMQ's format (seeded jobs, then the fault: an id
//! ZREMed, a hash deleted, …), found (exit 1, its count and sample), left exactly as it was
//! without `--repair` (every key's DUMP equal), and repaired to the expected keyspace with its
//! audit event; locked jobs are left; a clean queue exits 0, an unknown kind 2.

mod common;

use common::*;
use redis::Commands;
use serde_json::Value;
use std::collections::BTreeMap;

const BASE: &str = "bull:mail";

fn k(rest: &str) -> String {
    format!("{BASE}:{rest}")
}

/// A world with `jobs` completed jobs (ids 1..=jobs) in BullMQ 6.7's format, and a policy
/// file with a file audit store.
fn world(jobs: u64) -> (World, std::path::PathBuf) {
    let w = World::new();
    w.seed(spec(BASE, jobs, 0, 1), now_ms());
    let audit = w.dir.path().join("audit.jsonl");
    let policy = w.policy(&format!(
        "version: 1\naudit: {{ url: \"file://{}\" }}\npolicies:\n  - name: p\n    queueNamePattern: mail\n    rules: {{ completed: {{ maxAge: 30d }} }}\n",
        audit.display()
    ));
    (w, policy)
}

/// `doctor --json` with `args`: the exit status and the document.
fn doctor(w: &World, policy: &std::path::PathBuf, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json", "doctor"];
    all.extend(args);
    let out = w.run(policy, &all);
    let code = out.status.code().expect("exit status");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            stderr(&out),
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (code, json)
}

/// The finding of `kind` in the only queue, or `Null`.
fn finding<'a>(doc: &'a Value, kind: &str) -> &'a Value {
    doc["queues"][0]["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["kind"] == kind))
        .unwrap_or(&Value::Null)
}

/// Every key of the database (bullsweep's own aside) with its type, content and TTL, in a
/// canonical order. (DUMP bytes are not stable: a hash's table encoding is rehashed by reads.)
fn dump_all(con: &mut redis::Connection) -> BTreeMap<String, String> {
    let keys: Vec<String> = con.keys("*").expect("keys");
    keys.into_iter()
        .filter(|k| !k.starts_with("bullsweep:"))
        .map(|k| {
            let kind: String = redis::cmd("TYPE").arg(&k).query(con).expect("type");
            let content = match kind.as_str() {
                "string" => format!("{:?}", con.get::<_, Vec<u8>>(&k).expect("get")),
                "hash" => format!(
                    "{:?}",
                    con.hgetall::<_, BTreeMap<String, Vec<u8>>>(&k).expect("h")
                ),
                "list" => format!("{:?}", con.lrange::<_, Vec<String>>(&k, 0, -1).expect("l")),
                "set" => format!(
                    "{:?}",
                    con.smembers::<_, std::collections::BTreeSet<String>>(&k)
                        .expect("s")
                ),
                "zset" => format!(
                    "{:?}",
                    con.zrange_withscores::<_, Vec<(String, f64)>>(&k, 0, -1)
                        .expect("z")
                ),
                _ => format!(
                    "{:?}",
                    redis::cmd("XRANGE")
                        .arg(&k)
                        .arg("-")
                        .arg("+")
                        .query::<redis::Value>(con)
                        .expect("x")
                ),
            };
            let ttl: i64 = con.pttl(&k).expect("pttl");
            (k, format!("{kind} {content} ttl:{}", ttl > 0))
        })
        .collect()
}

/// Finds `kind` (exit 1, `found` of it, `sample` among its samples), checks that finding changed nothing,
/// repairs it and returns the report of the repair.
fn find_then_repair(
    w: &World,
    policy: &std::path::PathBuf,
    kind: &str,
    found: u64,
    sample: &str,
) -> Value {
    let mut con = w.con();
    let before = dump_all(&mut con);
    let (code, doc) = doctor(w, policy, &[]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["clean"], false);
    let f = finding(&doc, kind);
    assert_eq!(f["found"], found, "{doc}");
    let samples = f["samples"].as_array().expect("samples");
    assert!(samples.contains(&Value::from(sample)), "{doc}");
    assert!(
        dump_all(&mut con) == before,
        "doctor without --repair changed nothing"
    );
    let (code, doc) = doctor(w, policy, &["--repair", kind]);
    assert_eq!(code, 1, "{doc}");
    doc
}

fn key_set(con: &mut redis::Connection) -> Vec<String> {
    let mut keys: Vec<String> = con.keys("*").expect("keys");
    keys.retain(|k| !k.starts_with("bullsweep:"));
    keys.sort();
    keys
}

/// The audit events of action `repair`, as `audit query` prints them.
fn repair_events(w: &World, policy: &std::path::PathBuf) -> Vec<Value> {
    w.audit_events(policy, &["--action", "repair"])
}

#[test]
fn a_clean_queue_exits_0_and_an_unknown_kind_2() {
    let (w, policy) = world(5);
    let out = w.run(&policy, &["doctor"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1 queue examined, clean"
    );
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!((code, &doc["clean"]), (0, &Value::Bool(true)), "{doc}");
    assert_eq!(doc["queues"][0]["key"], BASE);
    assert_eq!(doc["queues"][0]["findings"], serde_json::json!([]));
    assert_eq!(
        doc["queues"][0]["examined"]["jobs"], 5,
        "5 jobs, each counted once (its hash and its id)"
    );
    let out = w.run(&policy, &["doctor", "--repair", "danglingIds,orphans"]);
    assert_exit(&out, 2, "orphanHashes");
}

#[test]
fn orphan_hashes_are_found_and_removed_with_their_sub_keys() {
    let (w, policy) = world(5);
    let mut con = w.con();
    let _: () = con.zrem(k("completed"), "3").expect("zrem");
    let _: () = con.rpush(k("3:logs"), "line").expect("logs");
    let _: () = con.zrem(k("completed"), "4").expect("zrem");
    let _: () = con.set(k("4:lock"), "worker").expect("lock");
    let mut expected = key_set(&mut con);
    expected.retain(|key| key != &k("3") && key != &k("3:logs"));
    let doc = find_then_repair(&w, &policy, "orphanHashes", 2, &k("3"));
    let f = finding(&doc, "orphanHashes");
    assert_eq!(
        (f["repaired"].as_u64(), f["skipped"]["locked"].as_u64()),
        (Some(1), Some(1)),
        "{doc}"
    );
    assert_eq!(
        key_set(&mut con),
        expected,
        "job 3 and its logs went; locked job 4 stayed"
    );
    let events = repair_events(&w, &policy);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["repairKind"], "orphanHashes");
    assert_eq!(events[0]["jobIds"], serde_json::json!(["3"]));
}

#[test]
fn dangling_ids_are_dropped_from_their_state() {
    let (w, policy) = world(5);
    let mut con = w.con();
    let _: () = con.del(k("2")).expect("del");
    let _: () = con.rpush(k("2:logs"), "line").expect("logs");
    let _: () = con.lpush(k("wait"), "9").expect("wait");
    let _: () = con.lpush(k("active"), "8").expect("active");
    let _: () = con.set(k("8:lock"), "worker").expect("lock");
    let doc = find_then_repair(&w, &policy, "danglingIds", 3, &k("2"));
    let f = finding(&doc, "danglingIds");
    assert_eq!(
        (f["repaired"].as_u64(), f["skipped"]["locked"].as_u64()),
        (Some(2), Some(1)),
        "{doc}"
    );
    let completed: Vec<String> = con.zrange(k("completed"), 0, -1).expect("zrange");
    assert_eq!(completed, ["1", "3", "4", "5"]);
    assert!(!con.exists::<_, bool>(k("wait")).expect("exists"));
    assert!(!con.exists::<_, bool>(k("2:logs")).expect("exists"));
    let active: Vec<String> = con.lrange(k("active"), 0, -1).expect("active");
    assert_eq!(active, ["8"], "a locked id is left");
    assert_eq!(repair_events(&w, &policy)[0]["repairKind"], "danglingIds");
}

#[test]
fn stale_dedup_keys_go_and_throttle_keys_stay() {
    let (w, policy) = world(5);
    let mut con = w.con();
    let _: () = con.set(k("de:finished"), "2").expect("de");
    let _: () = con.set(k("de:gone"), "77").expect("de");
    let _: () = con.set_ex(k("de:throttle"), "77", 600).expect("de");
    let _: () = con.hset(k("6"), "name", "x").expect("job");
    let _: () = con.lpush(k("wait"), "6").expect("wait");
    let _: () = con.set(k("de:live"), "6").expect("de");
    let doc = find_then_repair(&w, &policy, "staleDedup", 2, &k("de:finished"));
    assert_eq!(finding(&doc, "staleDedup")["repaired"], 2, "{doc}");
    let left: Vec<String> = con.keys(k("de:*")).expect("keys");
    let mut left = left;
    left.sort();
    assert_eq!(left, [k("de:live"), k("de:throttle")]);
}

#[test]
fn orphan_sub_keys_go_and_a_lock_with_a_ttl_stays() {
    let (w, policy) = world(2);
    let mut con = w.con();
    let _: () = con.rpush(k("40:logs"), "line").expect("logs");
    let _: () = con.sadd(k("41:dependencies"), k("1")).expect("deps");
    let _: () = con.set(k("42:lock"), "w").expect("lock");
    let _: () = con.set_ex(k("43:lock"), "w", 600).expect("lock");
    let mut expected = key_set(&mut con);
    expected.retain(|key| ![k("40:logs"), k("41:dependencies"), k("42:lock")].contains(key));
    let doc = find_then_repair(&w, &policy, "orphanSubkeys", 3, &k("40:logs"));
    assert_eq!(finding(&doc, "orphanSubkeys")["repaired"], 3, "{doc}");
    assert_eq!(key_set(&mut con), expected);
}

#[test]
fn orphan_schedulers_are_deleted() {
    let (w, policy) = world(1);
    let mut con = w.con();
    let _: () = con
        .hset(k("repeat:gone"), "name", "tick")
        .expect("template");
    let _: () = con
        .hset(k("repeat:live"), "name", "tick")
        .expect("template");
    let _: () = con.zadd(k("repeat"), "live", 1_000).expect("repeat");
    let doc = find_then_repair(&w, &policy, "orphanSchedulers", 1, &k("repeat:gone"));
    assert_eq!(finding(&doc, "orphanSchedulers")["repaired"], 1, "{doc}");
    assert!(!con.exists::<_, bool>(k("repeat:gone")).expect("exists"));
    assert!(con.exists::<_, bool>(k("repeat:live")).expect("exists"));
}

/// A flow: parent `p` waits for children `c1` and `c2` (in `wait`).
fn flow(con: &mut redis::Connection) {
    let _: () = con
        .hset_multiple(
            k("p"),
            &[("name", "parent"), ("priority", "0"), ("delay", "0")],
        )
        .expect("p");
    let _: () = con.zadd(k("waiting-children"), "p", 1).expect("wc");
    for c in ["c1", "c2"] {
        let _: () = con
            .hset_multiple(k(c), &[("name", "child"), ("parentKey", k("p").as_str())])
            .expect("child");
        let _: () = con.lpush(k("wait"), c).expect("wait");
        let _: () = con.sadd(k("p:dependencies"), k(c)).expect("deps");
    }
}

#[test]
fn a_stuck_parent_moves_to_wait_as_bullmq_moves_it() {
    let (w, policy) = world(1);
    let mut con = w.con();
    flow(&mut con);
    // The children's hashes went without their bookkeeping (a TTL, a killed script).
    let _: () = con.del(&[k("c1"), k("c2")]).expect("del");
    let _: () = con.lrem(k("wait"), 0, "c1").expect("lrem");
    let _: () = con.lrem(k("wait"), 0, "c2").expect("lrem");
    let doc = find_then_repair(&w, &policy, "stuckParents", 1, &k("p"));
    assert_eq!(finding(&doc, "stuckParents")["repaired"], 1, "{doc}");
    let wc: Vec<String> = con.zrange(k("waiting-children"), 0, -1).expect("wc");
    assert!(wc.is_empty());
    let wait: Vec<String> = con.lrange(k("wait"), 0, -1).expect("wait");
    assert_eq!(wait, ["p"]);
    assert!(!con.exists::<_, bool>(k("p:dependencies")).expect("exists"));
    let marker: Vec<String> = con.zrange(k("marker"), 0, -1).expect("marker");
    assert_eq!(marker, ["0"]);
}

#[test]
fn orphan_children_go_with_their_keys_and_an_active_child_stays() {
    let (w, policy) = world(1);
    let mut con = w.con();
    flow(&mut con);
    let _: () = con.del(&[k("p"), k("p:dependencies")]).expect("del");
    let _: () = con.zrem(k("waiting-children"), "p").expect("zrem");
    // c2 is being processed.
    let _: () = con.lrem(k("wait"), 0, "c2").expect("lrem");
    let _: () = con.lpush(k("active"), "c2").expect("active");
    let _: () = con.set_ex(k("c2:lock"), "w", 600).expect("lock");
    let doc = find_then_repair(&w, &policy, "orphanChildren", 2, &k("c1"));
    let f = finding(&doc, "orphanChildren");
    assert_eq!(
        (f["repaired"].as_u64(), f["skipped"]["locked"].as_u64()),
        (Some(1), Some(1)),
        "{doc}"
    );
    assert!(!con.exists::<_, bool>(k("c1")).expect("exists"));
    assert!(con.exists::<_, bool>(k("c2")).expect("exists"));
    assert!(!con.exists::<_, bool>(k("wait")).expect("exists"));
    let events = repair_events(&w, &policy);
    assert_eq!(events[0]["repairKind"], "orphanChildren");
}

#[test]
fn an_events_stream_over_its_bound_is_found_and_trimmed_to_it() {
    let (w, policy) = world(1);
    let mut con = w.con();
    let _: () = con.hset(k("meta"), "opts.maxLenEvents", 10).expect("meta");
    // Two nodes over the bound (10 + 200) is no finding yet: BullMQ's own trimming leaves that.
    // (The seed's one `added` event goes first.)
    let _: () = con.del(k("events")).expect("del");
    for i in 0..210 {
        let _: String = con
            .xadd(
                k("events"),
                "*",
                &[("event", "added"), ("jobId", &i.to_string())],
            )
            .expect("xadd");
    }
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!(code, 0, "{doc}");
    let _: () = con.del(k("events")).expect("del");
    for i in 0..300 {
        let _: String = con
            .xadd(
                k("events"),
                "*",
                &[("event", "added"), ("jobId", &i.to_string())],
            )
            .expect("xadd");
    }
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!(code, 1, "{doc}");
    let f = finding(&doc, "eventsOverLimit");
    assert_eq!(
        (f["found"].as_u64(), &f["samples"][0]),
        (Some(290), &Value::from(k("events"))),
        "{doc}"
    );
    let (code, doc) = doctor(&w, &policy, &["--repair", "eventsOverLimit"]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(finding(&doc, "eventsOverLimit")["repaired"], 290, "{doc}");
    // Trimmed to the bound exactly (the newest kept), and meta's bound left as it was.
    let len: u64 = con.xlen(k("events")).expect("xlen");
    assert_eq!(len, 10);
    let last: redis::streams::StreamRangeReply = con
        .xrevrange_count(k("events"), "+", "-", 1)
        .expect("xrevrange");
    let newest = last.ids[0].map.get("jobId").cloned();
    assert_eq!(newest, Some(redis::Value::BulkString(b"299".to_vec())));
    let meta: String = con.hget(k("meta"), "opts.maxLenEvents").expect("meta");
    assert_eq!(meta, "10");
    // Audited, as every repair is, with its kind.
    let events = repair_events(&w, &policy);
    assert!(!events.is_empty(), "a repair event");
    assert!(
        events.iter().all(|e| e["repairKind"] == "eventsOverLimit"),
        "{events:?}"
    );
    assert_eq!(
        events[0]["jobIds"],
        serde_json::json!(["events"]),
        "{events:?}"
    );
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!(code, 0, "{doc}");
}

#[test]
fn the_man_page_lists_the_exit_status_of_fsck() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["man", "doctor"])
        .output()
        .expect("bullsweep runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let page = String::from_utf8_lossy(&out.stdout);
    let status = &page[page.find("EXIT STATUS").expect("exit status")..];
    for line in [
        "0\nno damage found",
        "1\ndamage found",
        "2\nbad usage",
        "8\nan operational error",
    ] {
        assert!(status.contains(line), "{line:?} in {status}");
    }
}

#[test]
fn an_unreachable_redis_exits_8() {
    let w = World::new();
    let policy = w.policy("version: 1\npolicies: []\n");
    let port = w.redis.port();
    drop(w.redis);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--redis", &format!("redis://127.0.0.1:{port}"), "--config"])
        .arg(&policy)
        .arg("doctor")
        .output()
        .expect("bullsweep runs");
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
}

#[test]
fn a_job_a_restore_holds_is_left() {
    let (w, policy) = world(3);
    let mut con = w.con();
    let _: () = con.zrem(k("completed"), "2").expect("zrem");
    let hold_until = now_ms() + 3_600_000;
    let holds = bullsweep_core::bullmq::keys::restore_holds(BASE);
    let _: () = con.zadd(&holds, "2", hold_until).expect("hold");
    let (_, doc) = doctor(&w, &policy, &["--repair", "orphanHashes"]);
    let f = finding(&doc, "orphanHashes");
    assert_eq!(
        (f["repaired"].as_u64(), f["skipped"]["restored"].as_u64()),
        (Some(0), Some(1)),
        "{doc}"
    );
    assert!(con.exists::<_, bool>(k("2")).expect("exists"));
}

#[test]
fn finding_needs_only_the_read_only_role_and_no_policy_file() {
    let (w, _) = world(3);
    let mut con = w.con();
    let _: () = con.zrem(k("completed"), "2").expect("zrem");
    let missing = w.dir.path().join("none.yaml");
    let url = w.redis.url_as(bullsweep_testkit::Role::ReadOnly, 0);
    let out = w.run_at(&missing, &url, &["--json", "doctor"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(finding(&doc, "orphanHashes")["found"], 1, "{doc}");
    let out = w.run_at(&missing, &url, &["doctor", "--repair", "all"]);
    assert_exit(&out, 2, "policy file");
}

/// BullMQ's addJob writes the hash and its state entry in one script, and a worker moves a
/// job between states in one script: a repair that re-checks inside its own atomic call never
/// meets a job half added or half moved. A producer and a worker run through repeated
/// `doctor --repair all`; every job ends with its hash in exactly one state.
#[test]
fn repairs_beside_a_live_producer_and_worker_lose_no_job() {
    let (w, policy) = world(1);
    let jobs = 3_000u64;
    let url = w.url();
    let producer = std::thread::spawn(move || {
        let mut con = redis::Client::open(url)
            .and_then(|c| c.get_connection())
            .expect("producer connects");
        let add = redis::Script::new(
            "redis.call('HSET', KEYS[1], 'name', 'p', 'timestamp', ARGV[2], 'data', '{}')
             redis.call('LPUSH', KEYS[2], ARGV[1]) return 1",
        );
        let take = redis::Script::new(
            "local id = redis.call('RPOPLPUSH', KEYS[1], KEYS[2])
             if id then redis.call('SET', KEYS[3] .. id .. ':lock', 'w', 'PX', 30000) end
             return id",
        );
        let finish = redis::Script::new(
            "if redis.call('LREM', KEYS[1], -1, ARGV[1]) == 1 then
               redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
               redis.call('HSET', KEYS[3] .. ARGV[1], 'finishedOn', ARGV[2])
               redis.call('DEL', KEYS[3] .. ARGV[1] .. ':lock') end return 1",
        );
        for i in 100..100 + jobs {
            let id = i.to_string();
            let _: i64 = add
                .key(k(&id))
                .key(k("wait"))
                .arg(&id)
                .arg(now_ms())
                .invoke(&mut con)
                .expect("add");
            if i % 2 == 0 {
                let taken: Option<String> = take
                    .key(k("wait"))
                    .key(k("active"))
                    .key(k(""))
                    .invoke(&mut con)
                    .expect("take");
                if let Some(t) = taken {
                    let _: i64 = finish
                        .key(k("active"))
                        .key(k("completed"))
                        .key(k(""))
                        .arg(t)
                        .arg(now_ms())
                        .invoke(&mut con)
                        .expect("finish");
                }
            }
        }
    });
    let mut runs = 0;
    while runs < 3 || !producer.is_finished() {
        let out = w.run(&policy, &["doctor", "--repair", "all"]);
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
        runs += 1;
    }
    producer.join().expect("producer");
    let mut con = w.con();
    for i in 100..100 + jobs {
        let id = i.to_string();
        assert!(
            con.exists::<_, bool>(k(&id)).expect("exists"),
            "job {id} kept its hash"
        );
        let in_wait: Option<usize> = redis::cmd("LPOS")
            .arg(k("wait"))
            .arg(&id)
            .query(&mut con)
            .expect("lpos");
        let in_active: Option<usize> = redis::cmd("LPOS")
            .arg(k("active"))
            .arg(&id)
            .query(&mut con)
            .expect("lpos");
        let done: Option<f64> = con.zscore(k("completed"), &id).expect("zscore");
        let states = [in_wait.is_some(), in_active.is_some(), done.is_some()];
        assert_eq!(
            states.iter().filter(|s| **s).count(),
            1,
            "job {id}: {states:?}"
        );
    }
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!(code, 0, "{doc}");
}

#[test]
fn on_a_cluster_each_queue_is_scanned_and_repaired_in_its_slot() {
    let cluster = bullsweep_testkit::PrivateCluster::start(3, 0).expect("cluster");
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("bullsweep.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\naudit: {{ url: \"file://{}\" }}\npolicies: []\n",
            dir.path().join("audit.jsonl").display()
        ),
    )
    .expect("policy");
    let bases = ["{bull}:mail", "{orders}:orders"];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = cluster.client().expect("client");
        let mut con = client.get_async_connection().await.expect("connect");
        for base in bases {
            bullsweep_testkit::seed_queue(&mut con, &spec(base, 20, 0, 1), now_ms())
                .await
                .expect("seed");
        }
    });
    let mut con = cluster
        .client()
        .and_then(|c| c.get_connection())
        .expect("connect");
    let _: () = con.zrem("{bull}:mail:completed", "3").expect("orphan");
    let _: () = con.del("{orders}:orders:5").expect("dangling");
    let url = cluster.url_as(bullsweep_testkit::Role::Governing);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .args(["--redis", &url, "--config"])
            .arg(&policy)
            .args(["--json", "doctor"])
            .args(args)
            .output()
            .expect("bullsweep runs");
        let doc: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
        (out.status.code(), doc)
    };
    let (code, doc) = run(&[]);
    assert_eq!(code, Some(1), "{doc}");
    let by_key = |doc: &Value, key: &str| -> Value {
        doc["queues"]
            .as_array()
            .and_then(|qs| qs.iter().find(|q| q["key"] == key).cloned())
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        by_key(&doc, "{bull}:mail")["findings"][0]["kind"],
        "orphanHashes",
        "{doc}"
    );
    assert_eq!(
        by_key(&doc, "{orders}:orders")["findings"][0]["kind"],
        "danglingIds",
        "{doc}"
    );
    assert_eq!(
        by_key(&doc, "{bull}:mail")["examined"]["keys"],
        24,
        "20 jobs, completed, meta, id, events"
    );
    let (code, doc) = run(&["--repair", "all"]);
    assert_eq!(code, Some(1), "{doc}");
    assert!(!con.exists::<_, bool>("{bull}:mail:3").expect("exists"));
    let members: Vec<String> = con
        .zrange("{orders}:orders:completed", 0, -1)
        .expect("zrange");
    assert!(!members.contains(&"5".to_string()) && members.len() == 19);
    let (code, doc) = run(&[]);
    assert_eq!(
        (code, &doc["clean"]),
        (Some(0), &Value::Bool(true)),
        "{doc}"
    );
}

#[test]
fn a_stuck_parent_with_a_priority_goes_to_prioritized() {
    let (w, policy) = world(1);
    let mut con = w.con();
    flow(&mut con);
    let _: () = con.hset(k("p"), "priority", 5).expect("priority");
    let _: () = con.del(&[k("c1"), k("c2")]).expect("del");
    let _: () = con.del(k("wait")).expect("del");
    let (_, doc) = doctor(&w, &policy, &["--repair", "stuckParents"]);
    assert_eq!(finding(&doc, "stuckParents")["repaired"], 1, "{doc}");
    let prioritized: Vec<(String, f64)> = con
        .zrange_withscores(k("prioritized"), 0, -1)
        .expect("prioritized");
    assert_eq!(
        prioritized,
        [("p".to_string(), 5.0 * 4_294_967_296.0 + 1.0)]
    );
    assert!(!con.exists::<_, bool>(k("wait")).expect("exists"));
    let pc: i64 = con.get(k("pc")).expect("pc");
    assert_eq!(pc, 1);
}

#[test]
fn a_queue_another_bullsweep_sweeps_is_left_unrepaired() {
    let (w, policy) = world(3);
    let mut con = w.con();
    let _: () = con.zrem(k("completed"), "2").expect("zrem");
    let lock = bullsweep_core::bullmq::keys::sweep_lock(BASE);
    let _: () = con.set_ex(&lock, "daemon-1:x", 60).expect("lock");
    let (code, doc) = doctor(&w, &policy, &["--repair", "all", "--lock-wait", "0"]);
    assert_eq!(code, 1, "{doc}");
    let f = finding(&doc, "orphanHashes");
    assert_eq!(
        (f["repaired"].as_u64(), f["skipped"]["sweepLock"].as_u64()),
        (Some(0), Some(1)),
        "{doc}"
    );
    assert!(con.exists::<_, bool>(k("2")).expect("exists"));
    let holder: String = con.get(&lock).expect("lock");
    assert_eq!(holder, "daemon-1:x");
}

#[test]
fn where_the_policy_archives_an_orphan_hash_is_archived_first() {
    let w = World::new();
    w.seed(spec(BASE, 3, 0, 1), now_ms());
    let archive = w.dir.path().join("archive");
    std::fs::create_dir_all(&archive).expect("archive dir");
    let policy = w.policy(&format!(
        "version: 1\naudit: {{ url: \"file://{}\" }}\narchive: {{ url: \"file://{}\" }}\npolicies:\n  - name: p\n    queueNamePattern: mail\n    rules: {{ completed: {{ maxAge: 30d, action: archive }} }}\n",
        w.dir.path().join("audit.jsonl").display(),
        archive.display()
    ));
    let mut con = w.con();
    let _: () = con.zrem(k("completed"), "2").expect("zrem");
    let _: () = con.rpush(k("2:logs"), "line").expect("logs");
    let kept: BTreeMap<String, String> = con.hgetall(k("2")).expect("hash");
    let (code, doc) = doctor(&w, &policy, &["--repair", "orphanHashes"]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(finding(&doc, "orphanHashes")["repaired"], 1, "{doc}");
    assert!(!con.exists::<_, bool>(k("2")).expect("exists"));
    assert!(!con.exists::<_, bool>(k("2:logs")).expect("exists"));
    let records = w.archived(&policy, &[]);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = serde_json::to_value(&records[0]).expect("record");
    assert_eq!(record["id"], "2", "{record}");
    assert_eq!(record["state"], "completed", "{record}");
    let data: Value = serde_json::from_str(&kept["data"]).expect("data");
    assert_eq!(record["fields"]["data"], data, "{record}");
    assert_eq!(record["logs"], serde_json::json!(["line"]), "{record}");
}

#[test]
fn the_table_has_a_row_per_queue_and_kind_and_a_summary() {
    let (w, policy) = world(3);
    let mut con = w.con();
    let _: () = con.zrem(k("completed"), "2").expect("zrem");
    let _: () = con.del(k("3")).expect("del");
    let out = w.run(&policy, &["doctor"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let header: Vec<&str> = lines[1].split_whitespace().filter(|w| *w != "│").collect();
    assert_eq!(
        header,
        ["queue", "kind", "found", "repaired", "skipped", "samples"],
        "{text}"
    );
    assert!(
        text.contains("orphanHashes") && text.contains(&k("2")),
        "{text}"
    );
    assert!(
        text.contains("danglingIds") && text.contains(&k("3")),
        "{text}"
    );
    assert_eq!(
        lines.last().copied(),
        Some(
            "1 queue examined, 1 with damage: 2 found, 0 repaired; `--repair KIND,…` (or `all`) repairs them"
        ),
        "{text}"
    );
}

#[test]
fn a_queue_whose_only_dedup_key_has_a_ttl_is_examined_and_clean() {
    let (w, policy) = world(2);
    let mut con = w.con();
    let _: () = con.set_ex(k("de:thr"), "2", 3600).expect("de");
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!((code, &doc["clean"]), (0, &Value::Bool(true)), "{doc}");
    assert_eq!(doc["queues"][0]["error"], Value::Null, "{doc}");
    let (code, doc) = doctor(&w, &policy, &["--repair", "all"]);
    assert_eq!(code, 0, "{doc}");
}

/// A job as BullMQ adds it (its `timestamp` among its fields), waiting.
fn waiting_job(con: &mut redis::Connection, id: &str) {
    let _: () = con
        .hset_multiple(
            k(id),
            &[
                ("name", "job"),
                ("data", "{}"),
                ("timestamp", "1700000000000"),
            ],
        )
        .expect("job");
    let _: () = con.rpush(k("wait"), id).expect("wait");
}

#[test]
fn jobs_whose_custom_ids_look_like_sub_keys_dedup_keys_or_templates_are_jobs() {
    let (w, policy) = world(2);
    let mut con = w.con();
    // BullMQ accepts custom ids of exactly three `:`-separated parts.
    let ids = [
        "x:y:processed",
        "a:b:failed",
        "c:d:logs",
        "e:f:dependencies",
        "g:h:unsuccessful",
        "i:j:lock",
        "de:q:r",
        "repeat:z:abc",
    ];
    for id in ids {
        waiting_job(&mut con, id);
    }
    let before = dump_all(&mut con);
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!((code, &doc["clean"]), (0, &Value::Bool(true)), "{doc}");
    assert_eq!(doc["queues"][0]["examined"]["jobs"], 10, "{doc}");
    let (code, doc) = doctor(&w, &policy, &["--repair", "all"]);
    assert_eq!(code, 0, "{doc}");
    assert!(dump_all(&mut con) == before, "--repair all deleted nothing");
    // An orphan job with such an id is an orphan hash, and a real `:processed` hash of a gone
    // job is still an orphan sub-key.
    let _: () = con.lrem(k("wait"), 1, "x:y:processed").expect("lrem");
    let _: () = con
        .hset(k("50:processed"), k("2"), "{}")
        .expect("processed");
    let (code, doc) = doctor(&w, &policy, &[]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(
        finding(&doc, "orphanHashes")["samples"],
        serde_json::json!([k("x:y:processed")]),
        "{doc}"
    );
    assert_eq!(
        finding(&doc, "orphanSubkeys")["samples"],
        serde_json::json!([k("50:processed")]),
        "{doc}"
    );
    let (code, doc) = doctor(&w, &policy, &["--repair", "all"]);
    assert_eq!(code, 1, "{doc}");
    assert!(!con.exists::<_, bool>(k("x:y:processed")).expect("exists"));
    assert!(!con.exists::<_, bool>(k("50:processed")).expect("exists"));
    for id in &ids[1..] {
        assert!(con.exists::<_, bool>(k(id)).expect("exists"), "{id} stays");
    }
}

#[test]
fn an_orphan_parent_goes_with_its_children_and_a_locked_tree_stays_whole() {
    let (w, policy) = world(1);
    let mut con = w.con();
    // Parent p (its waiting-children entry lost) with a pending child c1 and a completed c2.
    flow(&mut con);
    let _: () = con.zrem(k("waiting-children"), "p").expect("zrem");
    let _: () = con.lrem(k("wait"), 0, "c2").expect("lrem");
    let _: () = con.srem(k("p:dependencies"), k("c2")).expect("srem");
    let _: () = con.zadd(k("completed"), "c2", 5).expect("completed");
    let _: () = con.hset(k("p:processed"), k("c2"), "1").expect("processed");
    // Parent q (likewise lost) whose child cq is being processed: the tree stays whole.
    let _: () = con.hset(k("q"), "name", "parent").expect("q");
    let _: () = con
        .hset_multiple(
            k("cq"),
            &[("name", "child"), ("parentKey", k("q").as_str())],
        )
        .expect("cq");
    let _: () = con.rpush(k("active"), "cq").expect("active");
    let _: () = con.set_ex(k("cq:lock"), "w", 600).expect("lock");
    let _: () = con.sadd(k("q:dependencies"), k("cq")).expect("deps");
    let doc = find_then_repair(&w, &policy, "orphanHashes", 2, &k("p"));
    let f = finding(&doc, "orphanHashes");
    assert_eq!(
        (f["repaired"].as_u64(), f["skipped"]["locked"].as_u64()),
        (Some(1), Some(1)),
        "{doc}"
    );
    for gone in ["p", "p:dependencies", "p:processed", "c1", "c2"] {
        assert!(!con.exists::<_, bool>(k(gone)).expect("exists"), "{gone}");
    }
    for kept in ["q", "q:dependencies", "cq", "cq:lock"] {
        assert!(con.exists::<_, bool>(k(kept)).expect("exists"), "{kept}");
    }
    assert!(!con.exists::<_, bool>(k("wait")).expect("exists"));
    let completed: Vec<String> = con.zrange(k("completed"), 0, -1).expect("zrange");
    assert_eq!(completed, ["1"]);
    let events = repair_events(&w, &policy);
    assert_eq!(events[0]["jobIds"], serde_json::json!(["p"]), "{events:?}");
    // Its children are named as taken along with it, by key, role and the state each was in.
    let mut related: Vec<(String, String)> = events[0]["relatedJobs"]
        .as_array()
        .expect("related")
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap_or("").to_string(),
                r["role"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    related.sort();
    assert_eq!(
        related,
        [
            (k("c1"), "childRemoved".to_string()),
            (k("c2"), "childRemoved".to_string())
        ],
        "{events:?}"
    );
    let (_, doc) = doctor(&w, &policy, &[]);
    assert_eq!(finding(&doc, "orphanChildren"), &Value::Null, "{doc}");
}

#[test]
fn the_audit_event_names_no_job_it_removed_as_a_released_parent() {
    let (w, policy) = world(1);
    let mut con = w.con();
    // mid waits for its child leaf; mid's own parent is gone.
    let _: () = con
        .hset_multiple(
            k("mid"),
            &[("name", "mid"), ("parentKey", k("gone").as_str())],
        )
        .expect("mid");
    let _: () = con.zadd(k("waiting-children"), "mid", 1).expect("wc");
    let _: () = con
        .hset_multiple(
            k("leaf"),
            &[("name", "leaf"), ("parentKey", k("mid").as_str())],
        )
        .expect("leaf");
    let _: () = con.rpush(k("wait"), "leaf").expect("wait");
    let _: () = con.sadd(k("mid:dependencies"), k("leaf")).expect("deps");
    let doc = find_then_repair(&w, &policy, "orphanChildren", 1, &k("mid"));
    assert_eq!(finding(&doc, "orphanChildren")["repaired"], 1, "{doc}");
    assert!(!con.exists::<_, bool>(k("mid")).expect("exists"));
    assert!(!con.exists::<_, bool>(k("leaf")).expect("exists"));
    let events = repair_events(&w, &policy);
    assert_eq!(
        events[0]["jobIds"],
        serde_json::json!(["mid"]),
        "{events:?}"
    );
    let related = events[0]["relatedJobs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        related,
        [serde_json::json!({ "key": k("leaf"), "role": "childRemoved", "state": "wait" })],
        "mid was removed, not released, and leaf went with it: {events:?}"
    );
}

#[test]
fn schedulers_whose_ids_end_in_digits_are_templates_never_jobs() {
    let (w, policy) = world(1);
    let mut con = w.con();
    // BullMQ accepts ':' in scheduler ids: `now:1`'s template looks like an iteration's key.
    for sid in ["report:2024", "now:1", "gone:7"] {
        let _: () = con
            .hset_multiple(
                k(&format!("repeat:{sid}")),
                &[("name", "tick"), ("every", "3600000"), ("ic", "1")],
            )
            .expect("template");
    }
    let _: () = con.zadd(k("repeat"), "report:2024", 1_000).expect("repeat");
    let _: () = con.zadd(k("repeat"), "now:1", 1_000).expect("repeat");
    let doc = find_then_repair(&w, &policy, "orphanSchedulers", 1, &k("repeat:gone:7"));
    assert_eq!(finding(&doc, "orphanSchedulers")["repaired"], 1, "{doc}");
    assert_eq!(finding(&doc, "orphanHashes"), &Value::Null, "{doc}");
    assert!(!con.exists::<_, bool>(k("repeat:gone:7")).expect("exists"));
    for kept in ["repeat:report:2024", "repeat:now:1"] {
        assert!(con.exists::<_, bool>(k(kept)).expect("exists"), "{kept}");
    }
    let (code, doc) = doctor(&w, &policy, &["--repair", "all"]);
    assert_eq!(code, 0, "{doc}");
}

#[test]
fn an_orphan_hash_is_found_and_removed_beside_a_wait_list_of_30_000_ids() {
    let (w, policy) = world(5);
    let mut con = w.con();
    // A backlog longer than twice the list reach (2 × 10,000): searched whole.
    for chunk in 0..30 {
        let ids: Vec<String> = (0..1_000)
            .map(|i| format!("w{}", chunk * 1_000 + i))
            .collect();
        let _: () = con.rpush(k("wait"), &ids).expect("wait");
    }
    let _: () = con.zrem(k("completed"), "3").expect("zrem");
    let (code, doc) = doctor(&w, &policy, &["--repair", "orphanHashes"]);
    assert_eq!(code, 1, "{doc}");
    let f = finding(&doc, "orphanHashes");
    assert_eq!(
        (f["found"].as_u64(), f["repaired"].as_u64()),
        (Some(1), Some(1)),
        "{doc}"
    );
    assert!(!con.exists::<_, bool>(k("3")).expect("exists"));
    let len: u64 = con.llen(k("wait")).expect("llen");
    assert_eq!(len, 30_000, "the backlog stays");
}

#[test]
fn a_job_removed_whole_between_two_probe_calls_is_no_damage() {
    // Under load a job in no sorted set at the first look may be removed whole (its hash and
    // its state: removeOnComplete) before the next: the hash is checked with the states in
    // the same call, so it is neither an orphan hash nor a dangling id.
    let (w, _policy) = world(2);
    let mut con = w.con();
    let _: () = con.del(k("2")).expect("del");
    let _: () = con.zrem(k("completed"), "2").expect("zrem");
    // Job 1 really dangles: its id is in `completed`, its hash is gone.
    let _: () = con.del(k("1")).expect("del");
    let codes = w.block_on_con(async |acon| {
        let keys = bullsweep_core::bullmq::QueueKeys::new(BASE);
        let probe = async |acon: &mut _, mode, ids: &[&str]| {
            let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
            bullsweep_core::bullmq::scripts()
                .doctor_probe(acon, &keys, mode, 10_000, &ids, 100_000)
                .await
                .expect("probe")
                .codes
        };
        use bullsweep_core::bullmq::ProbeMode;
        let lists = probe(&mut *acon, ProbeMode::Lists, &["2"]).await;
        let missing = probe(&mut *acon, ProbeMode::Missing, &["1", "2"]).await;
        (lists, missing)
    });
    assert_eq!(codes, (b"i".to_vec(), b"01".to_vec()));
}
