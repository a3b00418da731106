//! `--strategy doctor`: `--jobs` jobs in one queue in BullMQ's format (mostly finished, some
//! waiting and delayed, flows, dedup keys, schedulers) with 1% of jobs' worth of each of the
//! eight kinds of damage injected (`bullsweep_testkit::damage_seed`). Each round seeds one
//! dataset, then, on it (both only read):
//! - **bullsweep**: `bullsweep doctor` without `--repair` (`ops::doctor::doctor`), finding
//!   every kind;
//! - **bullmq**: the orphan-hash scan users write today (`bench/doctor.js`: SCAN, then TYPE
//!   and ZSCORE/LPOS per job hash, each command awaited), which finds one kind.
//!
//! Jobs/s counts the job hashes in the dataset over each one's wall time. Both must find the
//! injected orphan hashes, no more, no fewer: the bench fails otherwise (its figures printed
//! with the failure). bullsweep's findings of every kind are reported beside what was
//! injected, with what it left alone and why.

use super::node::{NodeTarget, run_node};
use super::probe::{
    Prober, flush, flush_async, peak_rss_mb, reset_peak_rss, slow_calls, slowlog_begin,
    slowlog_end, start_counters, stop_counters,
};
use super::report::{Measurement, json_or_table, measurement_table, median, ratio_line, summarize};
use super::{BASE, BenchConfig, QUEUE};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::ops::doctor::{DoctorScope, doctor};
use bullsweep_policy::{DoctorKind, NamePattern};
use bullsweep_testkit::{DamageSeed, seed_damaged};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One kind: what the seed injected and what bullsweep's doctor found.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct KindCount {
    kind: &'static str,
    injected: u64,
    found: u64,
    /// Left alone by the doctor, by reason (`outOfReach`, …).
    skipped: BTreeMap<String, u64>,
}

/// What `--strategy doctor` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DoctorBenchReport {
    /// Always `doctor`.
    strategy: &'static str,
    /// Jobs seeded.
    jobs: u64,
    /// Job hashes left after the damage: what jobs/s counts.
    job_hashes: u64,
    /// Approximate size of each job hash.
    job_bytes: usize,
    /// One row per contender and round.
    rounds: Vec<Measurement>,
    /// Medians over rounds (the worst round for probe max, longest call and RSS).
    summary: Vec<Measurement>,
    /// Per kind, injected and found by bullsweep (the last round).
    findings: Vec<KindCount>,
    /// Whether bullsweep found exactly what was injected, every kind, every round.
    findings_match: bool,
    /// Orphan hashes the users' script found (the last round).
    bullmq_orphan_hashes: u64,
    /// bullsweep / users' script jobs/s, per round.
    ratios: Vec<f64>,
    /// Their median.
    ratio: Option<f64>,
    /// How each run went.
    notes: Vec<String>,
}

/// One doctor run: findings by kind (with what was left alone, by reason), jobs examined,
/// jobs repaired, seconds, probe samples.
pub(crate) struct DoctorRun {
    pub(crate) found: Vec<(DoctorKind, u64, BTreeMap<String, u64>)>,
    pub(crate) examined_jobs: u64,
    pub(crate) repaired: u64,
    pub(crate) seconds: f64,
    pub(crate) probes: Vec<Duration>,
}

impl DoctorRun {
    /// Each kind injected, with what this run found and left alone of it.
    fn against(&self, injected: &[(DoctorKind, u64)]) -> Vec<KindCount> {
        injected
            .iter()
            .map(|(k, n)| KindCount {
                kind: k.as_str(),
                injected: *n,
                found: self.found(*k),
                skipped: self.skipped(*k),
            })
            .collect()
    }

    /// What was found of `kind`.
    pub(crate) fn found(&self, kind: DoctorKind) -> u64 {
        self.found
            .iter()
            .filter(|(k, _, _)| *k == kind)
            .map(|(_, n, _)| n)
            .sum()
    }

    /// What was left alone of `kind`, by reason.
    fn skipped(&self, kind: DoctorKind) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (_, _, skipped) in self.found.iter().filter(|(k, _, _)| *k == kind) {
            for (reason, n) in skipped {
                *out.entry(reason.clone()).or_default() += n;
            }
        }
        out
    }
}

/// `bullsweep doctor` on the bench queue (with `--repair` of `repair` when not empty) while
/// the prober runs, its audit events shipped to a file in a temporary directory.
pub(crate) async fn run_doctor(
    con: &mut Conn,
    url: &str,
    repair: Vec<DoctorKind>,
) -> Result<DoctorRun, Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::runtime(e.to_string()))?;
    let policy = format!(
        "version: 1\naudit: {{ url: \"file://{}\" }}\npolicies:\n  - {{ name: bench, queueNamePattern: {QUEUE}, rules: {{ completed: {{ maxAge: 30d }} }} }}\n",
        dir.path().join("audit.jsonl").display()
    );
    let set =
        bullsweep_policy::compile("bench", &policy).map_err(|e| Error::runtime(e.to_string()))?;
    let glob = NamePattern::new(QUEUE).map_err(Error::runtime)?;
    let scope = DoctorScope {
        queue_glob: Some(glob),
        repair,
        ..DoctorScope::default()
    };
    let prober = Prober::start(url)?;
    let started = Instant::now();
    let report = doctor(con, url, &set, scope, &bullsweep_core::engine::NoObserver).await?;
    let seconds = started.elapsed().as_secs_f64();
    let probes = prober.finish();
    let mut run = DoctorRun {
        found: Vec::new(),
        examined_jobs: 0,
        repaired: 0,
        seconds,
        probes,
    };
    for q in &report.queues {
        if let Some(e) = &q.error {
            return Err(Error::runtime(format!(
                "the doctor failed on {}: {e}",
                q.queue
            )));
        }
        run.examined_jobs += q.examined.jobs;
        for f in &q.findings {
            if let Some(kind) = DoctorKind::from_name(&f.kind) {
                run.found.push((kind, f.found, f.skipped.clone()));
            }
            run.repaired += f.repaired;
        }
    }
    Ok(run)
}

/// Runs `--strategy doctor` and returns the table, or JSON.
pub(crate) async fn run(
    con: &mut Conn,
    url: &str,
    args: &BenchConfig,
    node: &NodeTarget,
) -> Result<String, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let spec = DamageSeed {
        base: BASE.to_string(),
        jobs: args.jobs,
        job_bytes: args.job_bytes,
    };
    let unit = spec.layout().unit;
    let job_hashes = args.jobs - 4 * unit;
    let saved = slowlog_begin(con).await.map_err(redis_err)?;
    let (mut rounds, mut notes, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut findings, mut findings_match, mut theirs) = (Vec::new(), true, 0);
    let mut disagreement = None;
    for round in 1..=args.rounds.max(1) {
        eprintln!("round {round}: seeding {} jobs and the damage", args.jobs);
        flush(con, url).await?;
        let injected = seed_damaged(con, &spec, now_ms())
            .await
            .map_err(redis_err)?;
        let keys_before = dbsize(con, url).await?;
        eprintln!("round {round}: bullsweep doctor");
        reset_peak_rss();
        let cpu = start_counters(con).await.map_err(redis_err)?;
        let ours = run_doctor(con, url, Vec::new()).await?;
        let slow = slow_calls(con).await.map_err(redis_err)?;
        let counters = stop_counters(con, cpu).await.map_err(redis_err)?;
        let rss = peak_rss_mb();
        if dbsize(con, url).await? != keys_before {
            return Err(Error::runtime(
                "the doctor without --repair changed the keyspace",
            ));
        }
        let mut m = Measurement::of_run(
            "bullsweep",
            job_hashes,
            ours.seconds,
            ours.probes.clone(),
            counters,
            0,
        );
        m.client_peak_rss_mb = rss;
        m.round = round;
        notes.push(format!(
            "round {round}, bullsweep: examined {} jobs; {} calls over 5 ms, the longest {:.2} ms: {}",
            ours.examined_jobs, slow.over_5ms, slow.longest_ms, slow.longest
        ));
        findings = ours.against(&injected);
        findings_match &= findings.iter().all(|f| f.found == f.injected);
        rounds.push(m);

        let (m, orphans) = users_scan(con, url, node, round, job_hashes, &mut notes).await?;
        theirs = orphans;
        let injected_orphans = unit;
        let ours_orphans = ours.found(DoctorKind::OrphanHashes);
        if theirs != injected_orphans || ours_orphans != injected_orphans {
            disagreement = Some(format!(
                "round {round}: orphan hashes: bullsweep found {ours_orphans} (left alone: {:?}), the users' script {theirs}, {injected_orphans} were injected; all three must agree",
                ours.skipped(DoctorKind::OrphanHashes)
            ));
        }
        // Both count the same job hashes, so the ratio of rates is that of wall times.
        ratios.push(m.seconds / ours.seconds.max(1e-9));
        rounds.push(m);
    }
    slowlog_end(con, saved).await.map_err(redis_err)?;
    flush_async(con, url).await?;
    let report = DoctorBenchReport {
        strategy: "doctor",
        jobs: args.jobs,
        job_hashes,
        job_bytes: args.job_bytes,
        summary: ["bullsweep", "bullmq"]
            .map(|c| summarize(c, &rounds))
            .into(),
        rounds,
        findings,
        findings_match,
        bullmq_orphan_hashes: theirs,
        ratio: median(ratios.clone()),
        ratios,
        notes,
    };
    // The figures are printed with the failure, so that a disagreement is seen with them.
    if let Some(why) = disagreement {
        return Err(Error::runtime(format!(
            "{}\n\nFAILED: {why}",
            table(&report)
        )));
    }
    json_or_table(&report, args.json, table)
}

/// One round of the users' orphan scan (`bench/doctor.js`): its measurement and the orphan
/// hashes it found.
async fn users_scan(
    con: &mut Conn,
    url: &str,
    node: &NodeTarget,
    round: u32,
    job_hashes: u64,
    notes: &mut Vec<String>,
) -> Result<(Measurement, u64), Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    eprintln!("round {round}: the users' orphan scan (node)");
    let cpu = start_counters(con).await.map_err(redis_err)?;
    let (value, probes) = run_node(
        node,
        &node.compat_dir.join("bench/doctor.js"),
        &[QUEUE.to_string()],
        url,
    )?;
    let slow = slow_calls(con).await.map_err(redis_err)?;
    let counters = stop_counters(con, cpu).await.map_err(redis_err)?;
    let theirs = value["orphans"].as_u64().unwrap_or(u64::MAX);
    let seconds = value["ms"].as_f64().unwrap_or(f64::NAN) / 1_000.0;
    let mut m = Measurement::of_run("bullmq", job_hashes, seconds, probes, counters, 0);
    m.client_peak_rss_mb = value["maxRssMb"].as_f64().unwrap_or(0.0);
    m.round = round;
    notes.push(format!(
            "round {round}, bullmq: scanned {} keys, checked {} job hashes with {} commands; {} calls over 5 ms, the longest {:.2} ms: {}",
            value["keys"], value["jobs"], value["commands"], slow.over_5ms, slow.longest_ms, slow.longest
        ));
    Ok((m, theirs))
}

/// Keys in the bench's database.
async fn dbsize(con: &mut Conn, url: &str) -> Result<u64, Error> {
    redis::cmd("DBSIZE")
        .query_async(con)
        .await
        .map_err(|e| Error::redis(url, &e))
}

/// The summary table, the findings, the ratio and the notes.
fn table(r: &DoctorBenchReport) -> String {
    let rounds = r.rounds.iter().map(|m| m.round).max().unwrap_or(0);
    let mut out = format!(
        "{} jobs of ~{} bytes, 1% of each kind of damage injected ({} job hashes left); jobs = job hashes checked; medians of {rounds} rounds (probe max, longest call, RSS: worst round); bullmq = the users' SCAN + TYPE + ZSCORE script (bench/doctor.js)\n{}",
        r.jobs,
        r.job_bytes,
        r.job_hashes,
        measurement_table(&r.summary)
    );
    for f in &r.findings {
        let mark = if f.found == f.injected {
            ""
        } else {
            "  <- differs"
        };
        let skipped = if f.skipped.is_empty() {
            String::new()
        } else {
            format!("  left alone {:?}", f.skipped)
        };
        out.push_str(&format!(
            "\n{:<17} injected {:>8}  found {:>8}{skipped}{mark}",
            f.kind, f.injected, f.found
        ));
    }
    out.push_str(&format!(
        "\norphanHashes found by the users' script: {}",
        r.bullmq_orphan_hashes
    ));
    if let Some(m) = r.ratio {
        out.push_str(&ratio_line(
            "bullsweep doctor / users' orphan scan",
            m,
            &r.ratios,
        ));
    }
    for n in &r.notes {
        out.push_str(&format!("\n{n}"));
    }
    out
}
