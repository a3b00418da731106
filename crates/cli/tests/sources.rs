//! Source lookups (`bullsweep_core::source`) against a real PostgreSQL and real redis-servers:
//! what a source answers for records that exist, are gone, match or not, and when each was
//! last changed; and each way a lookup fails (bad SQL, a wrong column type, a server down, a
//! timeout, a wrong password) with its kind, a message naming the source, and no password.

mod common;

use bullsweep_base::connect::{Conn, connect_url};
use bullsweep_core::source::{Lookup, SourceClients, SourceError, SourceFailure};
use bullsweep_policy::{KeyTemplate, Millis, Source, SourceAnswer, SourceKind, SourcePos};
use bullsweep_testkit::{PrivateRedis, Role};
use common::postgres::{PrivatePostgres, query};
use redis::Commands;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn source(name: &str, kind: SourceKind, timeout_ms: u64) -> (String, Source) {
    let source = Source {
        name: name.to_string(),
        kind,
        timeout: Millis(timeout_ms),
        batch_size: 1000,
        pos: SourcePos::default(),
    };
    (name.to_string(), source)
}

fn postgres(name: &str, url: &str, query: &str, timeout_ms: u64) -> (String, Source) {
    let kind = SourceKind::Postgres {
        url: url.to_string(),
        query: query.to_string(),
    };
    source(name, kind, timeout_ms)
}

fn redis_source(
    name: &str,
    url: Option<&str>,
    field_equals: Option<(&str, &str)>,
) -> (String, Source) {
    let kind = SourceKind::Redis {
        url: url.map(str::to_string),
        key: KeyTemplate::new("cart:{key}").expect("template"),
        field: field_equals.map(|(f, _)| f.to_string()),
        equals: field_equals.map(|(_, e)| e.to_string()),
    };
    source(name, kind, 2000)
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|k| k.to_string()).collect()
}

fn found(matching: Option<bool>, changed_at: Option<i64>) -> SourceAnswer {
    SourceAnswer::Found {
        matching,
        changed_at,
    }
}

/// The clients of `sources` and a lookup bound to a runtime and a governed connection.
struct Lookups {
    rt: Runtime,
    clients: SourceClients,
    governed: Conn,
}

impl Lookups {
    fn new(sources: Vec<(String, Source)>, governed: &PrivateRedis) -> Self {
        let rt = runtime();
        let governed = rt
            .block_on(connect_url(&governed.url(0), "bullsweep-test"))
            .expect("governed Redis");
        let sources: BTreeMap<String, Source> = sources.into_iter().collect();
        Lookups {
            rt,
            clients: SourceClients::new(&sources),
            governed,
        }
    }

    fn ask(&mut self, source: &str, list: &[&str]) -> Result<Lookup, SourceError> {
        let keys = keys(list);
        self.rt
            .block_on(self.clients.lookup(&mut self.governed, source, &keys))
    }

    /// The answers of a lookup that refused no key.
    fn answers(&mut self, source: &str, list: &[&str]) -> HashMap<String, SourceAnswer> {
        let lookup = self
            .ask(source, list)
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        assert!(lookup.refused.is_empty(), "{source}: {lookup:?}");
        lookup.answers
    }

    fn failure(&mut self, source: &str, list: &[&str]) -> SourceError {
        match self.ask(source, list) {
            Ok(answers) => panic!("{source} answered {answers:?}"),
            Err(e) => {
                assert_eq!(e.source, source);
                assert!(
                    e.message.contains(&format!("source `{source}`")),
                    "{}",
                    e.message
                );
                e
            }
        }
    }
}

fn answers_of(list: &[(&str, SourceAnswer)]) -> HashMap<String, SourceAnswer> {
    list.iter().map(|(k, a)| (k.to_string(), *a)).collect()
}

const ORDERS: &str = "
CREATE TABLE orders (
    id text PRIMARY KEY,
    status text NOT NULL,
    updated_at timestamptz,
    updated_ms bigint,
    updated_local timestamp,
    updated_day date
);
INSERT INTO orders VALUES
    ('a', 'pending', '2024-05-01T12:00:00.123Z', 1714564800123, '2024-05-01 12:00:00.123', '2024-05-01'),
    ('b', 'shipped', '2024-05-02T00:00:00Z', 1714608000000, NULL, NULL),
    ('c', 'pending', '1999-12-31T23:59:59.999Z', NULL, '1999-12-31 23:59:59.999', NULL);
CREATE FUNCTION slow_if(keys text[]) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF 'slow' = ANY(keys) THEN PERFORM pg_sleep(3); END IF;
    RETURN true;
END $$;
";

fn orders_database() -> PrivatePostgres {
    let pg = PrivatePostgres::start();
    // Timestamps must not depend on the session's time zone.
    pg.admin("ALTER DATABASE postgres SET timezone = 'Europe/Berlin'")
        .expect("time zone");
    pg.admin(ORDERS).expect("orders");
    pg
}

#[test]
fn postgres_answers_found_missing_matching_and_changed_at() {
    let pg = orders_database();
    let redis = PrivateRedis::start().expect("redis-server");
    let url = format!("{}?application_name=bs_orders", pg.url("postgres"));
    let mut l = Lookups::new(
        vec![
            postgres(
                "orders",
                &url,
                "SELECT id AS key, status = 'pending' AS matching, updated_at AS changed_at FROM orders WHERE id = ANY($1)",
                2000,
            ),
            postgres(
                "millis",
                &pg.url("postgres"),
                "SELECT id AS key, updated_ms AS changed_at FROM orders WHERE id = ANY($1)",
                2000,
            ),
            postgres(
                "local",
                &pg.url("postgres"),
                "SELECT id AS key, updated_local AS changed_at FROM orders WHERE id = ANY($1)",
                2000,
            ),
            postgres(
                "doubled",
                &pg.url("postgres"),
                "SELECT o.id AS key, o.status = s AS matching, o.updated_ms AS changed_at FROM orders o, unnest(ARRAY['shipped', 'pending']) s WHERE o.id = ANY($1)",
                2000,
            ),
        ],
        &redis,
    );
    let expected = answers_of(&[
        ("a", found(Some(true), Some(1_714_564_800_123))),
        ("b", found(Some(false), Some(1_714_608_000_000))),
        ("c", found(Some(true), Some(946_684_799_999))),
        ("gone", SourceAnswer::Missing),
    ]);
    for _ in 0..3 {
        assert_eq!(l.answers("orders", &["a", "b", "c", "gone"]), expected);
    }
    // Three lookups, one connection.
    let sessions = query(
        &pg.url("postgres"),
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bs_orders'",
    )
    .expect("pg_stat_activity");
    assert_eq!(sessions[0][0].as_deref(), Some("1"));

    assert_eq!(
        l.answers("millis", &["a", "c", "gone"]),
        answers_of(&[
            ("a", found(None, Some(1_714_564_800_123))),
            ("c", found(None, None)),
            ("gone", SourceAnswer::Missing),
        ])
    );
    // A timestamp without a time zone is read as UTC.
    assert_eq!(
        l.answers("local", &["a", "b", "c"]),
        answers_of(&[
            ("a", found(None, Some(1_714_564_800_123))),
            ("b", found(None, None)),
            ("c", found(None, Some(946_684_799_999))),
        ])
    );
    // A key in several rows matches if any row does.
    assert_eq!(
        l.answers("doubled", &["a", "b"]),
        answers_of(&[
            ("a", found(Some(true), Some(1_714_564_800_123))),
            ("b", found(Some(true), Some(1_714_608_000_000))),
        ])
    );
}

#[test]
fn postgres_query_errors_name_the_source_and_what_to_fix() {
    let pg = orders_database();
    let redis = PrivateRedis::start().expect("redis-server");
    let url = pg.url("postgres");
    let cases = [
        ("syntax", "SELEC id AS key FROM orders", "syntax error"),
        (
            "nokey",
            "SELECT id FROM orders WHERE id = ANY($1)",
            "no `key` column (it returns: id)",
        ),
        ("intkey", "SELECT 1 AS key", "`key` column is of type int4"),
        (
            "textmatch",
            "SELECT id AS key, status AS matching FROM orders WHERE id = ANY($1)",
            "`matching` column is of type text",
        ),
        (
            "daychange",
            "SELECT id AS key, updated_day AS changed_at FROM orders WHERE id = ANY($1)",
            "`changed_at` column is of type date",
        ),
        (
            "intid",
            "SELECT id AS key FROM orders WHERE length(id) = ANY($1)",
            "operator does not exist: integer = text (`$1` is the keys as text[]",
        ),
        (
            "nodiv",
            "SELECT id AS key FROM orders WHERE id = ANY($1) AND 1 / 0 = 1",
            "division by zero",
        ),
    ];
    let mut sources: Vec<_> = cases
        .iter()
        .map(|(name, sql, _)| postgres(name, &url, sql, 2000))
        .collect();
    sources.push(postgres(
        "good",
        &url,
        "SELECT id AS key FROM orders WHERE id = ANY($1)",
        2000,
    ));
    let mut l = Lookups::new(sources, &redis);
    for (name, _, words) in cases {
        let e = l.failure(name, &["a"]);
        assert_eq!(e.kind, SourceFailure::Query, "{name}: {}", e.message);
        assert_eq!(e.kind.as_str(), "query");
        assert!(e.message.contains(words), "{name}: {}", e.message);
        // The same source fails the same way again (nothing cached from the failure).
        assert_eq!(l.failure(name, &["a"]).kind, SourceFailure::Query);
    }
    assert_eq!(
        l.answers("good", &["a", "x"]),
        answers_of(&[("a", found(None, None)), ("x", SourceAnswer::Missing)])
    );
    let e = l.failure("undeclared", &["a"]);
    assert!(e.message.contains("not declared"), "{}", e.message);
}

#[test]
fn a_slow_postgres_times_out_and_the_next_batch_reconnects() {
    let pg = orders_database();
    let redis = PrivateRedis::start().expect("redis-server");
    let mut l = Lookups::new(
        vec![postgres(
            "slow",
            &pg.url("postgres"),
            "SELECT id AS key FROM orders WHERE id = ANY($1) AND slow_if($1)",
            200,
        )],
        &redis,
    );
    let e = l.failure("slow", &["a", "slow"]);
    assert_eq!(e.kind, SourceFailure::Timeout, "{}", e.message);
    assert_eq!(e.kind.as_str(), "timeout");
    assert!(e.message.contains("within 200ms"), "{}", e.message);
    assert_eq!(
        l.answers("slow", &["a", "gone"]),
        answers_of(&[("a", found(None, None)), ("gone", SourceAnswer::Missing)])
    );
}

#[test]
fn a_postgres_that_is_down_is_unreachable() {
    let pg = PrivatePostgres::start();
    let url = pg.url("app").replace("app@", "app:hunter2@");
    drop(pg);
    let redis = PrivateRedis::start().expect("redis-server");
    let sql = "SELECT id AS key FROM orders WHERE id = ANY($1)";
    let mut l = Lookups::new(vec![postgres("orders", &url, sql, 2000)], &redis);
    for _ in 0..2 {
        let e = l.failure("orders", &["a"]);
        assert_eq!(e.kind, SourceFailure::Unreachable, "{}", e.message);
        assert_eq!(e.kind.as_str(), "unreachable");
        assert!(e.message.contains("cannot connect"), "{}", e.message);
        assert!(e.message.contains("app:***@127.0.0.1"), "{}", e.message);
        assert!(!e.message.contains("hunter2"), "{}", e.message);
    }
}

#[test]
fn a_wrong_postgres_password_is_an_auth_failure() {
    let pg = orders_database();
    pg.admin("CREATE ROLE secure LOGIN PASSWORD 'right-pw'; GRANT SELECT ON orders TO secure")
        .expect("role");
    // Password logins for `secure`, ahead of the cluster's trust lines.
    let hba = pg.dir().join("data").join("pg_hba.conf");
    let before = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    std::fs::write(
        &hba,
        format!("host all secure 127.0.0.1/32 scram-sha-256\n{before}"),
    )
    .expect("write pg_hba.conf");
    pg.admin("SELECT pg_reload_conf()").expect("reload");
    let redis = PrivateRedis::start().expect("redis-server");
    let at = |auth: &str| format!("postgres://{auth}@127.0.0.1:{}/postgres", pg.port);
    let sql = "SELECT id AS key FROM orders WHERE id = ANY($1)";
    let mut l = Lookups::new(
        vec![
            postgres("wrong", &at("secure:wrong-pw"), sql, 2000),
            postgres("none", &at("secure"), sql, 2000),
            postgres("right", &at("secure:right-pw"), sql, 2000),
        ],
        &redis,
    );
    // The server reads pg_hba.conf again soon after the reload is asked for.
    let deadline = Instant::now() + Duration::from_secs(10);
    let e = loop {
        match l.ask("wrong", &["a"]) {
            Err(e) if e.kind == SourceFailure::Auth => break e,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("a wrong password was not refused: {other:?}"),
        }
    };
    assert_eq!(e.kind.as_str(), "auth");
    assert!(
        e.message.contains("password authentication failed"),
        "{}",
        e.message
    );
    assert!(!e.message.contains("wrong-pw"), "{}", e.message);
    assert!(e.message.contains("secure:***@"), "{}", e.message);
    let e = l.failure("none", &["a"]);
    assert_eq!(e.kind, SourceFailure::Auth, "{}", e.message);
    assert!(e.message.contains("gives none"), "{}", e.message);
    assert_eq!(
        l.answers("right", &["a", "gone"]),
        answers_of(&[("a", found(None, None)), ("gone", SourceAnswer::Missing)])
    );
}

/// Issue 42, break 3: an answer in another form than the keys asked (a `char(n)` column's
/// blanks, a case, another type's text) fails its batch, naming a key and the likely cause.
#[test]
fn an_answer_naming_keys_not_asked_fails_with_an_example_and_the_cause() {
    let pg = orders_database();
    pg.admin(
        "CREATE TABLE codes (code char(6) PRIMARY KEY); INSERT INTO codes VALUES ('a'), ('b');",
    )
    .expect("codes");
    let redis = PrivateRedis::start().expect("redis-server");
    let url = pg.url("postgres");
    let mut l = Lookups::new(
        vec![
            postgres(
                "padded",
                &url,
                "SELECT code AS key FROM codes WHERE code = ANY($1)",
                2000,
            ),
            postgres(
                "upper",
                &url,
                "SELECT upper(id) AS key FROM orders WHERE id = ANY($1)",
                2000,
            ),
            postgres(
                "dotted",
                &url,
                "SELECT id || '.0' AS key FROM orders WHERE id = ANY($1)",
                2000,
            ),
        ],
        &redis,
    );
    let cases = [
        (
            "padded",
            r#"e.g. "a     ""#,
            r#"it is the key "a" padded with blanks"#,
        ),
        (
            "upper",
            r#"e.g. "A""#,
            r#"differs from the key "a" only in case"#,
        ),
        (
            "dotted",
            r#"e.g. "a.0""#,
            "likely causes: a `char(n)` column",
        ),
    ];
    for (name, example, cause) in cases {
        let e = l.failure(name, &["a", "gone"]);
        assert_eq!(e.kind, SourceFailure::Query, "{name}: {}", e.message);
        for words in [
            "not asked about",
            "nothing of this batch is acted on",
            example,
            cause,
        ] {
            assert!(e.message.contains(words), "{name}, {words}: {}", e.message);
        }
    }
}

/// Issue 42, break 13: a key PostgreSQL cannot take (a NUL byte) is refused before the query,
/// and one the query refuses (found by asking in halves) is refused alone while the rest is
/// answered; a query that fails whatever it is asked, or on too many keys, fails the batch.
/// Redis keys are bytes: nothing is refused there.
#[test]
fn a_key_postgres_refuses_is_refused_alone_and_the_rest_answered() {
    let pg = orders_database();
    pg.admin(
        "CREATE FUNCTION picky(k text) RETURNS boolean LANGUAGE plpgsql AS $$
         BEGIN
             IF k LIKE 'bad%' OR k = 'all' THEN
                 RAISE EXCEPTION 'cannot take %', k USING ERRCODE = '22023';
             END IF;
             RETURN true;
         END $$;",
    )
    .expect("picky");
    let redis = PrivateRedis::start().expect("redis-server");
    let url = pg.url("postgres");
    let picky =
        "SELECT o.id AS key FROM unnest($1) k LEFT JOIN orders o ON o.id = k WHERE picky(k)";
    let mut l = Lookups::new(
        vec![
            postgres(
                "orders",
                &url,
                "SELECT id AS key FROM orders WHERE id = ANY($1)",
                2000,
            ),
            postgres("picky", &url, picky, 2000),
            postgres(
                "never",
                &url,
                &picky.replace("picky(k)", "picky('all')"),
                2000,
            ),
            redis_source("carts", None, None),
        ],
        &redis,
    );
    let nul = l.ask("orders", &["a", "x\0y", "gone"]).expect("answered");
    assert_eq!(
        nul.answers,
        answers_of(&[("a", found(None, None)), ("gone", SourceAnswer::Missing)])
    );
    assert!(
        nul.refusal("x\0y").is_some_and(|w| w.contains("NUL byte")),
        "{nul:?}"
    );
    assert_eq!(
        nul.answer("x\0y"),
        None,
        "a refused key is never taken as gone"
    );

    // One key of a hundred makes the query fail: it alone is refused.
    let mut hundred: Vec<String> = (0..97).map(|i| format!("k{i}")).collect();
    hundred.extend(["a", "b", "bad-1"].map(String::from));
    let list: Vec<&str> = hundred.iter().map(String::as_str).collect();
    let one = l.ask("picky", &list).expect("answered");
    assert_eq!(one.refused.keys().collect::<Vec<_>>(), ["bad-1"], "{one:?}");
    assert!(
        one.refused["bad-1"].contains("cannot take bad-1"),
        "{one:?}"
    );
    assert_eq!(one.answers.len(), 99);
    assert_eq!(one.answer("a"), Some(found(None, None)));
    assert_eq!(one.answer("k3"), Some(SourceAnswer::Missing));

    // Alone, a failing key cannot be told from a failing query; a query that fails whatever
    // it is asked blames no key; forty bad keys of a hundred take more queries than allowed.
    let e = l.failure("picky", &["bad-1"]);
    assert_eq!(e.kind, SourceFailure::Query, "{}", e.message);
    let e = l.failure("never", &list);
    assert!(e.message.contains("cannot take all"), "{}", e.message);
    let many: Vec<String> = (0..100)
        .map(|i| {
            if i % 5 < 2 {
                format!("bad-{i}")
            } else {
                format!("k{i}")
            }
        })
        .collect();
    let list: Vec<&str> = many.iter().map(String::as_str).collect();
    let e = l.failure("picky", &list);
    assert!(e.message.contains("cannot take bad-"), "{}", e.message);

    let carts = l.ask("carts", &["x\0y", "1"]).expect("answered");
    assert!(carts.refused.is_empty(), "{carts:?}");
    assert_eq!(carts.answer("x\0y"), Some(SourceAnswer::Missing));
}

/// Records on a source server's database 2: an open cart, a closed one, a string, a hash
/// without the field; `cart:5` is absent.
fn seed_carts(server: &PrivateRedis) {
    let mut con = server
        .client(2)
        .and_then(|c| c.get_connection())
        .expect("source connection");
    let _: () = con.hset("cart:1", "status", "open").expect("seed");
    let _: () = con.hset("cart:2", "status", "closed").expect("seed");
    let _: () = con.set("cart:3", "open").expect("seed");
    let _: () = con.hset("cart:4", "owner", "u1").expect("seed");
}

#[test]
fn redis_sources_answer_from_their_own_server_or_the_governed_one() {
    let governed = PrivateRedis::start().expect("redis-server");
    let carts = PrivateRedis::start().expect("redis-server");
    seed_carts(&carts);
    let mut con = governed
        .client(0)
        .and_then(|c| c.get_connection())
        .expect("governed");
    let _: () = con.hset("cart:5", "status", "open").expect("seed");
    let _: () = con.hset("cart:6", "status", "closed").expect("seed");
    let url = carts.url(2);
    let mut l = Lookups::new(
        vec![
            redis_source("open", Some(&url), Some(("status", "open"))),
            redis_source("exists", Some(&url), None),
            redis_source("local", None, Some(("status", "open"))),
        ],
        &governed,
    );
    let all = ["1", "2", "3", "4", "5", "6"];
    assert_eq!(
        l.answers("open", &all),
        answers_of(&[
            ("1", found(Some(true), None)),
            ("2", found(Some(false), None)),
            ("3", found(Some(false), None)),
            ("4", found(Some(false), None)),
            ("5", SourceAnswer::Missing),
            ("6", SourceAnswer::Missing),
        ])
    );
    assert_eq!(
        l.answers("exists", &all),
        answers_of(&[
            ("1", found(None, None)),
            ("2", found(None, None)),
            ("3", found(None, None)),
            ("4", found(None, None)),
            ("5", SourceAnswer::Missing),
            ("6", SourceAnswer::Missing),
        ])
    );
    assert_eq!(
        l.answers("local", &all),
        answers_of(&[
            ("1", SourceAnswer::Missing),
            ("2", SourceAnswer::Missing),
            ("3", SourceAnswer::Missing),
            ("4", SourceAnswer::Missing),
            ("5", found(Some(true), None)),
            ("6", found(Some(false), None)),
        ])
    );
}

#[test]
fn a_redis_source_down_paused_or_refusing_fails_and_recovers() {
    let governed = PrivateRedis::start().expect("redis-server");
    let mut carts = PrivateRedis::start().expect("redis-server");
    seed_carts(&carts);
    let wrong = format!(
        "redis://{}:wrong-pw@127.0.0.1:{}/2",
        Role::ReadOnly.user(),
        carts.port()
    );
    let mut paused = redis_source("paused", Some(&carts.url(2)), None);
    paused.1.timeout = Millis(200);
    let mut l = Lookups::new(
        vec![
            redis_source("carts", Some(&carts.url(2)), Some(("status", "open"))),
            redis_source("wrong", Some(&wrong), None),
            paused,
        ],
        &governed,
    );
    let open = answers_of(&[("1", found(Some(true), None)), ("5", SourceAnswer::Missing)]);
    assert_eq!(l.answers("carts", &["1", "5"]), open);

    let e = l.failure("wrong", &["1"]);
    assert_eq!(e.kind, SourceFailure::Auth, "{}", e.message);
    assert!(!e.message.contains("wrong-pw"), "{}", e.message);

    // A server that holds every command past the source's timeout.
    let connected = answers_of(&[("1", found(None, None)), ("5", SourceAnswer::Missing)]);
    assert_eq!(l.answers("paused", &["1", "5"]), connected);
    let mut admin = carts
        .client(0)
        .and_then(|c| c.get_connection())
        .expect("admin");
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "1000", "ALL"])
        .query(&mut admin)
        .expect("pause");
    let e = l.failure("paused", &["1"]);
    assert_eq!(e.kind, SourceFailure::Timeout, "{}", e.message);
    // PING is held until the pause ends; then the source answers again.
    let _: String = redis::cmd("PING").query(&mut admin).expect("ping");
    assert_eq!(l.answers("paused", &["1", "5"]), connected);

    // A restart breaks the kept connection: at most one batch fails, the next reconnects.
    carts.kill_and_restart().expect("restart");
    seed_carts(&carts);
    let mut failures = Vec::new();
    let answered = loop {
        match l.ask("carts", &["1", "5"]) {
            Ok(answers) => break answers,
            Err(e) if failures.is_empty() => failures.push(e),
            Err(e) => panic!("no reconnection: {failures:?} then {e}"),
        }
    };
    assert_eq!(answered.answers, open);
    for e in &failures {
        assert_eq!(e.kind, SourceFailure::Unreachable, "{}", e.message);
    }

    drop(carts);
    let e = l.failure("carts", &["1"]);
    assert_eq!(e.kind, SourceFailure::Unreachable, "{}", e.message);
    assert!(
        e.message.contains("redis at redis://127.0.0.1:"),
        "{}",
        e.message
    );
}
