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
const { membership, removedPer, reportedRemovals } = require('../lib/removals');

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
// Every BullMQ queue, worker and flow producer this file opens, closed before the server
// stops even when a test failed midway (an open one would reconnect forever).
const opened = [];
const track = (x) => { opened.push(x); return x; };
before(async () => { redis = await startRedis(); });
after(async () => {
  await Promise.all(opened.map((x) => x.close(true)));
  redis.stop();
});

// Old timestamps are distinct and at least two hours back, each older than the one before,
// so "oldest first" has one order.
let oldSeq = 0;
const old = () => Date.now() - 2 * HOUR - (++oldSeq) * 1000;
const young = () => Date.now();

// `childrenInOtherQueues: remove`: a parent goes with its children wherever they are, as
// Job.remove() takes them (by default one with a child in another queue stays: flows.test.js).
function policy(rules) {
  return writePolicy(['version: 1', 'policies:', `  - { name: p, queueNamePattern: "*", rules: ${rules}, childrenInOtherQueues: remove }`, ''].join('\n'));
}

// Builds the differential dataset in database `db` with BullMQ module `mq`.
async function buildDataset(mq, db) {
  const connection = redis.connection(db);
  const q = Object.fromEntries(QUEUES.map(({ name }) => [name, track(new mq.Queue(name, { connection }))]));
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
  const flows = track(new mq.FlowProducer({ connection }));
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
  // F6: an old grandparent, older than its old child in another queue (removing it first
  // takes that child along; removing the child first leaves it waiting for the other child:
  // either order ends alike), whose own child is young, and a young waiting child.
  const midTs = old();
  await flows.add(add('f6', 'parents', { timestamp: old() }, [
    add('f6-mid', 'mail', { timestamp: midTs }, [add('f6-leaf', 'mail', { timestamp: young() })]),
    add('f6-young', 'mail', { timestamp: young() }),
  ]));
  // F7: a young parent waiting for a young child: never selected.
  await flows.add(add('f7', 'parents', { timestamp: young() }, [add('f7-child', 'mail', { timestamp: young() })]));
  // F8: an old parent in the paused queue with a young waiting child.
  await flows.add(add('f8', 'held', { timestamp: old() }, [add('f8-child', 'mail', { timestamp: young() })]));
  // F9: an old parent whose child a worker holds active: BullMQ refuses to remove it.
  await flows.add(add('f9', 'parents', { timestamp: old() }, [add('hang', 'slow', { timestamp: old() })]));
  await flows.close();

  const kids = track(new mq.Queue('kids', { connection }));
  const finisher = track(new mq.Worker('kids', async (job) => {
    if (job.name === 'fail') throw new Error('child failed');
    return { ok: job.name };
  }, { connection }));
  await waitFor('the kids to finish', async () => {
    const c = await kids.getJobCounts('completed', 'failed');
    return c.completed === 1 && c.failed === 1;
  });
  await finisher.close();
  await kids.close();

  const slow = track(new mq.Queue('slow', { connection }));
  const holder = track(new mq.Worker('slow', () => new Promise(() => {}), { connection, lockDuration: 10 * 60000 }));
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

// Copies database `from` to 1 (copy A, for BullMQ) and 2 (copy B, for bullsweep).
async function twoCopies(from) {
  for (const db of [1, 2]) {
    await redis.client(db).flushdb();
    await copyDatabase(redis.client(from), from, db);
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

// BullMQ's own removal of a waiting parent removes its children first, so the last child's
// going releases the parent to `wait` (a `waiting` event, the queue's marker set) before the
// parent goes with `prev: wait`: the comparison holds bullsweep to exactly that.
//
// Per state, keys whose removal shows the dataset's cases were exercised.
const GONE = {
  waiting: [['a paused queue\'s job', /^bull:held:\d+$/], ['a dedup key', /^bull:mail:de:wait-old$/],
    ['a custom id with colons', /^bull:mail:order:2024:0001$/], ['a released parent\'s last dependency', /^bull:parents:.*:dependencies$/]],
  delayed: [['a dedup key', /^bull:mail:de:delayed-old$/], ['the paused parent\'s last dependency', /^bull:held:.*:dependencies$/]],
  prioritized: [['a dedup key', /^bull:mail:de:prio-old$/], ['the paused queue\'s prioritized job', /^bull:held:prioritized$/],
    ['a released parent\'s last dependency', /^bull:parents:.*:dependencies$/]],
  'waiting-children': [['a completed child\'s result', /^bull:parents:.*:processed$/], ['children in another queue', /^bull:kids:completed$/],
    ['a parent in another queue', /^bull:mail:waiting-children$/], ['a paused queue\'s parent', /^bull:held:[0-9a-f-]{36}$/]],
};

for (const v of VERSIONS) {
  for (const state of Object.keys(STATE_KEYS)) {
    test(`${v.label}: ${state} { maxAge: 1h } leaves the keyspace Job.remove() of the old ${state} jobs leaves`, async () => {
      await pristine(v);
      await twoCopies(0);
      const before = await dumpKeyspace(redis.client(2));
      const cutoff = Date.now() - HOUR;

      const removed = await removeOldJobs(v.mq, redis.connection(1), redis.client(1), QUEUES, state, cutoff);
      const config = policy(`{ ${state}: { maxAge: 1h } }`);
      const plan = await bullsweep(['--redis', redis.url(2), '--config', config, '--json', 'plan']);
      assert.equal(plan.code, 0, plan.stderr);
      const bases = QUEUES.map(({ prefix, name }) => `${prefix}:${name}`);
      const members = await membership(redis.client(2), bases);
      const run = await bullsweep(['--redis', redis.url(2), '--config', config, '--json', 'run']);
      assert.equal(run.code, 0, run.stderr);
      await assertSameKeyspace(state);
      // Plan and run count every job the run removed, per queue and state, the children and
      // parents taken along included (issue 42).
      const removedPerState = removedPer(members, await membership(redis.client(2), bases));
      assert.deepEqual(reportedRemovals(JSON.parse(plan.stdout), 'matched'), removedPerState, `${state}: the plan counts what the run removes`);
      assert.deepEqual(reportedRemovals(JSON.parse(run.stdout), 'done'), removedPerState, `${state}: the run reports what it removed`);

      // Not vacuous: BullMQ removed jobs, and what went includes the cases the dataset holds.
      const after = await dumpKeyspace(redis.client(2));
      const gone = Object.keys(before).filter((k) => !(k in after));
      assert.ok(removed.done.length >= 3, `BullMQ removed ${removed.done.length} ${state} jobs`);
      for (const [what, pattern] of GONE[state]) {
        assert.ok(gone.some((k) => pattern.test(k)), `${state}: ${what} (${pattern}) went: ${gone.join(' ')}`);
      }

      // The report: every queue's jobs and selection, and every selected job done or skipped.
      const report = JSON.parse(run.stdout);
      for (const { name } of QUEUES) {
        const s = (report.queues.find((x) => x.queue === name) || { states: {} }).states[state];
        const want = removed.selected.filter((j) => j.queue === name).length;
        assert.ok(s, `${name}: no ${state} entry in ${run.stdout}`);
        // Counted when bullsweep reaches the queue: before or after another queue's removal
        // released a parent into it.
        assert.ok([removed.counts[name], removed.countsAfter[name]].includes(s.jobs), `${name} ${state} jobs: ${JSON.stringify(s)}`);
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

// Database 3 holds the scheduler test's data, database 4 the worker test's.
for (const v of VERSIONS) {
  test(`${v.label}: a job a worker takes while bullsweep runs is processed, never removed`, async (t) => {
    const db = 4;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const queue = track(new v.mq.Queue('rush', { connection }));
    const oldIds = (await queue.addBulk(Array.from({ length: 3000 }, (_, i) => ({ name: 'job', data: { i }, opts: { timestamp: old() } })))).map((j) => j.id);
    const youngIds = (await queue.addBulk(Array.from({ length: 300 }, (_, i) => ({ name: 'job', data: { i }, opts: { timestamp: young() } })))).map((j) => j.id);

    const started = new Set();
    const completed = new Set();
    const takenDuringRun = new Set();
    const failures = [];
    let running = false;
    const worker = track(new v.mq.Worker('rush', async (job) => {
      started.add(job.id);
      if (running) takenDuringRun.add(job.id);
      await sleep(2);
      return job.data.i;
    }, { connection, concurrency: 8 }));
    worker.on('completed', (job) => completed.add(job.id));
    worker.on('failed', (job, err) => failures.push(`failed ${job && job.id}: ${err.message}`));
    worker.on('error', (err) => failures.push(`error: ${err.message}`));
    await waitFor('the worker to be busy', async () => completed.size >= 20);

    running = true;
    const run = await bullsweep(['--redis', redis.url(db), '--config', policy('{ waiting: { maxAge: 1h } }'), '--json', 'run']);
    running = false;
    assert.equal(run.code, 0, run.stderr);
    await waitFor('the queue to drain', async () => {
      const c = await queue.getJobCounts('wait', 'paused', 'active');
      return c.wait + c.paused + c.active === 0;
    }, 60000);
    await worker.close();

    assert.deepEqual(failures, [], 'no job failed and the worker saw no error');
    assert.deepEqual([...started].filter((id) => !completed.has(id)), [], 'every job the worker took completed');
    const completedSet = new Set(await client.zrange('bull:rush:completed', 0, -1));
    const removed = [];
    for (const id of [...oldIds, ...youngIds]) {
      const exists = await client.exists(`bull:rush:${id}`);
      if (completed.has(id)) {
        assert.ok(exists && completedSet.has(id), `job ${id} completed but is not in completed`);
      } else {
        assert.equal(exists, 0, `job ${id} was neither processed nor removed`);
        removed.push(id);
      }
    }
    assert.deepEqual(youngIds.filter((id) => !completed.has(id)), [], 'young jobs are never removed');
    assert.ok(removed.length > 0, 'bullsweep removed old jobs');
    assert.ok(takenDuringRun.size > 0, 'the worker took jobs while bullsweep ran');
    assert.equal(completed.size + removed.length, oldIds.length + youngIds.length);

    const waiting = JSON.parse(run.stdout).queues.find((q) => q.queue === 'rush').states.waiting;
    t.diagnostic(`removed ${removed.length}, processed ${completed.size} (${takenDuringRun.size} taken while bullsweep ran); report ${JSON.stringify(waiting)}`);
    assert.equal(waiting.done, removed.length, JSON.stringify(waiting));
    assert.equal(waiting.done + skippedTotal(waiting), waiting.matched, JSON.stringify(waiting));
    const events = (await queueEvents(client))['bull:rush:events'].map((e) => JSON.parse(e));
    const removedEvents = events.filter((f) => f[1] === 'removed');
    assert.equal(removedEvents.length, removed.length, 'one removed event per removed job');
    assert.ok(removedEvents.every((f) => f[5] === 'wait'), 'removed from wait');
    await queue.close();
    await assertConsistent(redis, db, [{ prefix: 'bull', name: 'rush' }]);
  });

  test(`${v.label}: a job scheduler's next job is old but kept, and counted as skipped`, async () => {
    const db = 3;
    const client = redis.client(db);
    await client.flushdb();
    const queue = track(new v.mq.Queue('ticks', { connection: redis.connection(db) }));
    // Two schedulers whose next job is delayed, one whose next job waits.
    await queue.upsertJobScheduler('daily', { every: DAY, startDate: Date.now() + HOUR }, { name: 'daily', data: { s: 1 } });
    await queue.upsertJobScheduler('yearly', { pattern: '0 0 1 1 *' }, { name: 'yearly', data: { s: 2 } });
    await queue.upsertJobScheduler('hourly', { every: HOUR }, { name: 'hourly', data: { s: 3 } });
    for (let i = 0; i < 3; i++) await queue.add('later', { i }, { timestamp: old(), delay: DAY });
    for (let i = 0; i < 2; i++) await queue.add('now', { i }, { timestamp: old() });
    await queue.add('later', { young: true }, { timestamp: young(), delay: DAY });
    await queue.add('now', { young: true }, { timestamp: young() });
    // A scheduler's job is stamped when the scheduler makes it: age it like the others.
    const next = {
      delayed: (await client.zrange('bull:ticks:delayed', 0, -1)).filter((id) => id.startsWith('repeat:')),
      waiting: (await client.lrange('bull:ticks:wait', 0, -1)).filter((id) => id.startsWith('repeat:')),
    };
    assert.equal(next.delayed.length, 2, JSON.stringify(next));
    assert.equal(next.waiting.length, 1, JSON.stringify(next));
    for (const id of [...next.delayed, ...next.waiting]) await client.hset(`bull:ticks:${id}`, 'timestamp', String(old()));
    await queue.close();
    await twoCopies(db);

    const ticks = [{ prefix: 'bull', name: 'ticks' }];
    const cutoff = Date.now() - HOUR;
    for (const state of ['delayed', 'waiting']) {
      const removed = await removeOldJobs(v.mq, redis.connection(1), redis.client(1), ticks, state, cutoff);
      assert.deepEqual(removed.refused.map((r) => r.id).sort(), [...next[state]].sort(), `BullMQ refuses exactly the scheduler jobs in ${state}`);
      for (const r of removed.refused) assert.match(r.error, /belongs to a job scheduler/);
      assert.equal(removed.done.length, state === 'delayed' ? 3 : 2);
    }
    const rules = policy('{ waiting: { maxAge: 1h }, delayed: { maxAge: 1h } }');
    const plan = await bullsweep(['--redis', redis.url(2), '--config', rules, '--json', 'plan']);
    assert.equal(plan.code, 0, plan.stderr);
    const planned = JSON.parse(plan.stdout).queues.find((q) => q.queue === 'ticks').states;
    for (const state of ['delayed', 'waiting']) {
      assert.equal((planned[state].skipped || {}).scheduler, next[state].length, `the plan shows the ${state} iterations held: ${JSON.stringify(planned[state])}`);
    }
    const run = await bullsweep(['--redis', redis.url(2), '--config', rules, '--json', 'run']);
    assert.equal(run.code, 0, run.stderr);
    await assertSameKeyspace('scheduler');

    const states = JSON.parse(run.stdout).queues.find((q) => q.queue === 'ticks').states;
    for (const [state, done] of [['delayed', 3], ['waiting', 2]]) {
      const s = states[state];
      assert.equal(s.matched, done + next[state].length, `${state}: ${JSON.stringify(s)}`);
      assert.equal(s.done, done, `${state}: ${JSON.stringify(s)}`);
      assert.equal(skippedTotal(s), next[state].length, `${state}: the scheduler's job is counted as skipped: ${JSON.stringify(s)}`);
    }
    const after = track(new v.mq.Queue('ticks', { connection: redis.connection(2) }));
    assert.equal((await after.getJobSchedulers()).length, 3);
    for (const id of [...next.delayed, ...next.waiting]) assert.ok(await after.getJob(id), `the scheduler's job ${id} is kept`);
    await after.close();
    await assertReadable(v.mq, redis, 2, ticks);
  });
}
