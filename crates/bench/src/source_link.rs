//! `--strategy source`: source-linked cleanup of `--jobs` delayed reminder jobs, each naming
//! its order (`data.orderId`), against a private PostgreSQL table of as many orders, of which
//! 30% were deleted and 20% are no longer `pending`. Each round, on identical fresh datasets:
//! - **bullsweep**: `bullsweep run`'s sweep under a policy with a `postgres` source and the
//!   job rule `source: { name: orders, key: data.orderId }`, `deleteWhen:
//!   sourceDeletedOrNoLongerMatching`, `keepFor: 1ms` (one query per batch of 1,000 keys);
//! - **BullMQ**: the seed's approach (`bench/source.js`): for each job `Job.fromId`, one query
//!   for its order, `job.remove()` when the order is gone or no longer pending; stopped after
//!   `--seconds`.
//!
//! Both examine every job and must remove exactly those whose order is gone. Jobs/s counts
//! jobs examined; PostgreSQL's queries are counted by `pg_stat_statements`.

use super::node::{NodeTarget, run_node};
use super::pending::{Removal, sweep_until_done};
use super::probe::{
    flush, flush_async, slow_calls, slowlog_begin, slowlog_end, start_counters, stop_counters,
};
use super::report::{Measurement, json_or_table, measurement_table, median, ratio_line, summarize};
use super::{BASE, BenchConfig, QUEUE};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_policy::JobState;
use bullsweep_testkit::{PendingSeed, PrivatePostgres, seed_pending};
use serde::Serialize;
use tokio_postgres::Client;

/// The contenders, in the order each round runs them.
const CONTENDERS: [&str; 2] = ["bullsweep", "bullmq"];
/// The query that counts the source's queries (every statement that reads `orders`).
const COUNT_QUERIES: &str = "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query LIKE '%FROM orders%' AND query NOT LIKE '%pg_stat_statements%'";

/// Whether order `id` is gone for the link: deleted (`id % 10` is 0, 1 or 2: 30%) or no
/// longer `pending` (3 or 4: 20%).
fn gone(id: u64) -> bool {
    id % 10 < 5
}

/// One contender's round, beyond the shared figures.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceRound {
    /// `bullsweep` or `bullmq`.
    contender: String,
    /// Round number.
    round: u32,
    /// Jobs removed (their order gone).
    removed: u64,
    /// PostgreSQL queries on `orders` per 1,000 jobs examined.
    queries_per_1000_jobs: f64,
}

/// What `--strategy source` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceReport {
    /// Always `source`.
    strategy: &'static str,
    /// Jobs (and orders) per dataset.
    jobs: u64,
    /// Jobs whose order is gone: deleted or no longer pending.
    gone: u64,
    /// Approximate size of each job hash.
    job_bytes: usize,
    /// How long BullMQ's contender may run (`--seconds`).
    cap_seconds: u64,
    /// One row per contender and round; `removed` there counts jobs examined.
    rounds: Vec<Measurement>,
    /// Medians over rounds (the worst round for probe max and longest call).
    summary: Vec<Measurement>,
    /// Removed jobs and queries per contender and round.
    sources: Vec<SourceRound>,
    /// bullsweep / BullMQ jobs/s, per round.
    ratios: Vec<f64>,
    /// Their median.
    ratio: Option<f64>,
    /// How each run went: jobs removed, queries, slow calls.
    notes: Vec<String>,
}

/// Runs `--strategy source` and returns the table, or JSON.
pub(crate) async fn run(
    con: &mut Conn,
    url: &str,
    args: &BenchConfig,
    node: &NodeTarget,
) -> Result<String, Error> {
    let pg = PrivatePostgres::start_with(&["shared_preload_libraries=pg_stat_statements"])
        .map_err(|e| Error::runtime(format!("cannot start a private PostgreSQL: {e}")))?;
    let pg_url = pg.url("postgres");
    let client = bullsweep_core::postgres::connect(&pg_url)
        .await
        .map_err(|e| Error::runtime(format!("the bench's PostgreSQL: {e}")))?;
    eprintln!("filling {} orders", args.jobs);
    fill_orders(&client, args.jobs).await?;
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let saved = slowlog_begin(con).await.map_err(redis_err)?;
    let (mut rounds, mut sources, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=args.rounds.max(1) {
        for contender in CONTENDERS {
            eprintln!("round {round}: {contender}, {} delayed jobs", args.jobs);
            let run = Contender {
                name: contender,
                pg_url: &pg_url,
                client: &client,
            };
            let (mut m, s, note) = run.measure(con, url, args, node).await?;
            m.round = round;
            notes.push(format!("round {round}, {}: {note}", m.contender));
            sources.push(SourceRound { round, ..s });
            rounds.push(m);
        }
    }
    slowlog_end(con, saved).await.map_err(redis_err)?;
    flush_async(con, url).await?;
    let ratios: Vec<f64> = (1..=args.rounds.max(1))
        .filter_map(|r| {
            let rate = |c: &str| {
                rounds
                    .iter()
                    .find(|m| m.round == r && m.contender == c)
                    .map(|m| m.jobs_per_sec)
            };
            Some(rate("bullsweep")? / rate("bullmq")?)
        })
        .collect();
    let report = SourceReport {
        strategy: "source",
        jobs: args.jobs,
        gone: (1..=args.jobs).filter(|i| gone(*i)).count() as u64,
        job_bytes: args.job_bytes,
        cap_seconds: args.seconds,
        summary: CONTENDERS.map(|c| summarize(c, &rounds)).into(),
        rounds,
        sources,
        ratio: median(ratios.clone()),
        ratios,
        notes,
    };
    json_or_table(&report, args.json, table)
}

/// Creates `orders` with `jobs` rows, deletes 30% and moves 20% out of `pending` (see
/// [`gone`]), and turns on `pg_stat_statements`.
async fn fill_orders(client: &Client, jobs: u64) -> Result<(), Error> {
    let sql = format!(
        "CREATE EXTENSION pg_stat_statements;
         CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL, updated_at timestamptz NOT NULL);
         INSERT INTO orders SELECT g::text, 'pending', now() - interval '1 day' FROM generate_series(1, {jobs}) g;
         DELETE FROM orders WHERE id::bigint % 10 IN (0, 1, 2);
         UPDATE orders SET status = 'paid' WHERE id::bigint % 10 IN (3, 4);"
    );
    let pg_err = |e| Error::runtime(format!("filling the orders table: {e}"));
    client.batch_execute(&sql).await.map_err(pg_err)?;
    // VACUUM cannot run in the implicit transaction of a multi-statement batch.
    client
        .batch_execute("VACUUM ANALYZE orders")
        .await
        .map_err(pg_err)
}

/// One contender of a round, with the PostgreSQL it asks.
struct Contender<'a> {
    name: &'static str,
    pg_url: &'a str,
    client: &'a Client,
}

impl Contender<'_> {
    /// Seeds a fresh dataset, runs the contender while the prober runs, counts its queries,
    /// checks what is left; returns the figures, the source figures and a note.
    async fn measure(
        &self,
        con: &mut Conn,
        url: &str,
        args: &BenchConfig,
        node: &NodeTarget,
    ) -> Result<(Measurement, SourceRound, String), Error> {
        let redis_err = |e: redis::RedisError| Error::redis(url, &e);
        flush(con, url).await?;
        let spec = PendingSeed {
            base: BASE.to_string(),
            state: JobState::Delayed,
            jobs: args.jobs,
            expired: 0,
            max_age_ms: 7_200_000,
            delay_ms: 86_400_000,
            name: "remind".into(),
            job_bytes: args.job_bytes,
        };
        seed_pending(con, &spec, now_ms())
            .await
            .map_err(redis_err)?;
        self.sql("SELECT pg_stat_statements_reset()").await?;
        let cpu_before = start_counters(con).await.map_err(redis_err)?;
        let (examined, run) = match self.name {
            "bullsweep" => {
                let expected = (1..=args.jobs).filter(|i| gone(*i)).count() as u64;
                let policy = policy(self.pg_url);
                let run = sweep_until_done(con, url, &policy, expected).await?;
                (args.jobs, run)
            }
            _ => self.bullmq(node, url, args)?,
        };
        let slow = slow_calls(con).await.map_err(redis_err)?;
        let counters = stop_counters(con, cpu_before).await.map_err(redis_err)?;
        let queries = self.count_queries().await?;
        check_left(con, url, self.name, &spec, examined, run.removed).await?;
        let per_1000 = queries as f64 * 1_000.0 / examined.max(1) as f64;
        let note = format!(
            "{}; examined {examined}, removed {}; {queries} queries ({per_1000:.2} per 1,000 jobs); {} calls over 5 ms, the longest {:.2} ms: {}",
            run.note, run.removed, slow.over_5ms, slow.longest_ms, slow.longest
        );
        let m = Measurement::of_run(self.name, examined, run.seconds, run.probes, counters, 0);
        let s = SourceRound {
            contender: self.name.to_string(),
            round: 0,
            removed: run.removed,
            queries_per_1000_jobs: per_1000,
        };
        Ok((m, s, note))
    }

    /// BullMQ: `bench/source.js` over every job, for at most `--seconds`; jobs examined and
    /// the run.
    fn bullmq(
        &self,
        node: &NodeTarget,
        url: &str,
        args: &BenchConfig,
    ) -> Result<(u64, Removal), Error> {
        let node_args = [
            QUEUE.to_string(),
            "1".into(),
            args.jobs.to_string(),
            self.pg_url.to_string(),
            args.seconds.to_string(),
        ];
        let script = node.compat_dir.join("bench/source.js");
        let (value, probes) = run_node(node, &script, &node_args, url)?;
        let examined = value["examined"].as_u64().unwrap_or(0);
        if value["checked"].as_u64().unwrap_or(0) == 0 {
            return Err(Error::runtime("BullMQ's contender read no seeded job back"));
        }
        let note = if examined < args.jobs {
            format!(
                "stopped at --seconds {} (jobs/s is over the jobs examined)",
                args.seconds
            )
        } else {
            "every job examined".to_string()
        };
        let run = Removal {
            removed: value["removed"].as_u64().unwrap_or(0),
            seconds: value["ms"].as_f64().unwrap_or(f64::NAN) / 1_000.0,
            probes,
            note,
        };
        Ok((examined, run))
    }

    /// Runs one statement of the bench's own.
    async fn sql(&self, sql: &str) -> Result<(), Error> {
        self.client
            .batch_execute(sql)
            .await
            .map_err(|e| Error::runtime(format!("the bench's PostgreSQL: {e}")))
    }

    /// Queries on `orders` since the last reset.
    async fn count_queries(&self) -> Result<u64, Error> {
        let pg_err = |e: tokio_postgres::Error| {
            Error::runtime(format!("counting queries (pg_stat_statements): {e}"))
        };
        let row = self
            .client
            .query_one(COUNT_QUERIES, &[])
            .await
            .map_err(pg_err)?;
        let calls: i64 = row.try_get(0).map_err(pg_err)?;
        Ok(calls.max(0) as u64)
    }
}

/// bullsweep's policy: the `orders` source and the reminders' link to it.
fn policy(pg_url: &str) -> String {
    format!(
        r#"version: 1
sources:
  orders:
    postgres:
      url: "{pg_url}"
      query: "SELECT id AS key, status = 'pending' AS matching, updated_at AS changed_at FROM orders WHERE id = ANY($1)"
      timeout: 10s
      batchSize: 1000
policies:
  - name: reminders
    queueNamePattern: bench
    jobs:
      - name: remind
        source: {{ name: orders, key: data.orderId }}
        deleteWhen: sourceDeletedOrNoLongerMatching
        keepFor: 1ms
"#
    )
}

/// Fails unless, of the first `examined` jobs, exactly those whose order is gone were removed
/// (the count, the set's size, and each of the first 20 by its hash).
async fn check_left(
    con: &mut Conn,
    url: &str,
    contender: &str,
    spec: &PendingSeed,
    examined: u64,
    removed: u64,
) -> Result<(), Error> {
    let keys = QueueKeys::new(&spec.base);
    let (delayed, _) = keys.state_keys(JobState::Delayed).swap_remove(0);
    let expected = (1..=examined).filter(|i| gone(*i)).count() as u64;
    let mut pipe = redis::pipe();
    pipe.zcard(&delayed);
    let sample: Vec<u64> = (1..=examined.min(20)).collect();
    for id in &sample {
        pipe.exists(keys.job(&id.to_string()));
    }
    let mut answers: Vec<i64> = pipe
        .query_async(con)
        .await
        .map_err(|e| Error::redis(url, &e))?;
    let left = answers.remove(0).max(0) as u64;
    let wrong: Vec<u64> = sample
        .iter()
        .zip(&answers)
        .filter(|(id, there)| (**there == 1) == gone(**id))
        .map(|(id, _)| *id)
        .collect();
    if removed != expected || left != spec.jobs - removed || !wrong.is_empty() {
        return Err(Error::runtime(format!(
            "{contender} examined {examined} jobs and removed {removed} (expected {expected}), left {left} of {}; jobs removed or kept against their order: {wrong:?}",
            spec.jobs
        )));
    }
    Ok(())
}

/// The summary table, the ratio, and the notes.
fn table(r: &SourceReport) -> String {
    let rounds = r.rounds.iter().map(|m| m.round).max().unwrap_or(0);
    let mut out = format!(
        "{} delayed reminder jobs of ~{} bytes per dataset, {} of them for orders deleted (30%) or no longer pending (20%); jobs = jobs examined; medians of {rounds} rounds (probe max and longest call: worst round)\n{}",
        r.jobs,
        r.job_bytes,
        r.gone,
        measurement_table(&r.summary)
    );
    if let Some(m) = r.ratio {
        out.push_str(&ratio_line(
            "bullsweep / BullMQ Job.fromId + query + job.remove()",
            m,
            &r.ratios,
        ));
    }
    let ours: Vec<f64> = r
        .sources
        .iter()
        .filter(|s| s.contender == "bullsweep")
        .map(|s| s.queries_per_1000_jobs)
        .collect();
    if let Some(q) = median(ours) {
        out.push_str(&format!(
            "\nbullsweep: {q:.2} PostgreSQL queries per 1,000 jobs (median)"
        ));
    }
    for n in &r.notes {
        out.push_str(&format!("\n{n}"));
    }
    out
}
