// `bullsweep bench --strategy pending` and `--strategy source` on small datasets: before its
// contender runs, real BullMQ reads seeded jobs back (Queue.getJob, Job.getState) and fails the
// bench unless they are what Queue.add would have written; each contender must then remove
// exactly the jobs the bench expects (the bench fails otherwise), and the report says so.
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
