//! The command line against a real, private redis-server: exit codes, messages, JSON output
//! (read back through independent types), and what `plan` and `run` do to the keyspace.

mod common;

use common::*;
use redis::Commands;
use std::collections::BTreeMap;

#[test]
fn config_errors_name_file_line_column_and_exit_2() {
    let w = World::new();
    let policy = w.policy("version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxAge: 0s, action: delete }\n");
    for command in ["check", "plan", "run"] {
        let out = w.run(&policy, &[command]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = stderr(&out);
        assert!(
            err.contains("bullsweep.yaml:6:28: duration `0s` must be greater than zero"),
            "{err}"
        );
        assert!(
            err.contains("bullsweep.yaml:6:40: unknown action `delete`"),
            "{err}"
        );
        assert!(
            err.starts_with("error: 2 problems in the policy file"),
            "{err}"
        );
    }
}

#[test]
fn a_missing_policy_file_is_a_usage_error() {
    let w = World::new();
    let out = w.run(&w.dir.path().join("nope.yaml"), &["check"]);
    assert_exit(&out, 2, "cannot read policy file");
}

#[test]
fn unreachable_redis_is_a_clear_runtime_error() {
    let w = World::new();
    let policy = w.policy("version: 1\npolicies: [{ name: a, queueNamePattern: '*', rules: { completed: { maxAge: 1d } } }]\n");
    let out = w.run_at(&policy, "redis://127.0.0.1:1/0", &["plan"]);
    assert_exit(
        &out,
        1,
        "error: cannot reach Redis at redis://127.0.0.1:1/0",
    );
    assert!(stderr(&out).contains("hint:"), "{}", stderr(&out));
}

#[test]
fn explain_names_the_origin_of_every_field() {
    let w = World::new();
    let policy = w.policy(
        r#"version: 1
environment: production
environments: { production: [prod] }
discovery: { layouts: ["bull:{tenant}:{env}:{queue}"] }
policies:
  - name: billing
    queueNamePattern: "billing*"
    rules:
      completed: { maxAge: 7d, maxCount: 1000, action: remove }
    jobs:
      - name: send-email
        completed: { maxAge: 5m }
tenants:
  - tenantId: trial-co
    overrides:
      completed: { maxCount: 100 }
"#,
    );
    let out = w.run(
        &policy,
        &["--json", "explain", "bull:trial-co:prod:billing-export"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["policy"], "billing->override:trial-co");
    assert_eq!(v["env"], "production");
    let completed = &v["states"]["completed"];
    assert_eq!(
        completed["maxAgeMs"]["value"], 604_800_000,
        "JSON durations are milliseconds"
    );
    assert_eq!(completed["maxAgeMs"]["from"], "policy billing");
    assert_eq!(completed["maxCount"]["value"], 100);
    assert_eq!(completed["maxCount"]["from"], "tenant override trial-co");
    assert_eq!(completed["action"]["from"], "policy billing");
    let email = &v["jobs"][0]["states"]["completed"];
    assert_eq!(email["maxAgeMs"]["from"], "policy billing, job send-email");

    let text = w.run(&policy, &["explain", "bull:trial-co:prod:billing-export"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("tenant override trial-co"), "{text}");
    assert!(
        text.contains("7d"),
        "durations are shown as written: {text}"
    );

    let out = w.run(&policy, &["explain", "other:thing"]);
    assert_exit(&out, 2, "matches no layout");
}

#[test]
fn plan_changes_nothing_and_run_removes_what_plan_showed() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:mail", 100, 20, 10), now);
    let policy = w.policy("version: 1\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 5d }, failed: { maxCount: 5 } } }\n");
    let mut con = w.con();
    let keys_before: u64 = redis::cmd("DBSIZE").query(&mut con).expect("dbsize");
    let plan = w.report(&policy, "plan");
    let keys_after_plan: u64 = redis::cmd("DBSIZE").query(&mut con).expect("dbsize");
    assert_eq!(keys_before, keys_after_plan, "plan changed the keyspace");
    let q = &plan.queues[0];
    assert_eq!(
        (q.key.as_str(), q.queue.as_str(), q.policy.as_str()),
        ("bull:mail", "mail", "mail")
    );
    assert_eq!(q.tenant, None);
    let completed = &q.states["completed"];
    assert_eq!(completed.jobs, 100);
    let old = scores(&mut con, "bull:mail:completed")
        .iter()
        .filter(|(_, s)| *s <= now - 5 * DAY)
        .count() as u64;
    assert!(old > 30 && old < 70, "seeded ages are spread: {old}");
    assert_eq!(completed.matched, old);
    assert_eq!(completed.done, None);
    assert_eq!(q.states["failed"].matched, 15);

    let run = w.report(&policy, "run");
    let completed = &run.queues[0].states["completed"];
    assert_eq!(completed.done, Some(old));
    assert_eq!(run.queues[0].states["failed"].done, Some(15));
    let left = scores(&mut con, "bull:mail:completed");
    assert_eq!(left.len() as u64, 100 - old);
    assert!(left.iter().all(|(_, s)| *s > now - 5 * DAY - 60_000));
    for (id, _) in left {
        let exists: bool = con.exists(format!("bull:mail:{id}")).expect("exists");
        assert!(exists, "kept job {id} lost its hash");
    }
    let failed: u64 = con.zcard("bull:mail:failed").expect("zcard");
    assert_eq!(failed, 5);
    let mut own: Vec<String> = con.keys("bullsweep:*").expect("keys");
    own.sort();
    assert_eq!(
        own,
        [
            "bullsweep:audit:head",
            "bullsweep:audit:seq",
            "bullsweep:audit:source",
            "bullsweep:audit:tags",
            "bullsweep:lastrun",
            "bullsweep:{bullsweep}:audit",
            "bullsweep:{bullsweep}:audit:seq",
        ]
    );
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).expect("dbsize");
    assert_eq!(
        keys - own.len() as u64,
        keys_before - old - 15,
        "exactly the removed jobs' hashes are gone"
    );

    // A `cleaned` event per batch, adding up to what was removed.
    let events: redis::streams::StreamRangeReply =
        con.xrange_all("bull:mail:events").expect("xrange");
    let field = |entry: &redis::streams::StreamId, name: &str| -> Option<String> {
        entry
            .map
            .get(name)
            .and_then(|v| redis::from_redis_value_ref(v).ok())
    };
    let cleaned: u64 = events
        .ids
        .iter()
        .filter(|e| field(e, "event").as_deref() == Some("cleaned"))
        .filter_map(|e| field(e, "count").and_then(|n| n.parse::<u64>().ok()))
        .sum();
    assert_eq!(cleaned, old + 15);

    // Running again finds nothing more to do.
    let again = w.report(&policy, "run");
    assert_eq!(again.queues[0].states["completed"].done, Some(0));
}

/// Seeds 12 jobs under `base`, then locks one, makes one a string, strips `finishedOn` from
/// one and deletes one's hash; a sweep must remove exactly the other 8 and the dangling id.
fn held_back_jobs_are_counted(base: &str, layout: &str) {
    let w = World::new();
    w.seed(spec(base, 12, 0, 3), now_ms());
    let mut con = w.con();
    let set = format!("{base}:completed");
    let ids: Vec<String> = con.zrange(&set, 0, -1).expect("ids");
    let _: () = con
        .set_ex(format!("{base}:{}:lock", ids[0]), "worker-token", 600)
        .expect("lock");
    let _: () = con.del(format!("{base}:{}", ids[1])).expect("del");
    let _: () = con
        .set(format!("{base}:{}", ids[1]), "not a hash")
        .expect("set");
    let _: () = con
        .hdel(format!("{base}:{}", ids[2]), "finishedOn")
        .expect("hdel");
    let _: () = con.del(format!("{base}:{}", ids[3])).expect("dangling id");
    let policy = w.policy(&format!(
        "version: 1\ndiscovery: {{ layouts: ['{layout}'] }}\npolicies: [{{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms }} }} }}]\n"
    ));
    let run = w.report(&policy, "run");
    let s = &run.queues[0].states["completed"];
    assert_eq!(s.matched, 12);
    assert_eq!(s.done, Some(9), "9 removed, the dangling id among them");
    let skipped = s.skipped.as_ref().expect("skipped");
    assert_eq!(
        (skipped.locked, skipped.malformed, skipped.changed),
        (1, 2, 0)
    );
    assert!(
        skipped.reasons.iter().any(|r| r.contains("lock")),
        "{:?}",
        skipped.reasons
    );
    let left: Vec<String> = con.zrange(&set, 0, -1).expect("left");
    assert_eq!(left, vec![ids[0].clone(), ids[1].clone(), ids[2].clone()]);
    let locked_hash: BTreeMap<String, String> =
        con.hgetall(format!("{base}:{}", ids[0])).expect("hash");
    assert!(
        locked_hash.contains_key("finishedOn"),
        "the locked job is untouched"
    );
    let leftovers: Vec<String> = con.keys(format!("{base}:{}*", ids[4])).expect("keys");
    assert!(leftovers.is_empty(), "a removed job left {leftovers:?}");
}

#[test]
fn locked_and_malformed_jobs_are_held_back_and_counted() {
    held_back_jobs_are_counted("bull:mail", "bull:{queue}");
}

/// A `*` in the prefix would be read as a SORT pattern, so the script reads job by job.
#[test]
fn a_prefix_with_a_star_takes_the_job_by_job_path() {
    held_back_jobs_are_counted("we*ird:mail", "we*ird:{queue}");
}

#[test]
fn job_rules_apply_their_own_limits_per_job_name() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:mail", 200, 0, 10), now);
    let policy = w.policy(
        r#"version: 1
policies:
  - name: mail
    queueNamePattern: mail
    rules:
      completed: { maxAge: 7d }
    jobs:
      - name: send-email
        completed: { maxAge: 1d, maxCount: 4 }
"#,
    );
    let mut con = w.con();
    let before = scores(&mut con, "bull:mail:completed");
    let name_of = |con: &mut redis::Connection, id: &str| -> String {
        con.hget(format!("bull:mail:{id}"), "name").expect("name")
    };
    let mut expected_left = Vec::new();
    let mut emails_seen = 0;
    for (id, score) in before.iter().rev() {
        let keep = if name_of(&mut con, id) == "send-email" {
            emails_seen += 1;
            emails_seen <= 4 && *score > now - DAY
        } else {
            *score > now - 7 * DAY
        };
        if keep {
            expected_left.push(id.clone());
        }
    }
    let plan = w.report(&policy, "plan");
    assert_eq!(
        plan.queues[0].states["completed"].matched,
        (200 - expected_left.len()) as u64
    );
    let run = w.report(&policy, "run");
    assert_eq!(
        run.queues[0].states["completed"].done,
        Some((200 - expected_left.len()) as u64)
    );
    let mut left: Vec<String> = con.zrange("bull:mail:completed", 0, -1).expect("left");
    left.reverse();
    assert_eq!(left, expected_left);
    assert!(
        left.iter()
            .filter(|id| name_of(&mut con, id) == "send-email")
            .count()
            <= 4
    );
}

#[test]
fn keep_for_protects_recent_jobs_whatever_max_count_says() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:mail", 50, 0, 4), now);
    let policy = w.policy("version: 1\npolicies: [{ name: m, queueNamePattern: mail, rules: { completed: { maxCount: 0, keepFor: 2d } } }]\n");
    let run = w.report(&policy, "run");
    let mut con = w.con();
    let left = scores(&mut con, "bull:mail:completed");
    assert!(!left.is_empty());
    assert!(
        left.iter().all(|(_, s)| *s > now - 2 * DAY - 60_000),
        "nothing older than keepFor is left"
    );
    assert_eq!(
        run.queues[0].states["completed"].done,
        Some(50 - left.len() as u64)
    );
}

#[test]
fn one_failing_queue_does_not_stop_the_others() {
    let w = World::new();
    w.seed(spec("bull:a-broken", 10, 0, 3), now_ms());
    w.seed(spec("bull:b-fine", 10, 0, 3), now_ms());
    let mut con = w.con();
    let _: () = con.del("bull:a-broken:completed").expect("del");
    let _: () = con
        .set("bull:a-broken:completed", "wrong type")
        .expect("set");
    let policy = w.policy("version: 1\npolicies: [{ name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1ms } } }]\n");
    let out = w.run(&policy, &["--json", "run"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed queue makes the run fail"
    );
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("report still printed");
    assert_queue_error(report.queue("a-broken"), "WRONGTYPE", "redis");
    let fine = report.queue("b-fine");
    assert_eq!(fine.states["completed"].done, Some(10));
    assert!(fine.error.is_none());
}

#[test]
fn uncovered_unmanaged_and_other_environments_are_left_alone() {
    let w = World::new();
    let now = now_ms();
    for base in [
        "bull:acme:prod:mail",
        "bull:acme:staging:mail",
        "bull:acme:prod:other",
        "legacy:queue",
    ] {
        w.seed(spec(base, 5, 0, 3), now);
    }
    let policy = w.policy(
        r#"version: 1
environments: { production: [prod] }
discovery: { layouts: ["bull:{tenant}:{env}:{queue}"] }
policies:
  - { name: mail, environment: production, queueNamePattern: mail, rules: { completed: { maxAge: 1ms } } }
"#,
    );
    let plan = w.report(&policy, "plan");
    assert_eq!(plan.unmanaged, vec!["legacy:queue"]);
    assert_eq!(
        plan.uncovered,
        vec!["bull:acme:prod:other", "bull:acme:staging:mail"]
    );
    let only_prod = w.run(&policy, &["--json", "--env", "production", "run"]);
    assert!(only_prod.status.success(), "{}", stderr(&only_prod));
    let report: JsonReport = serde_json::from_slice(&only_prod.stdout).expect("json");
    assert_eq!(report.queues.len(), 1);
    assert_eq!(report.queues[0].env.as_deref(), Some("production"));
    assert_eq!(report.queues[0].tenant.as_deref(), Some("acme"));
    assert_eq!(
        report.uncovered,
        vec!["bull:acme:prod:other"],
        "staging is out of scope with --env"
    );
    let mut con = w.con();
    for (key, want) in [
        ("bull:acme:prod:mail:completed", 0u64),
        ("bull:acme:staging:mail:completed", 5),
        ("bull:acme:prod:other:completed", 5),
        ("legacy:queue:completed", 5),
    ] {
        let n: u64 = con.zcard(key).expect("zcard");
        assert_eq!(n, want, "{key}");
    }
}

#[test]
fn notify_under_a_job_rule_reports_only_that_jobs_name_and_deletes_nothing() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 10, 3), now_ms());
    let policy = w.policy("version: 1\nnotify: { log: true }\npolicies: [{ name: m, queueNamePattern: mail, jobs: [{ name: render, failed: { maxAge: 1ms, action: notify } }] }]\n");
    let out = w.run(&policy, &["--json", "run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let s = &run.queues[0].states["failed"];
    assert_eq!(
        (s.action.as_str(), s.matched, s.done),
        ("notify", 5, Some(5))
    );
    let notice_line = stderr(&out)
        .lines()
        .find(|l| l.contains("\"action\":\"notify\""))
        .map(str::to_string)
        .expect("a notice in the log");
    let json = &notice_line[notice_line.find('{').expect("JSON notice")..];
    let notice: serde_json::Value = serde_json::from_str(json).expect("notice JSON");
    assert_eq!(notice["count"], 5);
    let mut con = w.con();
    let jobs = notice["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 5);
    let mut last = 0;
    for job in jobs {
        let id = job["id"].as_str().expect("id");
        let name: String = con.hget(format!("bull:mail:{id}"), "name").expect("name");
        assert_eq!(name, "render", "only the rule's job name is listed");
        let finished = job["finishedOn"].as_i64().expect("finishedOn");
        assert!(finished >= last, "oldest first");
        last = finished;
    }
    let n: u64 = con.zcard("bull:mail:failed").expect("zcard");
    assert_eq!(n, 10, "notify deletes nothing");
}

#[test]
fn a_database_index_in_the_url_is_honoured() {
    let mut w = World::new();
    w.db = 3;
    w.seed(spec("bull:mail", 10, 0, 3), now_ms());
    let policy = w.policy("version: 1\npolicies: [{ name: m, queueNamePattern: mail, rules: { completed: { maxAge: 1ms } } }]\n");
    let run = w.report(&policy, "run");
    assert_eq!(run.queues[0].states["completed"].done, Some(10));
    w.db = 0;
    let keys: u64 = redis::cmd("DBSIZE").query(&mut w.con()).expect("dbsize");
    assert_eq!(keys, 0, "database 0 was never touched");
}

#[test]
fn refused_authentication_is_a_clear_runtime_error() {
    let w = World::new();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query(&mut w.con())
        .expect("set a password");
    let policy = w.policy("version: 1\npolicies: [{ name: a, queueNamePattern: '*', rules: { completed: { maxAge: 1d } } }]\n");
    // requirepass is the default user's password.
    let out = w.run_at(&policy, &w.url(), &["plan"]);
    assert_exit(&out, 1, "refused authentication");
    assert!(
        stderr(&out).contains("redis://:PASSWORD@host:port"),
        "{}",
        stderr(&out)
    );

    let with_password = format!("redis://:s3cret@127.0.0.1:{}/0", w.redis.port());
    let wrong = format!("redis://:wrong@127.0.0.1:{}/0", w.redis.port());
    let ok = w.run_at(&policy, &with_password, &["plan"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let bad = w.run_at(&policy, &wrong, &["plan"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        !stderr(&bad).contains("wrong"),
        "the password is never printed: {}",
        stderr(&bad)
    );
}

/// Issue 42, break 12 (shared invariant 10): a job id that is not UTF-8, in every state of a
/// queue, stops no command. `plan`, `run` (job rules, pending rules, notify, stalled jobs,
/// `moveExhaustedTo`, `ttl`), `report`, `alerts` and `doctor` used to fail on the queue (or
/// on every queue) reading it; now such an id reads as a job with no hash: left alone.
#[test]
fn a_job_id_that_is_not_utf8_stops_no_command() {
    let w = World::new();
    w.seed(spec("bull:mail", 30, 10, 3), now_ms());
    let mut con = w.con();
    // `\xff<state>` in each state, with a hash (the sweep's prefix path removes the
    // finished ones by rank like any other).
    let planted: i64 = redis::cmd("EVAL")
        .arg(
            "for _, s in ipairs({'completed', 'failed', 'delayed', 'prioritized'}) do
               redis.call('ZADD', 'bull:mail:' .. s, 5, '\\255' .. s)
               redis.call('HSET', 'bull:mail:\\255' .. s, 'name', 'render', 'data', '{}',
                 'timestamp', '1', 'opts', '{\"attempts\":1}', 'finishedOn', '5', 'atm', '1')
             end
             for _, s in ipairs({'wait', 'active'}) do
               redis.call('LPUSH', 'bull:mail:' .. s, '\\255' .. s)
               redis.call('HSET', 'bull:mail:\\255' .. s, 'name', 'render', 'data', '{}',
                 'timestamp', '1', 'opts', '{}', 'processedOn', '2')
             end
             return 6",
        )
        .arg(0)
        .query(&mut con)
        .expect("binary ids");
    assert_eq!(planted, 6);
    let policy = w.policy(
        "version: 1
notify: { log: true }
policies:
  - name: mail
    queueNamePattern: mail
    moveExhaustedTo: mail-dlq
    rules:
      completed: { ttl: 30d }
      failed: { maxAge: 1ms, action: notify }
      waiting: { maxAge: 1ms }
      delayed: { maxAge: 1ms }
      prioritized: { maxAge: 1ms }
      stalled: { maxAge: 1ms, action: remove }
    jobs:
      - { name: send-email, completed: { maxAge: 1ms } }
",
    );
    for command in ["plan", "run"] {
        let report = w.report(&policy, command);
        let mail = report.queue("mail");
        assert_eq!(mail.error, None, "{command}: {report:?}");
    }
    let completed: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert!(
        completed < 31,
        "the job rule acted on the send-email jobs: {completed} left"
    );
    for command in ["report", "alerts", "doctor"] {
        let out = w.run(&policy, &[command]);
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!said.contains("UTF-8"), "{command}: {said}");
        assert!(!said.contains("Redis protocol"), "{command}: {said}");
        if command != "alerts" {
            assert!(out.status.success(), "{command}: {said}");
        }
    }
    for state in ["wait", "active", "delayed", "prioritized"] {
        let mut key = b"bull:mail:\xff".to_vec();
        key.extend_from_slice(state.as_bytes());
        let exists: bool = con.exists(key.as_slice()).expect("exists");
        assert!(exists, "the {state} job with a binary id is left alone");
    }
}

/// Issue 12, finding 6: one bad key ending in `:meta` (not UTF-8, or a plain string) must not
/// stop discovery; the real queues are still governed, and the skipped keys are counted.
#[test]
fn a_bad_meta_key_does_not_stop_discovery() {
    let w = World::new();
    w.seed(spec("bull:mail", 30, 0, 3), now_ms());
    let mut con = w.con();
    let _: () = redis::cmd("SET")
        .arg(b"bull:\xff\xfe:meta".as_slice())
        .arg("x")
        .query(&mut con)
        .expect("binary key");
    let _: () = con.set("junk:meta", "a plain string").expect("plain key");
    let policy = w.policy(
        "version: 1\npolicies: [{ name: a, queueNamePattern: '*', rules: { completed: { maxAge: 1ms } } }]\n",
    );
    let out = w.run(&policy, &["--json", "run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("JSON");
    let keys: Vec<&str> = report.queues.iter().map(|q| q.key.as_str()).collect();
    assert_eq!(keys, ["bull:mail"]);
    assert_eq!(report.queues[0].states["completed"].done, Some(30));
    assert!(
        stderr(&out).contains("1 key matching *:meta skipped: its name is not UTF-8"),
        "{}",
        stderr(&out)
    );
}
