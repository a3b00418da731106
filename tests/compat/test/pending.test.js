// Issue 26: retention rules for pending states, judged by real BullMQ (6.7 and 5.81).
// For each pending state (waiting, with a paused queue's jobs; delayed; prioritized;
// waiting-children) a dataset of plain jobs, deduplicated jobs, flows (the pending job as a
// child and as a parent), old and young, is copied twice: on copy A, BullMQ's own
// `Job.remove()` removes exactly the old jobs of that state; on copy B, `bullsweep run`
// applies `<state>: { maxAge: 1h }`. Both keyspaces must be identical, with the same events
// (compared as a multiset of entries, not by stream id), and BullMQ's API must read copy B
// whole. A worker consuming the queue while bullsweep runs never loses a job, and a job
// scheduler's next job is kept and counted as skipped.
//
// Both BullMQ builds run here (BULLSWEEP_BULLMQ names one to run only that one).
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startRedis, dumpKeyspace, copyDatabase, bullsweep, writePolicy, sleep, waitFor } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');
const { removeOldJobs, queueEvents, assertReadable, STATE_KEYS } = require('../lib/pending');

const HOUR = 3600000;
const DAY = 24 * HOUR;

// The BullMQ builds under test: both, or the one BULLSWEEP_BULLMQ names.
const VERSIONS = (process.env.BULLSWEEP_BULLMQ ? [process.env.BULLSWEEP_BULLMQ] : ['bullmq', 'bullmq5'])
  .map((pkg) => ({ pkg, mq: require(pkg), label: `BullMQ ${require(`${pkg}/package.json`).version}` }));

// The queues of the differential dataset: `mail` holds pending jobs of every kind, `held` is
// paused, `parents` holds flow parents, `kids` children that finished, `slow` a child held
// active under a worker's lock.
const QUEUES = ['mail', 'held', 'parents', 'kids', 'slow'].map((name) => ({ prefix: 'bull', name }));

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

// Old timestamps are distinct and at least two hours back, so "oldest first" has one order.
let oldSeq = 0;
const old = () => Date.now() - 2 * HOUR - (++oldSeq) * 1000;
const young = () => Date.now();

function policy(rules) {
  return writePolicy(['version: 1', 'policies:', `  - { name: p, queueNamePattern: "*", rules: ${rules} }`, ''].join('\n'));
}

// Builds the differential dataset in database `db` with BullMQ module `mq`.
async function buildDataset(mq, db) {
  const connection = redis.connection(db);
  const q = Object.fromEntries(QUEUES.map(({ name }) => [name, new mq.Queue(name, { connection })]));
  const { mail, held } = q;

  // Plain, deduplicated (with and without TTL) and custom-id jobs in wait.
  for (let i = 0; i < 6; i++) await mail.add('send', { i }, { timestamp: old() });
  for (let i = 0; i < 4; i++) await mail.add('send', { i, young: true }, { timestamp: young() });
  await mail.add('send', { d: 1 }, { timestamp: old(), deduplication: { id: 'wait-old' } });
  await mail.add('send', { d: 2 }, { timestamp: old(), deduplication: { id: 'wait-old-ttl', ttl: 10 * 60000 } });
  await mail.add('send', { d: 3 }, { timestamp: young(), deduplication: { id: 'wait-young' } });
  await mail.add('send', { d: 4 }, { timestamp: old(), jobId: 'order:2024:0001' });
  // Delayed a day: old and young, one deduplicated.
  for (let i = 0; i < 4; i++) await mail.add('later', { i }, { timestamp: old(), delay: DAY });
  for (let i = 0; i < 3; i++) await mail.add('later', { i }, { timestamp: young(), delay: DAY });
  await mail.add('later', { d: 5 }, { timestamp: old(), delay: DAY, deduplication: { id: 'delayed-old' } });
  // Prioritized: old and young, one deduplicated.
  for (let i = 0; i < 4; i++) await mail.add('urgent', { i }, { timestamp: old(), priority: 1 + i });
  for (let i = 0; i < 3; i++) await mail.add('urgent', { i }, { timestamp: young(), priority: 2 + i });
  await mail.add('urgent', { d: 6 }, { timestamp: old(), priority: 3, deduplication: { id: 'prio-old' } });

  // A paused queue: jobs added before and after the pause (BullMQ 5 keeps them in `paused`,
  // 6 in `wait`), one deduplicated and one prioritized.
  for (let i = 0; i < 2; i++) await held.add('send', { i }, { timestamp: old() });
  await held.add('send', { i: 2 }, { timestamp: young() });
  await held.pause();
  await held.add('send', { i: 3 }, { timestamp: old(), deduplication: { id: 'held-old' } });
  await held.add('send', { i: 4 }, { timestamp: young() });
  await held.add('urgent', { i: 5 }, { timestamp: old(), priority: 2 });

  await buildFlows(mq, connection);
  await Promise.all(Object.values(q).map((x) => x.close()));
}

// Flows whose pending jobs are children and parents. Released parents are young, so a
// removal never turns a job into a new candidate of the same run.
async function buildFlows(mq, connection) {
  const flows = new mq.FlowProducer({ connection });
  const add = (name, queueName, opts, children) => ({ name, queueName, data: { name }, opts, children });
  // F1: an old waiting child, the only one: removing it releases its young parent to `wait`.
  await flows.add(add('f1', 'parents', { timestamp: young() }, [add('f1-child', 'mail', { timestamp: old() })]));
  // F2: an old and a young waiting child: removing the old one leaves the parent waiting.
  await flows.add(add('f2', 'parents', { timestamp: young() }, [
    add('f2-old', 'mail', { timestamp: old() }), add('f2-young', 'mail', { timestamp: young() })]));
  // F3: an old delayed child, the only one, of a parent in the paused queue.
  await flows.add(add('f3', 'held', { timestamp: young() }, [add('f3-child', 'mail', { timestamp: old(), delay: DAY })]));
  // F4: an old parent with a completed child, a failed one (ignored), an old waiting child,
  // a young delayed child and a young prioritized child in its own queue. (BullMQ refuses
  // deduplication in flows.)
  await flows.add(add('f4', 'parents', { timestamp: old() }, [
    add('done', 'kids', { timestamp: old() }),
    add('fail', 'kids', { timestamp: old(), ignoreDependencyOnFailure: true }),
    add('f4-wait', 'mail', { timestamp: old() }),
    add('f4-later', 'mail', { timestamp: young(), delay: DAY }),
    add('f4-urgent', 'parents', { timestamp: young(), priority: 4 }),
  ]));
  // F5: an old prioritized child, the only one: removing it releases its young parent.
  await flows.add(add('f5', 'parents', { timestamp: young() }, [add('f5-child', 'mail', { timestamp: old(), priority: 7 })]));
  // F6: an old grandparent (older than its child) with an old parent in another queue, whose
  // own child is young, and a young waiting child.
  await flows.add(add('f6', 'parents', { timestamp: old() }, [
    add('f6-mid', 'mail', { timestamp: old() }, [add('f6-leaf', 'mail', { timestamp: young() })]),
    add('f6-young', 'mail', { timestamp: young() }),
  ]));
  // F7: a young parent waiting for a young child: never selected.
  await flows.add(add('f7', 'parents', { timestamp: young() }, [add('f7-child', 'mail', { timestamp: young() })]));
  // F8: an old parent in the paused queue with a young waiting child.
  await flows.add(add('f8', 'held', { timestamp: old() }, [add('f8-child', 'mail', { timestamp: young() })]));
  // F9: an old parent whose child a worker holds active: BullMQ refuses to remove it.
  await flows.add(add('f9', 'parents', { timestamp: old() }, [add('hang', 'slow', { timestamp: old() })]));
  await flows.close();

  const kids = new mq.Queue('kids', { connection });
  const finisher = new mq.Worker('kids', async (job) => {
    if (job.name === 'fail') throw new Error('child failed');
    return { ok: job.name };
  }, { connection });
  await waitFor('the kids to finish', async () => {
    const c = await kids.getJobCounts('completed', 'failed');
    return c.completed === 1 && c.failed === 1;
  });
  await finisher.close();
  await kids.close();

  const slow = new mq.Queue('slow', { connection });
  const holder = new mq.Worker('slow', () => new Promise(() => {}), { connection, lockDuration: 10 * 60000 });
  await waitFor('the slow child to be active', async () => (await slow.getActiveCount()) === 1);
  await holder.close(true); // the lock stays until it expires
  await slow.close();
}

// The pristine dataset of each BullMQ build, built once in database 0.
let builtFor = null;
async function pristine(v) {
  if (builtFor === v.pkg) return;
  const admin = redis.client(0);
  await admin.flushall();
  await buildDataset(v.mq, 0);
  builtFor = v.pkg;
}

// Copies database 0 to 1 (copy A, for BullMQ) and 2 (copy B, for bullsweep).
async function twoCopies() {
  for (const db of [1, 2]) {
    await redis.client(db).flushdb();
    await copyDatabase(redis.client(0), 0, db);
  }
}

// The sum of every reason a state's jobs were skipped for (`notImplemented` is no reason).
function skippedTotal(s) {
  return Object.entries(s.skipped || {}).filter(([k, n]) => typeof n === 'number' && k !== 'notImplemented').reduce((a, [, n]) => a + n, 0);
}

// Asserts that copies A and B hold the same keys and values and the same events.
async function assertSameKeyspace(what) {
  const a = await dumpKeyspace(redis.client(1));
  const b = await dumpKeyspace(redis.client(2));
  const onlyA = Object.keys(a).filter((k) => !(k in b));
  const onlyB = Object.keys(b).filter((k) => !(k in a));
  assert.deepEqual({ onlyA, onlyB }, { onlyA: [], onlyB: [] }, `${what}: keys only BullMQ (A) or only bullsweep (B) left`);
  for (const key of Object.keys(a)) assert.deepEqual(b[key], a[key], `${what}: ${key} differs (actual: bullsweep, expected: BullMQ)`);
  assert.deepEqual(await queueEvents(redis.client(2)), await queueEvents(redis.client(1)), `${what}: events differ (actual: bullsweep, expected: BullMQ)`);
}

for (const v of VERSIONS) {
  for (const state of Object.keys(STATE_KEYS)) {
    test(`${v.label}: ${state} { maxAge: 1h } leaves the keyspace Job.remove() of the old ${state} jobs leaves`, async () => {
      await pristine(v);
      await twoCopies();
      const before = await dumpKeyspace(redis.client(2));
      const cutoff = Date.now() - HOUR;

      const removed = await removeOldJobs(v.mq, redis.connection(1), redis.client(1), QUEUES, state, cutoff);
      const run = await bullsweep(['--redis', redis.url(2), '--config', policy(`{ ${state}: { maxAge: 1h } }`), '--json', 'run']);
      assert.equal(run.code, 0, run.stderr);
      await assertSameKeyspace(state);

      // Not vacuous: BullMQ removed jobs, and what went includes job hashes of every queue
      // the state's old jobs live in.
      const after = await dumpKeyspace(redis.client(2));
      const gone = Object.keys(before).filter((k) => !(k in after));
      assert.ok(removed.done.length >= 3, `BullMQ removed ${removed.done.length} ${state} jobs`);
      assert.ok(gone.length >= removed.done.length, `${gone.length} keys went`);

      // The report: every queue's jobs and selection, and every selected job done or skipped.
      const report = JSON.parse(run.stdout);
      for (const { name } of QUEUES) {
        const s = (report.queues.find((x) => x.queue === name) || { states: {} }).states[state];
        const want = removed.selected.filter((j) => j.queue === name).length;
        assert.ok(s, `${name}: no ${state} entry in ${run.stdout}`);
        assert.equal(s.jobs, removed.counts[name], `${name} ${state} jobs: ${JSON.stringify(s)}`);
        assert.equal(s.matched, want, `${name} ${state} matched: ${JSON.stringify(s)}`);
        assert.equal((s.done || 0) + skippedTotal(s), want, `${name} ${state} done + skipped: ${JSON.stringify(s)}`);
        assert.equal((s.skipped || {}).notImplemented || 0, 0, `${name} ${state}: ${JSON.stringify(s)}`);
      }
      if (state === 'waiting-children') {
        const parents = report.queues.find((x) => x.queue === 'parents').states[state];
        assert.ok((parents.skipped || {}).locked >= 1, `the parent of an active child is skipped as locked: ${JSON.stringify(parents)}`);
      }

      // BullMQ reads copy B whole.
      await assertReadable(v.mq, redis, 2, QUEUES);
      await assertConsistent(redis, 2, QUEUES);
    });
  }
}
