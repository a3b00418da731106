// Issue 27, "What to build" 2 and 3, judged by real BullMQ (6.7 and 5.81): the EXPIRE layer
// (`completed`/`failed: { ttl }`) and bounded events streams (`events: { maxLen }`).
//
// TTL: Workers complete and fail plain, custom-id and deduplicated jobs and flows (a parent
// that completed with its children, parents in waiting-children while some children are
// finished). `bullsweep run` with `ttl: 2s` gives every finished job an expiry at
// finishedOn + 2s; Redis deletes them; the next run drops their ids. The keyspace is then the
// one before the first run less exactly the expired jobs (their hash, sub-keys and ids) and
// the dedup keys whose own TTL ran out, BullMQ reads the queues whole, dedup ids can be added
// again, and the parents still complete when processed. A live Worker beside `run` never errs
// and loses no job.
//
// Events: a policy's `events: { maxLen: 500 }` trims the stream and writes meta
// `opts.maxLenEvents` = 500, which BullMQ's own trimming then follows as jobs are added and
// processed. A Queue constructed afterwards writes its own `streams.events.maxLen` (default
// 10000) back to meta; the next `run` restores 500.
//
// Both BullMQ builds run here (BULLSWEEP_BULLMQ names one to run only that one).
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRedis, dumpKeyspace, bullsweep, writePolicy, sleep, waitFor, startDaemon, stopDaemons } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');

const VERSIONS = (process.env.BULLSWEEP_BULLMQ ? [process.env.BULLSWEEP_BULLMQ] : ['bullmq', 'bullmq5'])
  .map((pkg) => ({ pkg, mq: require(pkg), label: `BullMQ ${require(`${pkg}/package.json`).version}` }));

const SUB_KEYS = ['logs', 'dependencies', 'processed', 'failed', 'unsuccessful'];
const FINISHED = ['completed', 'failed'];

let redis;
// Every BullMQ object this file opens, closed before the server stops even when a test
// failed midway (an open one would reconnect forever).
const opened = [];
const track = (x) => { opened.push(x); return x; };
before(async () => { redis = await startRedis(); });
after(async () => {
  stopDaemons();
  await Promise.all(opened.map((x) => x.close(true).catch(() => {})));
  redis.stop();
});

function ttlPolicy(ttl) {
  return writePolicy(['version: 1', 'policies:',
    `  - { name: p, queueNamePattern: "*", rules: { completed: { ttl: ${ttl} }, failed: { ttl: ${ttl} } } }`, ''].join('\n'));
}

async function run(db, policy, cmd = 'run') {
  const out = await bullsweep(['--redis', redis.url(db), '--config', policy, '--json', cmd]);
  assert.equal(out.code, 0, out.stderr);
  return JSON.parse(out.stdout);
}

// Per queue and finished state: the ids a run dropped after Redis expired their jobs.
function dropped(report) {
  const out = {};
  for (const q of report.queues) {
    for (const state of FINISHED) {
      const s = q.states[`${state}:ttl`];
      const n = (s && s.ttl && s.ttl.expiredIdsDropped) || 0;
      if (n) out[`${q.queue}:${state}`] = n;
    }
  }
  return out;
}

// The worker of the `work` queue: logs, fails `fail*`, returns how many children a parent saw.
async function processor(job) {
  await job.log(`started ${job.id}`);
  if (job.name.startsWith('fail')) throw new Error(`boom ${job.id}`);
  if (job.name === 'whole') return { children: Object.keys(await job.getChildrenValues()).length };
  return { ok: job.id };
}

// Builds the TTL dataset in `db` with BullMQ module `mq`: queue `work` (processed: 14
// completed, 6 failed), `parents` (parents still waiting for a child), `later` (that child).
async function buildTtlDataset(mq, db) {
  const connection = redis.connection(db);
  const work = track(new mq.Queue('work', { connection }));
  for (let i = 0; i < 6; i++) await work.add('ok', { i });
  for (let i = 0; i < 3; i++) await work.add('fail', { i });
  await work.add('ok', { d: 1 }, { deduplication: { id: 'simple' } });
  await work.add('fail', { d: 2 }, { deduplication: { id: 'simple-failed' } });
  // Throttle mode: the dedup key keeps its own TTL after the job finished.
  await work.add('ok', { d: 3 }, { deduplication: { id: 'short', ttl: 3000 } });
  await work.add('ok', { d: 4 }, { deduplication: { id: 'long', ttl: 10 * 60000 } });
  await work.add('ok', { c: 1 }, { jobId: 'order:2024:0001' });

  const flows = track(new mq.FlowProducer({ connection }));
  // F1: a parent that completes after its two children, all in `work`.
  await flows.add({ name: 'whole', queueName: 'work', data: {}, children: [
    { name: 'ok', queueName: 'work', data: { f: 1 } }, { name: 'ok', queueName: 'work', data: { f: 2 } }] });
  // F2: a parent waiting for a child in `later` while its other child completes in `work`.
  await flows.add({ name: 'waits', queueName: 'parents', data: {}, children: [
    { name: 'ok', queueName: 'work', data: { f: 3 } }, { name: 'held', queueName: 'later', data: { f: 4 } }] });
  // F3: a child that fails with no failure option: BullMQ keeps the parent waiting for it.
  await flows.add({ name: 'blocked', queueName: 'parents', data: {}, children: [
    { name: 'fail', queueName: 'work', data: { f: 5 } }] });
  // F4: a child that fails with ignoreDependencyOnFailure: the parent goes on to wait.
  await flows.add({ name: 'ignored', queueName: 'parents', data: {}, children: [
    { name: 'fail', queueName: 'work', data: { f: 6 }, opts: { ignoreDependencyOnFailure: true } }] });

  const failures = [];
  const worker = track(new mq.Worker('work', processor, { connection, concurrency: 4 }));
  worker.on('error', (err) => failures.push(err.message));
  await waitFor('the work queue to finish', async () => {
    const c = await work.getJobCounts('completed', 'failed');
    return c.completed === 14 && c.failed === 6;
  });
  await worker.close();
  await work.close();
  assert.deepEqual(failures, [], 'the worker saw no error');
}

// The ids of `base`'s finished sets: {completed: [...], failed: [...]}.
async function finishedIds(client, base) {
  const out = {};
  for (const state of FINISHED) out[state] = await client.zrange(`${base}:${state}`, 0, -1);
  return out;
}

// The keyspace `before` less the jobs of `expired` (base → ids by state): their hash and
// sub-keys, their ids in the finished sets; and less the keys named in `alsoGone`.
function expectedAfter(before, expired, alsoGone) {
  const want = JSON.parse(JSON.stringify(before));
  for (const [base, byState] of Object.entries(expired)) {
    for (const state of FINISHED) {
      const ids = new Set(byState[state]);
      for (const id of ids) {
        delete want[`${base}:${id}`];
        for (const s of SUB_KEYS) delete want[`${base}:${id}:${s}`];
      }
      const set = want[`${base}:${state}`];
      if (!set) continue;
      const kept = [];
      for (let i = 0; i < set.value.length; i += 2) if (!ids.has(set.value[i])) kept.push(set.value[i], set.value[i + 1]);
      if (kept.length) set.value = kept;
      else delete want[`${base}:${state}`];
    }
  }
  for (const key of alsoGone) delete want[key];
  return want;
}

function assertKeyspace(actual, expected, what) {
  const onlyActual = Object.keys(actual).filter((k) => !(k in expected));
  const onlyExpected = Object.keys(expected).filter((k) => !(k in actual));
  assert.deepEqual({ onlyActual, onlyExpected }, { onlyActual: [], onlyExpected: [] }, `${what}: keys left or gone unexpectedly`);
  for (const key of Object.keys(expected)) assert.deepEqual(actual[key], expected[key], `${what}: ${key} changed`);
}

const QUEUES = ['work', 'parents', 'later'].map((name) => ({ prefix: 'bull', name }));

for (const v of VERSIONS) {
  test(`${v.label}: ttl expires finished jobs, the next run drops their ids, and BullMQ reads the queues whole`, async () => {
    const db = 0;
    const client = redis.client(db);
    await client.flushall();
    await buildTtlDataset(v.mq, db);
    const ids = await finishedIds(client, 'bull:work');
    assert.equal(ids.completed.length + ids.failed.length, 20);
    const before = await dumpKeyspace(client);
    // Every finished job's sub-keys that BullMQ wrote: logs for all, `:processed` for F1's parent.
    const whole = ids.completed.find((id) => before[`bull:work:${id}`].value.name === 'whole');
    assert.ok(before[`bull:work:${whole}:processed`], 'the completed parent holds its children\'s results');
    assert.ok(before['bull:work:de:long'] && before['bull:work:de:long'].expires, 'the throttle key outlives its job');
    assert.ok(before['bull:work:de:short'], 'the short throttle key is there');
    assert.ok(!before['bull:work:de:simple'] && !before['bull:work:de:simple-failed'], 'BullMQ drops a simple dedup key when its job finishes');
    const blocked = (await client.zrange('bull:parents:waiting-children', 0, -1));
    assert.equal(blocked.length, 2, 'F2 and F3 parents wait for children');
    // F3's failed child: its parent still waits for it (it may be retried), so it gets no TTL.
    const f3 = ids.failed.find((id) => before[`bull:work:${id}`].value.data === '{"f":5}');
    assert.ok(f3, 'the F3 child failed');
    const expiring_ids = { completed: ids.completed, failed: ids.failed.filter((id) => id !== f3) };

    const policy = ttlPolicy('2s');
    const first = await run(db, policy);
    const expiring = first.queues.find((q) => q.queue === 'work');
    const given = FINISHED.reduce((n, s) => n + (expiring.states[`${s}:ttl`].done || 0), 0);
    assert.equal(given, 19, JSON.stringify(expiring.states));
    assert.equal(expiring.states['failed:ttl'].skipped.parentWaiting, 1, JSON.stringify(expiring.states));
    // finishedOn + ttl on hash and logs (and the parent's :processed), or already gone when
    // that time had passed. PEXPIRETIME is Redis 7's; before it, PTTL shows a TTL within 2s.
    const exact = Number((await client.info('server')).match(/redis_version:(\d+)/)[1]) >= 7;
    assert.equal(await client.pttl(`bull:work:${f3}`), -1, 'the child its parent waits for has no TTL');
    for (const state of FINISHED) {
      for (const id of expiring_ids[state]) {
        const finishedOn = Number(before[`bull:work:${id}`].value.finishedOn);
        for (const key of [`bull:work:${id}`, `bull:work:${id}:logs`, ...(id === whole ? [`bull:work:${id}:processed`] : [])]) {
          if (exact) {
            const at = await client.call('PEXPIRETIME', key);
            assert.ok(at === -2 || at === finishedOn + 2000, `${key}: expires at ${at}, finished ${finishedOn}`);
          } else {
            const left = await client.pttl(key);
            assert.ok(left === -2 || (left >= 0 && left <= 2000), `${key}: PTTL ${left}`);
          }
        }
      }
    }

    const all = [...expiring_ids.completed, ...expiring_ids.failed];
    await waitFor('Redis to expire the finished jobs', async () => {
      for (const id of all) if (await client.exists(`bull:work:${id}`, `bull:work:${id}:logs`)) return false;
      return !(await client.exists('bull:work:de:short'));
    });
    // Between the expiry and the next run the ids are still listed, but no sub-key is left:
    // the completed parent's `:processed` (its copy of its children's results) expired with it.
    assert.equal(await client.zcard('bull:work:completed'), ids.completed.length);
    const leftovers = [];
    for (const id of all) for (const s of SUB_KEYS) if (await client.exists(`bull:work:${id}:${s}`)) leftovers.push(`${id}:${s}`);
    assert.deepEqual(leftovers, [], 'no sub-key outlives its job');

    const second = await run(db, policy);
    const total = {};
    for (const r of [first, second]) for (const [k, n] of Object.entries(dropped(r))) total[k] = (total[k] || 0) + n;
    assert.deepEqual(total, { 'work:completed': 14, 'work:failed': 5 }, 'every expired id is dropped once');

    // The keyspace: before, less the expired jobs and the throttle key that ran out.
    const afterRun = await dumpKeyspace(client);
    assertKeyspace(afterRun, expectedAfter(before, { 'bull:work': expiring_ids }, ['bull:work:de:short']), 'after the second run');
    // A third run finds nothing to do.
    assert.deepEqual(dropped(await run(db, policy)), {});
    await assertConsistent(redis, db, QUEUES);

    const work = track(new v.mq.Queue('work', { connection: redis.connection(db) }));
    // Dedup ids whose key BullMQ dropped at finish, or whose own TTL ran out, are free again.
    const oldIds = Object.fromEntries(await Promise.all(['simple', 'simple-failed', 'short', 'long'].map(async (d) => [d,
      all.find((id) => before[`bull:work:${id}`].value.deid === d)])));
    for (const d of ['simple', 'simple-failed', 'short']) {
      const job = await work.add('ok', { again: d }, { deduplication: { id: d } });
      assert.notEqual(job.id, oldIds[d], `dedup id ${d} makes a new job`);
      assert.equal(await (await work.getJob(job.id)).getState(), 'waiting', `dedup id ${d}`);
    }
    // A throttle key still within its own TTL keeps deduplicating, though its job expired:
    // BullMQ's throttle semantics, which bullsweep leaves alone.
    const throttled = await work.add('ok', { again: 'long' }, { deduplication: { id: 'long' } });
    assert.equal(throttled.id, oldIds.long, 'the throttle window still holds');
    assert.equal(await work.getJob(throttled.id), undefined, 'its job expired');
    assert.equal(await client.get('bull:work:de:long'), oldIds.long);

    // The parents: F2's completed child expired, its result stays in the parent's
    // `:processed`, and the parent completes once its other child does. F4's parent, whose
    // failed child expired, is processed with the failure BullMQ copied to its `:failed`.
    const parents = track(new v.mq.Queue('parents', { connection: redis.connection(db) }));
    const seen = {};
    const failures = [];
    const pw = track(new v.mq.Worker('parents', async (job) => {
      seen[job.name] = Object.values(await job.getChildrenValues());
      return seen[job.name].length;
    }, { connection: redis.connection(db) }));
    const lw = track(new v.mq.Worker('later', async () => 'late', { connection: redis.connection(db) }));
    for (const w of [pw, lw]) {
      w.on('error', (err) => failures.push(err.message));
      w.on('failed', (job, err) => failures.push(`${job && job.name}: ${err.message}`));
    }
    await waitFor('both parents to complete', async () => (await parents.getCompletedCount()) === 2);
    await pw.close();
    await lw.close();
    assert.deepEqual(failures, []);
    assert.deepEqual(seen.waits.map((x) => JSON.stringify(x)).sort(), ['"late"', JSON.stringify({ ok: ids.completed.find((id) => before[`bull:work:${id}`].value.data === '{"f":3}') })].sort(),
      'the parent reads the expired child\'s result from its :processed copy');
    assert.deepEqual(seen.ignored, []);
    // F3's parent still waits for its failed child, which kept its hash (no TTL) and can be
    // retried; `doctor` finds nothing: not that parent, and not the throttle key, whose job is
    // gone but whose own TTL still runs.
    const waiting = await client.zrange('bull:parents:waiting-children', 0, -1);
    assert.equal(waiting.length, 1);
    const deps = await client.smembers(`bull:parents:${waiting[0]}:dependencies`);
    assert.deepEqual(deps, [`bull:work:${f3}`]);
    assert.equal(await (await work.getJob(f3)).getState(), 'failed');
    const doctor = await bullsweep(['--redis', redis.url(db), '--json', 'doctor']);
    assert.equal(doctor.code, 0, doctor.stdout + doctor.stderr);
    await parents.close();
    await work.close();
    await assertConsistent(redis, db, QUEUES);
  });
}

// Database 1 holds the live test's queue.
for (const v of VERSIONS) {
  test(`${v.label}: ttl runs beside a live Worker: no worker error, every job processed, the finished ones expire`, async (t) => {
    const db = 1;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const queue = track(new v.mq.Queue('live', { connection }));
    const total = 1500;
    const added = new Set();
    for (let i = 0; i < total; i += 250) {
      for (const j of await queue.addBulk(Array.from({ length: 250 }, (_, k) => ({ name: 'job', data: { i: i + k } })))) added.add(j.id);
    }
    const completed = new Set();
    const failures = [];
    const worker = track(new v.mq.Worker('live', async (job) => {
      await job.log('working');
      await sleep(10);
      return job.data.i;
    }, { connection, concurrency: 8 }));
    worker.on('completed', (job) => completed.add(job.id));
    worker.on('failed', (job, err) => failures.push(`failed ${job && job.id}: ${err.message}`));
    worker.on('error', (err) => failures.push(`error: ${err.message}`));
    await waitFor('the worker to be busy', async () => completed.size >= 50);

    // Runs while the worker takes and finishes jobs: each gives the finished jobs a TTL of 1s
    // and drops the ids of those Redis expired since the last.
    const policy = ttlPolicy('1s');
    const runs = [];
    let pendingDuringRuns = 0;
    while (completed.size < total && runs.length < 20) {
      const c = await queue.getJobCounts('wait', 'active');
      pendingDuringRuns = Math.max(pendingDuringRuns, c.wait + c.active);
      runs.push(await run(db, policy));
      await sleep(200);
    }
    await waitFor('the queue to drain', async () => completed.size === total, 60000);
    await worker.close();
    assert.deepEqual(failures, [], 'no job failed and the worker saw no error');
    assert.deepEqual([...added].filter((id) => !completed.has(id)), [], 'every job added was processed');
    assert.ok(runs.length >= 2 && pendingDuringRuns > 0, `bullsweep ran ${runs.length} times beside pending jobs`);
    // The worker needs at least 1500 × 10 ms / 8 ≈ 1.9 s, longer than the ttl: runs beside it
    // dropped ids of jobs that had expired already.
    const droppedBeside = runs.reduce((n, r) => n + (dropped(r)['live:completed'] || 0), 0);
    assert.ok(droppedBeside > 0, 'runs beside the worker dropped expired ids');

    // After the last TTL ran out, one more run leaves no finished job or id behind.
    runs.push(await run(db, policy));
    await waitFor('Redis to expire every job', async () => {
      for (const id of added) if (await client.exists(`bull:live:${id}`, `bull:live:${id}:logs`)) return false;
      return true;
    });
    runs.push(await run(db, policy));
    const given = runs.reduce((n, r) => n + (r.queues.find((q) => q.queue === 'live').states['completed:ttl'].done || 0), 0);
    const gone = runs.reduce((n, r) => n + (dropped(r)['live:completed'] || 0), 0);
    t.diagnostic(`${runs.length} runs; ${given} TTLs given, ${gone} expired ids dropped (${droppedBeside} beside the worker); up to ${pendingDuringRuns} jobs pending during the runs`);
    assert.equal(given, total, 'every finished job got its TTL once');
    assert.equal(gone, total, 'every expired id was dropped once');
    const counts = await queue.getJobCounts('wait', 'active', 'completed', 'failed');
    assert.deepEqual(counts, { wait: 0, active: 0, completed: 0, failed: 0 });
    await queue.close();
    await assertConsistent(redis, db, [{ prefix: 'bull', name: 'live' }]);
  });
}

// Database 2 holds the events test's queue.
for (const v of VERSIONS) {
  test(`${v.label}: events { maxLen: 500 } trims the stream, writes meta, and BullMQ's own trimming follows it`, async (t) => {
    const db = 2;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const nodeMax = Number((await client.config('GET', 'stream-node-max-entries'))[1]);
    const policy = writePolicy(['version: 1', 'policies:', '  - { name: p, queueNamePattern: "*", events: { maxLen: 500 } }', ''].join('\n'));
    const producer = track(new v.mq.Queue('busy', { connection }));
    const addJobs = async (n) => {
      for (let i = 0; i < n; i += 500) await producer.addBulk(Array.from({ length: 500 }, (_, k) => ({ name: 'job', data: { i: i + k } })));
    };
    await addJobs(3000);
    assert.equal(await client.hget('bull:busy:meta', 'opts.maxLenEvents'), '10000', 'BullMQ\'s default bound');
    const grown = await client.xlen('bull:busy:events');
    assert.ok(grown >= 3000, `the stream holds an entry per job at least: ${grown}`);

    const report = await run(db, policy);
    const events = report.queues.find((q) => q.queue === 'busy').events;
    assert.equal(events.trimmed, true, JSON.stringify(events));
    assert.ok(await client.xlen('bull:busy:events') <= 500, 'the run trims to the bound');
    assert.equal(await client.hget('bull:busy:meta', 'opts.maxLenEvents'), '500', 'the run writes the bound to meta');

    // BullMQ's own trimming now follows meta: its XADDs carry `MAXLEN ~ 500`, which removes
    // whole stream nodes only, so the stream stays within 500 and one node's slack.
    const lengths = [];
    for (let round = 0; round < 4; round++) {
      await addJobs(1000);
      lengths.push(await client.xlen('bull:busy:events'));
    }
    const worker = track(new v.mq.Worker('busy', async (job) => job.data.i, { connection, concurrency: 8 }));
    await waitFor('the worker to drain the queue', async () => (await producer.getCompletedCount()) === 7000, 60000);
    await worker.close();
    lengths.push(await client.xlen('bull:busy:events'));
    t.diagnostic(`stream length after each 1000 adds and after processing 7000 jobs: ${lengths.join(', ')} (node max ${nodeMax})`);
    for (const n of lengths) assert.ok(n <= 500 + nodeMax, `BullMQ keeps the stream near 500: ${lengths}`);
    assert.equal(await client.hget('bull:busy:meta', 'opts.maxLenEvents'), '500');

    // Any Queue constructed afterwards (a dashboard, another service) writes its own
    // `streams.events.maxLen`, 10000 by default, back to meta; BullMQ's trimming follows it
    // until the next run writes the policy's bound again.
    const other = track(new v.mq.Queue('busy', { connection }));
    await other.waitUntilReady();
    await waitFor('the new Queue to write meta', async () => (await client.hget('bull:busy:meta', 'opts.maxLenEvents')) === '10000');
    await addJobs(1000);
    assert.ok(await client.xlen('bull:busy:events') > 500 + nodeMax, 'BullMQ trims to 10000 again');
    await run(db, policy);
    assert.equal(await client.hget('bull:busy:meta', 'opts.maxLenEvents'), '500', 'the next run restores the bound');
    assert.ok(await client.xlen('bull:busy:events') <= 500);
    await other.close();
    await producer.close();
  });
}

// Issue 42, breaks 1 and 2: a job that leaves its finished state, or a job added again under
// a custom id whose job Redis expired, never loses its data to an expiry `ttl` gave.

// A policy with `rules` for every queue and a file audit trail in its own directory.
// `audit` is the audit line, for another policy file that shares the trail.
function auditedPolicy(rules, extra = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-ttl-'));
  const audit = `audit: { url: "file://${dir}/audit.jsonl" }`;
  const policy = writePolicy(['version: 1', audit, ...extra, 'policies:',
    `  - { name: p, queueNamePattern: "*", rules: ${rules} }`, ''].join('\n'));
  return { policy, audit, trail: () => {
    const file = path.join(dir, 'audit.jsonl');
    if (!fs.existsSync(file)) return [];
    return fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  } };
}

// The ids an audit trail names under `action` for queue `name`.
const auditedIds = (trail, action, name) => trail
  .filter((e) => e.action === action && e.queueName === name).flatMap((e) => e.jobIds).sort();

// Every job of `ids` in queue `base` carries a TTL (PTTL > 0): the expiry `ttl` gave.
async function assertExpiring(client, base, ids, what) {
  for (const id of ids) assert.ok((await client.pttl(`${base}:${id}`)) > 0, `${what}: job ${id} carries its TTL`);
}

// Until every job of `ids` has its hash and no TTL on it or its logs (PTTL -1); fails at
// once when a worker meanwhile saw something go wrong (`failures`).
async function waitPersisted(client, base, ids, what, failures) {
  await waitFor(what, async () => {
    assert.deepEqual(failures, [], `${what}: no job failed, no "Missing key"`);
    for (const id of ids) {
      if ((await client.pttl(`${base}:${id}`)) !== -1) return false;
      if ((await client.pttl(`${base}:${id}:logs`)) >= 0) return false;
    }
    return true;
  }, 20000);
}

// A BullMQ worker that runs each job `ms` long and records its data; `failures` collects
// every error and failure it sees (BullMQ's "Missing key for job …" among them).
function slowWorker(mq, name, connection, ms, seen, failures) {
  const w = track(new mq.Worker(name, async (job) => {
    await sleep(ms);
    seen[job.id] = job.data;
    return job.data && job.data.i;
  }, { connection, concurrency: 2 }));
  w.on('failed', (job, err) => failures.push(`failed ${job && job.id}: ${err.message}`));
  w.on('error', (err) => failures.push(`error: ${err.message}`));
  return w;
}

// `n` jobs of queue `name` (data {i}) that failed once; returns the queue and their ids.
async function failedJobs(mq, name, connection, n) {
  const queue = track(new mq.Queue(name, { connection }));
  const ids = (await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'job', data: { i } })))).map((j) => j.id);
  const failer = track(new mq.Worker(name, async (job) => {
    await job.log(`attempt of ${job.id}`);
    throw new Error('first attempt');
  }, { connection, concurrency: 8 }));
  await waitFor('every job to fail', async () => (await queue.getFailedCount()) === n);
  await failer.close();
  return { queue, ids };
}

// Waits until the worker completed every job of `ids` or saw a failure, then asserts it ran
// each with its own data and saw nothing go wrong.
async function assertRanWhole(queue, ids, seen, failures, what) {
  await waitFor(`${what}: every job to complete`, async () => failures.length > 0
    || (await queue.getCompletedCount()) === ids.length, 60000);
  assert.deepEqual(failures, [], `${what}: no job failed, no "Missing key"`);
  for (const id of ids) {
    const job = await queue.getJob(id);
    assert.ok(job, `${what}: job ${id} is still there`);
    assert.equal(await job.getState(), 'completed', `${what}: job ${id}`);
    assert.deepEqual(seen[id], job.data, `${what}: job ${id} ran with its own data`);
    assert.equal(typeof job.data.i, 'number', `${what}: job ${id} kept its data`);
  }
}

for (const [n, v] of VERSIONS.entries()) {
  test(`${v.label}: Queue.retryJobs beside a slow worker: the daemon's expiry watch ends the failed jobs' TTLs, and every job runs whole`, async () => {
    const db = 3 + n;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const { queue, ids } = await failedJobs(v.mq, 'retried', connection, 30);
    // `mode` is left at `schedule`: the watch follows every queue whose policy takes a ttl.
    const { policy, trail } = auditedPolicy('{ failed: { ttl: 8s } }', ['schedule: 24h']);
    await run(db, policy);
    await assertExpiring(client, 'bull:retried', ids, 'after the first run');
    const daemon = startDaemon(['--redis', redis.url(db), '--config', policy]);
    await waitFor('the daemon to start', async () => daemon.log().includes('daemon started'));
    // bull-board's "Retry all": every failed job back to wait, each keeping its TTL in Redis;
    // 30 jobs of 500 ms two at a time: most run after their old expiry.
    await assertExpiring(client, 'bull:retried', ids, 'before the retry');
    await queue.retryJobs({ state: 'failed' });
    const seen = {};
    const failures = [];
    const worker = slowWorker(v.mq, 'retried', connection, 500, seen, failures);
    await waitPersisted(client, 'bull:retried', ids, 'the watch to end every retried job\'s TTL', failures);
    await assertRanWhole(queue, ids, seen, failures, 'retried by retryJobs');
    assert.ok(daemon.log().includes('bull:retried: watching the expiries its ttl gave'), daemon.log());
    await worker.close();
    await daemon.kill();
    assert.deepEqual(auditedIds(trail(), 'persist', 'retried'), [...ids].sort(), 'each TTL ended is audited as persist');
    await queue.close();
  });
}

for (const [n, v] of VERSIONS.entries()) {
  test(`${v.label}: Queue.retryJobs and Job.retry, then a run before the expiry: the run ends the TTLs, the jobs run after it would have fallen`, async () => {
    const db = 5 + n;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const { queue, ids } = await failedJobs(v.mq, 'rerun', connection, 12);
    const { policy, trail } = auditedPolicy('{ failed: { ttl: 6s } }');
    await run(db, policy);
    // One job retried by Job.retry, the others by retryJobs; two stay failed.
    const [single, ...rest] = ids;
    const kept = rest.slice(0, 2);
    await (await queue.getJob(single)).retry('failed');
    for (const id of rest.slice(2)) await (await queue.getJob(id)).retry('failed');
    const retried = ids.filter((id) => !kept.includes(id));
    const fell = Math.max(...await Promise.all(ids.map(async (id) => Date.now() + await client.pttl(`bull:rerun:${id}`))));
    const report = await run(db, policy);
    // Past every expiry the first run gave: the failed ones went, the retried ones are whole.
    await waitFor('the old expiries to fall', async () => Date.now() > fell + 500, 20000);
    for (const id of retried) assert.equal(await client.pttl(`bull:rerun:${id}`), -1, `retried job ${id} has its hash and no TTL`);
    for (const id of kept) assert.equal(await queue.getJob(id), undefined, `failed job ${id} expired`);
    const seen = {};
    const failures = [];
    const worker = slowWorker(v.mq, 'rerun', connection, 0, seen, failures);
    await assertRanWhole(queue, retried, seen, failures, 'retried before a run');
    await worker.close();
    const failedTtl = report.queues.find((q) => q.queue === 'rerun').states['failed:ttl'].ttl;
    assert.equal(failedTtl.expiriesEnded, retried.length, JSON.stringify(failedTtl));
    assert.deepEqual(auditedIds(trail(), 'persist', 'rerun'), [...retried].sort());
    await queue.close();
  });
}

// A Bull worker on `queue` that runs each job `ms` long and records its data; `failures`
// collects every error and failure it sees.
function bullWorker(queue, ms) {
  const seen = {};
  const failures = [];
  queue.on('failed', (job, err) => failures.push(`failed ${job && job.id}: ${err.message}`));
  queue.on('error', (err) => failures.push(`error: ${err.message}`));
  queue.process(2, async (job) => {
    await sleep(ms);
    seen[job.id] = job.data;
    return job.data.i;
  });
  return { seen, failures };
}

// Waits until the Bull worker completed every job of `ids` or saw a failure, then asserts it
// ran each with its own data and saw nothing go wrong.
async function assertBullRanWhole(queue, ids, seen, failures) {
  await waitFor('every retried Bull job to complete', async () => failures.length > 0
    || (await queue.getCompletedCount()) === ids.length, 60000);
  assert.deepEqual(failures, []);
  for (const id of ids) {
    const job = await queue.getJob(id);
    assert.ok(job, `job ${id} is still there`);
    assert.equal(await job.getState(), 'completed');
    assert.deepEqual(seen[id], job.data);
    assert.equal(typeof job.data.i, 'number');
  }
}

// A daemon's policy that governs one other queue, without a ttl, sharing the trail of `audit`.
const elsewherePolicy = (audit) => writePolicy(['version: 1', audit, 'policies:',
  '  - { name: elsewhere, queueNamePattern: elsewhere, rules: { completed: { maxAge: 1h } } }', ''].join('\n'));

// Issue 42, red team F2: the watch follows every queue bullsweep gave expiries, from the
// registry the givers write (`bullsweep:expiring`), not only those the daemon's discovery
// found under a policy that takes a ttl. Here the daemon's policy governs one other queue,
// without a ttl, so neither its discovery nor its policy ever reaches the queues a `run`
// gave expiries: one before the daemon started (its first walks), one beside it.
for (const [n, v] of VERSIONS.entries()) {
  test(`${v.label}: expiries runs gave before and beside a daemon whose policy never reaches their queues: the watch ends them on Queue.retryJobs, every job runs whole`, async () => {
    const db = 10 + n;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const { policy, audit, trail } = auditedPolicy('{ failed: { ttl: 12s } }');
    const daemonPolicy = elsewherePolicy(audit);
    const queues = { early: await failedJobs(v.mq, 'early', connection, 20) };
    await run(db, policy);
    const daemon = startDaemon(['--redis', redis.url(db), '--config', daemonPolicy]);
    await waitFor('the daemon to start', async () => daemon.log().includes('daemon started'));
    queues.beside = await failedJobs(v.mq, 'beside', connection, 20);
    await run(db, policy);
    let fell = 0;
    for (const [name, { ids }] of Object.entries(queues)) {
      await assertExpiring(client, `bull:${name}`, ids, `${name} before the retry`);
      for (const id of ids) fell = Math.max(fell, Date.now() + await client.pttl(`bull:${name}:${id}`));
    }
    // bull-board's "Retry all" on both, beside slow workers: most jobs run after their old
    // expiry would have fallen.
    for (const { queue } of Object.values(queues)) await queue.retryJobs({ state: 'failed' });
    const seen = { early: {}, beside: {} };
    const failures = [];
    const workers = Object.keys(queues).map((name) => slowWorker(v.mq, name, connection, 300, seen[name], failures));
    for (const [name, { ids }] of Object.entries(queues)) {
      await waitPersisted(client, `bull:${name}`, ids, `the watch to end every retried ${name} job's TTL`, failures);
    }
    await waitFor('the old expiries to fall', async () => Date.now() > fell + 500, 30000);
    for (const [name, { queue, ids }] of Object.entries(queues)) {
      await assertRanWhole(queue, ids, seen[name], failures, `${name}, retried by retryJobs`);
      assert.ok(daemon.log().includes(`bull:${name}: watching the expiries`), daemon.log());
    }
    await Promise.all(workers.map((w) => w.close()));
    await daemon.kill();
    for (const [name, { ids }] of Object.entries(queues)) {
      assert.deepEqual(auditedIds(trail(), 'persist', name), [...ids].sort(), `each ${name} TTL ended is audited as persist`);
      const policies = new Set(trail().filter((e) => e.action === 'persist' && e.queueName === name).map((e) => e.policyName));
      assert.deepEqual([...policies], ['p'], `${name}: under the policy that gave the expiries`);
    }
    for (const { queue } of Object.values(queues)) await queue.close();
  });
}

test('Bull 4: Queue.retryJobs and Job.retry beside a slow worker: the daemon ends the TTLs, every job runs whole', async () => {
  const Bull = require(process.env.BULLSWEEP_BULL || 'bull');
  const db = 7;
  const client = redis.client(db);
  await client.flushdb();
  const opts = { redis: { ...redis.connection(db) } };
  const producer = track(new Bull('legacy-retried', opts));
  const ids = [];
  for (let i = 0; i < 20; i++) ids.push(String((await producer.add({ i }, { attempts: 1 })).id));
  producer.process(8, async () => { throw new Error('first attempt'); });
  await waitFor('every Bull job to fail', async () => (await producer.getFailedCount()) === 20);
  await producer.close();
  const { policy, trail } = auditedPolicy('{ failed: { ttl: 8s } }', ['schedule: 24h']);
  await run(db, policy);
  await assertExpiring(client, 'bull:legacy-retried', ids, 'after the first run');
  const daemon = startDaemon(['--redis', redis.url(db), '--config', policy]);
  await waitFor('the daemon to start', async () => daemon.log().includes('daemon started'));
  const queue = track(new Bull('legacy-retried', opts));
  await (await queue.getJob(ids[0])).retry();
  await queue.retryJobs();
  const { seen, failures } = bullWorker(queue, 500);
  await waitPersisted(client, 'bull:legacy-retried', ids, 'the watch to end every retried Bull job\'s TTL', failures);
  await assertBullRanWhole(queue, ids, seen, failures);
  await queue.close();
  await daemon.kill();
  assert.deepEqual(auditedIds(trail(), 'persist', 'legacy-retried'), [...ids].sort());
});

test('Bull 4: expiries a run gave beside a daemon whose policy never reaches the queue: the watch ends them on Queue.retryJobs, every job runs whole', async () => {
  const Bull = require(process.env.BULLSWEEP_BULL || 'bull');
  const db = 12;
  const client = redis.client(db);
  await client.flushdb();
  const opts = { redis: { ...redis.connection(db) } };
  const { policy, audit, trail } = auditedPolicy('{ failed: { ttl: 12s } }');
  const daemonPolicy = elsewherePolicy(audit);
  const daemon = startDaemon(['--redis', redis.url(db), '--config', daemonPolicy]);
  await waitFor('the daemon to start', async () => daemon.log().includes('daemon started'));
  const queue = track(new Bull('legacy-beside', opts));
  const ids = [];
  for (let i = 0; i < 20; i++) ids.push(String((await queue.add({ i }, { attempts: 1 })).id));
  const failer = track(new Bull('legacy-beside', opts));
  failer.process(8, async () => { throw new Error('first attempt'); });
  await waitFor('every Bull job to fail', async () => (await queue.getFailedCount()) === 20);
  await failer.close();
  await run(db, policy);
  await assertExpiring(client, 'bull:legacy-beside', ids, 'after the run');
  let fell = 0;
  for (const id of ids) fell = Math.max(fell, Date.now() + await client.pttl(`bull:legacy-beside:${id}`));
  // Bull writes no events stream: the watch finds these retries in its walk of the expiries
  // due, seconds before they would fall.
  await queue.retryJobs();
  const { seen, failures } = bullWorker(queue, 300);
  await waitPersisted(client, 'bull:legacy-beside', ids, 'the watch to end every retried Bull job\'s TTL', failures);
  await waitFor('the old expiries to fall', async () => Date.now() > fell + 500, 30000);
  await assertBullRanWhole(queue, ids, seen, failures);
  await queue.close();
  await daemon.kill();
  assert.ok(daemon.log().includes('bull:legacy-beside: watching the expiries'), daemon.log());
  assert.deepEqual(auditedIds(trail(), 'persist', 'legacy-beside'), [...ids].sort());
});

for (const [n, v] of VERSIONS.entries()) {
  test(`${v.label}: custom ids added again after their jobs expired keep the new jobs whole through the next run`, async () => {
    const db = 8 + n;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const queue = track(new v.mq.Queue('orders', { connection }));
    const ids = Array.from({ length: 20 }, (_, i) => `order-${i}`);
    for (const id of ids) await queue.add('order', { v: 1, id }, { jobId: id });
    const first = track(new v.mq.Worker('orders', async (job) => job.data.v, { connection, concurrency: 4 }));
    await waitFor('the first orders to complete', async () => (await queue.getCompletedCount()) === 20);
    await first.close();
    const { policy, trail } = auditedPolicy('{ completed: { ttl: 1s } }');
    await run(db, policy);
    await waitFor('Redis to expire the first orders', async () => {
      for (const id of ids) if (await client.exists(`bull:orders:${id}`)) return false;
      return true;
    });
    // Their ids are still in `completed` (the next run drops them) when the producer adds
    // the same idempotency keys again.
    assert.equal(await client.zcard('bull:orders:completed'), 20);
    for (const id of ids) {
      const job = await queue.add('order', { v: 2, id }, { jobId: id });
      assert.equal(job.id, id);
    }
    const expiredBefore = auditedIds(trail(), 'expire', 'orders');
    const report = await run(db, policy);
    // (BullMQ's getState() says `completed` while the old entry is there; the job waits.)
    const waiting = (await queue.getWaiting()).map((j) => j.id);
    for (const id of ids) {
      assert.equal(await client.pttl(`bull:orders:${id}`), -1, `the new ${id} has its hash and no TTL`);
      assert.ok(waiting.includes(id), `${id} waits`);
      assert.deepEqual((await queue.getJob(id)).data, { v: 2, id });
    }
    const ttl = report.queues.find((q) => q.queue === 'orders').states['completed:ttl'];
    assert.equal(ttl.done, 0, JSON.stringify(ttl));
    assert.equal(ttl.ttl.notFinished, 20, JSON.stringify(ttl));
    assert.deepEqual(auditedIds(trail(), 'expire', 'orders'), expiredBefore, 'the second run gave no TTL');
    assert.deepEqual(trail().filter((e) => e.queueName === 'orders' && e.action !== 'expire'), [], 'nothing of the new jobs repaired or removed');
    // A third run, the orders still waiting, changes nothing either.
    await run(db, policy);
    const seen = {};
    const failures = [];
    const worker = track(new v.mq.Worker('orders', async (job) => { seen[job.id] = job.data; return job.data.v; }, { connection, concurrency: 4 }));
    worker.on('failed', (job, err) => failures.push(`failed ${job && job.id}: ${err.message}`));
    worker.on('error', (err) => failures.push(`error: ${err.message}`));
    await waitFor('the new orders to complete', async () => failures.length > 0
      || Object.keys(seen).length === 20 && (await queue.getCompletedCount()) === 20, 30000);
    await worker.close();
    assert.deepEqual(failures, []);
    for (const id of ids) assert.deepEqual(seen[id], { v: 2, id }, `${id} ran with the new data`);
    await queue.close();
  });
}

for (const [n, v] of VERSIONS.entries()) {
  test(`${v.label}: a job added again under an expired failed job's id and completed since is never taken through the stale failed entry`, async () => {
    const db = 12 + n;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const queue = track(new v.mq.Queue('orders', { connection }));
    const ids = Array.from({ length: 10 }, (_, i) => `order-${i}`);
    for (const id of ids) await queue.add('order', { v: 1, id }, { jobId: id });
    const failing = track(new v.mq.Worker('orders', async () => { throw new Error('card declined'); }, { connection, concurrency: 4 }));
    await waitFor('the first orders to fail', async () => (await queue.getFailedCount()) === 10);
    await failing.close();
    // Their hashes go as an expiry of the user's own or an eviction (`maxmemory-policy
    // allkeys-lru`) takes them: bullsweep gave none, so no run of its drops the ids (a run
    // drops what its own expiries left, the next test's case).
    await client.del(...ids.map((id) => `bull:orders:${id}`), ...ids.map((id) => `bull:orders:${id}:logs`));
    const { policy: expiring } = auditedPolicy('{ failed: { ttl: 1s } }');
    // The ids are still in `failed` when the producer adds them again; the new jobs complete,
    // so each id sits in `failed` (stale, the old finish time) and in `completed` (the live
    // job).
    for (const id of ids) await queue.add('order', { v: 2, id }, { jobId: id });
    const worker = track(new v.mq.Worker('orders', async (job) => job.data.v, { connection, concurrency: 4 }));
    await waitFor('the new orders to complete', async () => (await queue.getCompletedCount()) === 10);
    await worker.close();
    const staleScores = await client.zrange('bull:orders:failed', 0, -1, 'WITHSCORES');
    assert.equal(staleScores.length, 20, 'every stale entry is there');
    const before = await dumpKeyspace(client);
    // The id walk (archive: archived first, then removed by id) and the prefix sweep (remove):
    // neither takes a completed job through its stale `failed` entry.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-ttl-stale-'));
    const { policy: archiving, trail } = auditedPolicy('{ failed: { maxAge: 1ms, action: archive } }', [`archive: { url: "file://${dir}/archive" }`]);
    const archived = await run(db, archiving);
    const { policy: removing } = auditedPolicy('{ failed: { maxAge: 1ms } }');
    const removed = await run(db, removing);
    for (const report of [archived, removed]) {
      const failed = report.queues.find((q) => q.queue === 'orders').states.failed;
      assert.equal(failed.done, 0, JSON.stringify(failed));
      assert.equal(failed.skipped.changed, 10, JSON.stringify(failed));
    }
    assert.deepEqual(trail().filter((e) => e.queueName === 'orders'), [], 'nothing archived or removed');
    const after = await dumpKeyspace(client);
    // The runs wrote only their own bookkeeping; every key of the queue is as it was.
    const queueKeys = (dump) => Object.fromEntries(Object.entries(dump).filter(([k]) => k.startsWith('bull:orders:')));
    assert.deepEqual(queueKeys(after), queueKeys(before));
    for (const id of ids) {
      const job = await queue.getJob(id);
      assert.deepEqual(job.data, { v: 2, id });
      assert.equal(job.returnvalue, 2);
    }
    // doctor names the stale entries; the ttl queue's next run drops them (the jobs stay), so
    // that "Retry all" of failed jobs finds none to run again.
    const doctor = await bullsweep(['--redis', redis.url(db), '--json', 'doctor']);
    const stale = JSON.parse(doctor.stdout).queues.find((q) => q.queue === 'orders').findings
      .find((f) => f.kind === 'staleEntries');
    assert.equal(stale.found, 10, doctor.stdout);
    assert.ok(stale.samples.includes('bull:orders:failed[order-0]'), doctor.stdout);
    // The plan says what the run will drop, and `--detailed-exitcode` that it will change.
    const planned = await bullsweep(['--redis', redis.url(db), '--config', expiring, '--json', 'plan', '--detailed-exitcode']);
    assert.equal(planned.code, 2, planned.stderr);
    const plannedTtl = JSON.parse(planned.stdout).queues.find((q) => q.queue === 'orders').states['failed:ttl'];
    assert.equal(plannedTtl.ttl.staleEntriesDropped, 10, JSON.stringify(plannedTtl));
    assert.equal(await client.zcard('bull:orders:failed'), 10, 'the plan dropped nothing');
    const dropping = await run(db, expiring);
    const failedTtl = dropping.queues.find((q) => q.queue === 'orders').states['failed:ttl'];
    assert.equal(failedTtl.ttl.staleEntriesDropped, 10, JSON.stringify(failedTtl));
    assert.equal(failedTtl.ttl.expiredIdsDropped, 0, JSON.stringify(failedTtl));
    assert.equal(await client.zcard('bull:orders:failed'), 0);
    assert.equal(await queue.getCompletedCount(), 10);
    await queue.retryJobs({ state: 'failed' });
    assert.deepEqual(await client.lrange('bull:orders:wait', 0, -1), [], 'no completed job runs again');
    for (const id of ids) assert.equal(await queue.getJobState(id), 'completed');
    await queue.close();
  });
}

for (const [n, v] of VERSIONS.entries()) {
  test(`${v.label}: a policy that no longer takes a ttl still drops the ids its expiries left`, async () => {
    const db = 14 + n;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const queue = track(new v.mq.Queue('orders', { connection }));
    const ids = ['order-1', 'order-2', 'order-3'];
    for (const id of ids) await queue.add('order', { id }, { jobId: id });
    const failing = track(new v.mq.Worker('orders', async () => { throw new Error('declined'); }, { connection }));
    await waitFor('the orders to fail', async () => (await queue.getFailedCount()) === 3);
    await failing.close();
    const { policy: expiring } = auditedPolicy('{ failed: { ttl: 1s } }');
    await run(db, expiring);
    await waitFor('Redis to expire them', async () => (await client.exists(...ids.map((id) => `bull:orders:${id}`))) === 0);
    // The ttl is taken out of the policy before any run dropped the ids.
    const { policy: plain } = auditedPolicy('{ failed: { maxAge: 30d } }');
    const report = await run(db, plain);
    const ttl = report.queues.find((q) => q.queue === 'orders').states['failed:ttl'];
    assert.equal(ttl.ttl.expiredIdsDropped, 3, JSON.stringify(ttl));
    assert.equal(await client.zcard('bull:orders:failed'), 0);
    const doctor = await bullsweep(['--redis', redis.url(db), '--json', 'doctor']);
    assert.equal(doctor.code, 0, doctor.stdout);
    await queue.close();
  });
}

for (const [n, v] of VERSIONS.entries()) {
  test(`${v.label}: a pending rule removing a job added again under an expired job's id takes the id out of every state`, async () => {
    const db = 10 + n;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const queue = track(new v.mq.Queue('orders', { connection }));
    const ids = ['order-1', 'order-2'];
    for (const id of ids) await queue.add('order', { v: 1, id }, { jobId: id });
    const first = track(new v.mq.Worker('orders', async (job) => job.data.v, { connection }));
    await waitFor('the first orders to complete', async () => (await queue.getCompletedCount()) === 2);
    await first.close();
    const { policy } = auditedPolicy('{ completed: { ttl: 1s } }');
    await run(db, policy);
    await waitFor('Redis to expire them', async () => (await client.exists(...ids.map((id) => `bull:orders:${id}`))) === 0);
    // The same ids come back as delayed jobs while `completed` still names them.
    for (const id of ids) await queue.add('order', { v: 2, id }, { jobId: id, delay: 3600000 });
    const { policy: removal } = auditedPolicy('{ delayed: { maxAge: 1ms, action: remove } }');
    const report = await run(db, removal);
    assert.equal(report.queues.find((q) => q.queue === 'orders').states.delayed.done, 2, JSON.stringify(report));
    for (const id of ids) {
      assert.equal(await client.exists(`bull:orders:${id}`), 0);
      for (const s of ['completed', 'failed', 'delayed']) assert.equal(await client.zscore(`bull:orders:${s}`, id), null, `${id} left in ${s}`);
    }
    // "Retry all" of completed jobs finds no id to bring back as a job without data.
    await queue.retryJobs({ state: 'completed' });
    assert.deepEqual(await client.lrange('bull:orders:wait', 0, -1), []);
    const doctor = await bullsweep(['--redis', redis.url(db), '--config', removal, '--json', 'doctor']);
    assert.equal(doctor.code, 0, doctor.stdout);
    await queue.close();
  });
}
