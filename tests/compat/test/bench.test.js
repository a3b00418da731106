// `bullsweep bench --strategy pending`, `source`, `doctor` and `expire` on small datasets.
// Pending and source: before its contender runs, real BullMQ reads seeded jobs back
// (Queue.getJob, Job.getState) and fails the bench unless they are what Queue.add would have
// written; each contender must then remove exactly the jobs the bench expects (the bench fails
// otherwise), and the report says so. Doctor: bullsweep's findings must equal the damage the
// seed injected, kind by kind, and the users' script must find the same orphan hashes. Expire:
// every job must expire and have its id repaired, and the sweep remove as many.
// Figures are not judged here: timings belong in BENCHMARKS.md, never in a test.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { bullsweep } = require('../lib/harness');

const COMPAT = path.resolve(__dirname, '..');

async function bench(strategy, jobs) {
  const r = await bullsweep(['--json', 'bench', '--strategy', strategy, '--jobs', String(jobs), '--rounds', '1', '--compat-dir', COMPAT]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('pending bench: both contenders remove the expired half of waiting and of delayed jobs', async () => {
  const report = await bench('pending', 400);
  const removed = Object.fromEntries(report.rounds.map((m) => [m.contender, m.removed]));
  assert.deepEqual(removed, {
    'bullsweep-waiting': 200,
    'bullmq-waiting': 200,
    'bullsweep-delayed': 200,
    'bullmq-delayed': 200,
  });
  assert.deepEqual(report.ratios.map((r) => [r.state, r.rounds.length]), [['waiting', 1], ['delayed', 1]]);
});

test('source bench: both remove the jobs of gone orders, bullsweep with one query per batch', async () => {
  const report = await bench('source', 400);
  const by = Object.fromEntries(report.sources.map((s) => [s.contender, s]));
  assert.equal(report.gone, 200);
  assert.equal(by.bullsweep.removed, 200);
  assert.equal(by.bullmq.removed, 200);
  // 400 jobs: one batch, one query (2.5 per 1,000 jobs); BullMQ's contender asks once per job.
  assert.equal(by.bullsweep.queriesPer1000Jobs, 2.5);
  assert.equal(by.bullmq.queriesPer1000Jobs, 1000);
});

test('doctor bench: bullsweep finds every kind as injected, the users\' script the same orphan hashes', async () => {
  const report = await bench('doctor', 2000);
  assert.equal(report.jobHashes, 2000 - 4 * 20);
  assert.deepEqual(report.rounds.map((m) => [m.contender, m.removed]), [['bullsweep', 1920], ['bullmq', 1920]]);
  assert.deepEqual(
    report.findings.map((f) => [f.kind, f.found]),
    report.findings.map((f) => [f.kind, f.injected]),
  );
  assert.deepEqual(report.findings.map((f) => [f.kind, f.injected]), [
    ['orphanHashes', 20], ['danglingIds', 20], ['staleEntries', 20], ['staleDedup', 20], ['orphanSubkeys', 20],
    ['stuckParents', 20], ['orphanChildren', 20], ['orphanSchedulers', 20], ['eventsOverLimit', 10000],
  ]);
  assert.equal(report.findingsMatch, true);
  assert.equal(report.bullmqOrphanHashes, 20);
  assert.equal(report.ratios.length, 1);
});

test('expire bench: every job expires and its id is repaired, the sweep removes the same jobs', async () => {
  const report = await bench('expire', 2000);
  assert.deepEqual(report.phases.map((m) => [m.contender, m.removed]), [
    ['expire-ttl', 2000], ['expire-expiry', 2000], ['expire-repair', 2000], ['sweep', 2000],
  ]);
  assert.deepEqual(report.ways.map((w) => w.way), ['expire', 'sweep']);
  for (const w of report.ways) {
    assert.ok(w.freeing.freedBytes > 0, `${w.way} freed memory`);
    assert.ok(w.redisCpuUsPerJob > 0, `${w.way} spent Redis CPU`);
  }
  assert.ok(Number.isFinite(report.cpuRatioExpireVsSweep));
});

test('bull bench: bullsweep and Bull\'s clean, whole and looped, each remove every seeded Bull job', async () => {
  const r = await bullsweep(['--json', 'bench', '--strategy', 'bull', '--jobs', '3000', '--rounds', '1', '--clean-limits', '100', '--compat-dir', COMPAT]);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  // The bench fails unless a contender empties the completed set and reports every job.
  assert.deepEqual(report.rounds.map((m) => [m.contender, m.removed]), [['bullsweep', 3000], ['bull', 3000], ['bull-loop-100', 3000]]);
  assert.equal(report.ratios_vs_bullmq.length, 1, 'bullsweep against Bull\'s clean');
  assert.deepEqual(report.ratio_vs_looped.map(([c]) => c), ['bull-loop-100']);
});

test('bull-event bench: every job Bull completes is heard removed, by the daemon and by the listener', async () => {
  const r = await bullsweep(['--json', 'bench', '--strategy', 'bull-event', '--rate', '200', '--seconds', '2', '--rounds', '1', '--compat-dir', COMPAT]);
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.deepEqual(report.rounds.map((m) => [m.contender, m.completed, m.missed]), [['bullsweep', 400, 0], ['bull', 400, 0]]);
  assert.ok(report.rounds.every((m) => Number.isFinite(m.p99_ms)), 'delays were heard');
});
