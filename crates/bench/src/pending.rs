//! `--strategy pending`: `--jobs` pending jobs in one queue, the oldest half added more than
//! the rule's `maxAge: 1h` ago; first all `waiting` (the `wait` list), then all `delayed` (the
//! `delayed` set). On identical fresh datasets, each round:
//! - **bullsweep** removes the expired half with `bullsweep run`'s own sweep: one discovery,
//!   then sweeps (as the daemon sweeps between discovery passes) until the expired half is
//!   gone, or a sweep removes nothing: a sweep reaches only 20,000 jobs into each end of a long
//!   list, so a million-job `wait` list takes one sweep per 20,000 expired jobs;
//! - **BullMQ** removes the same ids, oldest first, with the script `Job.remove` runs
//!   (`bench/pending.js`), stopped after `--seconds`: on a long `wait` list each call's `LREM`
//!   walks the list from its head to the oldest job at its tail.
//!
//! Jobs/s, the probe's latency, the longest call (with what it was), and the ratio per state.

use super::node::{NodeTarget, run_node};
use super::probe::{
    Prober, flush, flush_async, info_number, slow_calls, slowlog_begin, slowlog_end,
    start_counters, stop_counters,
};
use super::report::{Measurement, json_or_table, measurement_table, median, ratio_line, summarize};
use super::{BASE, BenchConfig, QUEUE};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_core::engine::{self, Mode, SweepOptions};
use bullsweep_core::ops::DEFAULT_BUDGET_US;
use bullsweep_policy::JobState;
use bullsweep_testkit::{PendingSeed, seed_pending};
use serde::Serialize;
use std::time::{Duration, Instant};

/// The rule's `maxAge`, in ms.
const MAX_AGE_MS: i64 = 3_600_000;
/// Each delayed job's delay: a day, so that none is due during the bench.
const DELAY_MS: i64 = 86_400_000;
/// The policy bullsweep runs.
const POLICY: &str = "version: 1\npolicies:\n  - name: pending\n    queueNamePattern: bench\n    rules:\n      waiting: { maxAge: 1h }\n      delayed: { maxAge: 1h }\n";
/// The states measured, in order.
const STATES: [JobState; 2] = [JobState::Waiting, JobState::Delayed];
/// The contenders, in the order each state runs them.
const CONTENDERS: [&str; 2] = ["bullsweep", "bullmq"];

/// bullsweep jobs/s divided by BullMQ's, for one state.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StateRatio {
    /// `waiting` or `delayed`.
    state: &'static str,
    /// One per round.
    rounds: Vec<f64>,
    /// Their median.
    median: Option<f64>,
}

/// What `--strategy pending` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PendingReport {
    /// Always `pending`.
    strategy: &'static str,
    /// Jobs per dataset.
    jobs: u64,
    /// The expired jobs among them, the ones removed.
    expired: u64,
    /// Approximate size of each job hash.
    job_bytes: usize,
    /// How long BullMQ's contender may run (`--seconds`).
    cap_seconds: u64,
    /// One row per contender, state and round (`bullsweep-waiting`, …).
    rounds: Vec<Measurement>,
    /// Medians over rounds (the worst round for probe max and longest call).
    summary: Vec<Measurement>,
    /// bullsweep / BullMQ jobs/s, per state.
    ratios: Vec<StateRatio>,
    /// How each run went: sweeps needed, a BullMQ run stopped at the cap, the longest call.
    notes: Vec<String>,
}

/// One contender's removal: jobs, seconds, probe samples, and what to note.
pub(crate) struct Removal {
    pub(crate) removed: u64,
    pub(crate) seconds: f64,
    pub(crate) probes: Vec<Duration>,
    pub(crate) note: String,
}

/// Runs `--strategy pending` and returns the table, or JSON.
pub(crate) async fn run(
    con: &mut Conn,
    url: &str,
    args: &BenchConfig,
    node: &NodeTarget,
) -> Result<String, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let saved = slowlog_begin(con).await.map_err(redis_err)?;
    let mut rounds = Vec::new();
    let mut notes = Vec::new();
    for round in 1..=args.rounds.max(1) {
        for state in STATES {
            for contender in CONTENDERS {
                eprintln!(
                    "round {round}: {contender}, {} {} jobs",
                    args.jobs,
                    state.as_str()
                );
                let (mut m, note) = measure(con, url, state, contender, args, node).await?;
                m.round = round;
                notes.push(format!("round {round}, {}: {note}", m.contender));
                rounds.push(m);
            }
        }
    }
    slowlog_end(con, saved).await.map_err(redis_err)?;
    flush_async(con, url).await?;
    let summary = STATES
        .iter()
        .flat_map(|s| CONTENDERS.map(|c| summarize(&label(c, *s), &rounds)))
        .collect();
    let report = PendingReport {
        strategy: "pending",
        jobs: args.jobs,
        expired: args.jobs / 2,
        job_bytes: args.job_bytes,
        cap_seconds: args.seconds,
        ratios: STATES.map(|s| ratio_of(s, &rounds)).into(),
        rounds,
        summary,
        notes,
    };
    json_or_table(&report, args.json, table)
}

/// A contender's name in the report: `bullsweep-waiting`, `bullmq-delayed`, ….
fn label(contender: &str, state: JobState) -> String {
    format!("{contender}-{}", state.as_str())
}

/// bullsweep / BullMQ jobs/s in each round, for `state`.
fn ratio_of(state: JobState, rounds: &[Measurement]) -> StateRatio {
    let rate = |c: &str, round: u32| {
        rounds
            .iter()
            .find(|m| m.round == round && m.contender == label(c, state))
            .map(|m| m.jobs_per_sec)
    };
    let per_round: Vec<f64> = (1..=rounds.iter().map(|m| m.round).max().unwrap_or(0))
        .filter_map(|r| Some(rate("bullsweep", r)? / rate("bullmq", r)?))
        .collect();
    StateRatio {
        state: state.as_str(),
        median: median(per_round.clone()),
        rounds: per_round,
    }
}

/// The dataset: `--jobs` jobs in `state`, the oldest half expired.
fn dataset(state: JobState, args: &BenchConfig) -> PendingSeed {
    PendingSeed {
        base: BASE.to_string(),
        state,
        jobs: args.jobs,
        expired: args.jobs / 2,
        max_age_ms: MAX_AGE_MS,
        delay_ms: DELAY_MS,
        name: "remind".into(),
        job_bytes: args.job_bytes,
    }
}

/// Seeds a fresh dataset and removes its expired half with one contender while the prober
/// runs; checks what is left; returns the figures and a note on the run.
async fn measure(
    con: &mut Conn,
    url: &str,
    state: JobState,
    contender: &str,
    args: &BenchConfig,
    node: &NodeTarget,
) -> Result<(Measurement, String), Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    flush(con, url).await?;
    let spec = dataset(state, args);
    seed_pending(con, &spec, now_ms())
        .await
        .map_err(redis_err)?;
    let mem_before = info_number(con, "memory", &["used_memory"])
        .await
        .map_err(redis_err)?;
    let cpu_before = start_counters(con).await.map_err(redis_err)?;
    let removal = match contender {
        "bullsweep" => sweep_until_done(con, url, POLICY, spec.expired).await?,
        _ => bullmq_removal(node, url, &spec, args.seconds)?,
    };
    let slow = slow_calls(con).await.map_err(redis_err)?;
    let counters = stop_counters(con, cpu_before).await.map_err(redis_err)?;
    let mem_after = info_number(con, "memory", &["used_memory"])
        .await
        .map_err(redis_err)?;
    check_left(con, url, &spec, contender, removal.removed).await?;
    let mut note = removal.note;
    if slow.longest_ms > 0.0 {
        note.push_str(&format!(
            "; {} calls over 5 ms, the longest {:.2} ms: {}",
            slow.over_5ms, slow.longest_ms, slow.longest
        ));
    }
    let m = Measurement::of_run(
        &label(contender, state),
        removal.removed,
        removal.seconds,
        removal.probes,
        counters,
        (mem_before - mem_after) as i64,
    );
    Ok((m, note))
}

/// bullsweep: one discovery, then `bullsweep run`'s sweep under `policy` until `expected`
/// jobs are removed or a sweep removes nothing.
pub(crate) async fn sweep_until_done(
    con: &mut Conn,
    url: &str,
    policy: &str,
    expected: u64,
) -> Result<Removal, Error> {
    let set =
        bullsweep_policy::compile("bench", policy).map_err(|e| Error::runtime(e.to_string()))?;
    let prober = Prober::start(url)?;
    let started = Instant::now();
    let inv = engine::inventory(con, &set, None)
        .await
        .map_err(|e| Error::redis(url, &e))?;
    let (mut removed, mut sweeps) = (0u64, 0u32);
    loop {
        let mut opts = SweepOptions::at(now_ms(), DEFAULT_BUDGET_US, "bench");
        opts.queues = Some(inv.managed.clone());
        let report = engine::sweep(con, &set, &opts, Mode::Run, &engine::NoObserver).await?;
        if let Some(e) = report.queues.iter().find_map(|q| q.error.as_ref()) {
            return Err(Error::runtime(format!("the sweep failed: {}", e.message)));
        }
        sweeps += 1;
        removed += report.done();
        // Why stop at `expected`: one more sweep would only read the jobs left again to find
        // nothing, a cost of the bench's loop and not of removal.
        if report.done() == 0 || removed >= expected {
            break;
        }
    }
    Ok(Removal {
        removed,
        seconds: started.elapsed().as_secs_f64(),
        probes: prober.finish(),
        note: format!("{sweeps} sweeps"),
    })
}

/// BullMQ: `bench/pending.js` removes the expired ids oldest first, for at most `cap`
/// seconds.
fn bullmq_removal(
    node: &NodeTarget,
    url: &str,
    spec: &PendingSeed,
    cap: u64,
) -> Result<Removal, Error> {
    let args = [
        QUEUE.to_string(),
        "1".into(),
        spec.expired.to_string(),
        spec.state.as_str().to_string(),
        cap.to_string(),
    ];
    let script = node.compat_dir.join("bench/pending.js");
    let (value, probes) = run_node(node, &script, &args, url)?;
    let removed = value["removed"].as_u64().unwrap_or(0);
    let tried = value["tried"].as_u64().unwrap_or(0);
    if removed != tried || value["checked"].as_u64().unwrap_or(0) == 0 {
        return Err(Error::runtime(format!(
            "BullMQ removed {removed} of the {tried} jobs it tried (all must go), having read back {} seeded jobs",
            value["checked"]
        )));
    }
    let note = if tried < spec.expired {
        format!(
            "stopped at --seconds {cap} after {removed} of {} jobs (jobs/s is over those)",
            spec.expired
        )
    } else {
        "all expired jobs removed".to_string()
    };
    Ok(Removal {
        removed,
        seconds: value["ms"].as_f64().unwrap_or(f64::NAN) / 1_000.0,
        probes,
        note,
    })
}

/// Fails unless exactly the `removed` oldest jobs are gone: the state holds the rest, the
/// last removed job's hash is gone and the next one's is there.
async fn check_left(
    con: &mut Conn,
    url: &str,
    spec: &PendingSeed,
    contender: &str,
    removed: u64,
) -> Result<(), Error> {
    let keys = QueueKeys::new(&spec.base);
    let (state_key, _) = keys.state_keys(spec.state).swap_remove(0);
    let len_cmd = if spec.state == JobState::Waiting {
        "LLEN"
    } else {
        "ZCARD"
    };
    let mut pipe = redis::pipe();
    pipe.cmd(len_cmd).arg(&state_key);
    pipe.exists(keys.job(&removed.to_string()));
    pipe.exists(keys.job(&(removed + 1).to_string()));
    let (left, last_there, next_there): (u64, bool, bool) = pipe
        .query_async(con)
        .await
        .map_err(|e| Error::redis(url, &e))?;
    let bullsweep_short = contender == "bullsweep" && removed != spec.expired;
    if bullsweep_short
        || left != spec.jobs - removed
        || (removed > 0 && last_there)
        || (removed < spec.jobs && !next_there)
    {
        return Err(Error::runtime(format!(
            "{contender} removed {removed} of {} expired {} jobs and left {left} of {}; expected the oldest {removed} gone and the rest in place",
            spec.expired,
            spec.state.as_str(),
            spec.jobs
        )));
    }
    Ok(())
}

/// The summary table, the ratio per state, and the notes.
fn table(r: &PendingReport) -> String {
    let rounds = r.rounds.iter().map(|m| m.round).max().unwrap_or(0);
    let mut out = format!(
        "{} pending jobs of ~{} bytes per dataset, the oldest {} expired (maxAge 1h); medians of {rounds} rounds (probe max and longest call: worst round)\n{}",
        r.jobs,
        r.job_bytes,
        r.expired,
        measurement_table(&r.summary)
    );
    for s in &r.ratios {
        if let Some(m) = s.median {
            let what = format!("{}: bullsweep / BullMQ Job.remove", s.state);
            out.push_str(&ratio_line(&what, m, &s.rounds));
        }
    }
    for n in &r.notes {
        out.push_str(&format!("\n{n}"));
    }
    out
}
