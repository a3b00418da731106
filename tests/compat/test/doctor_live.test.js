// Issue 27: `bullsweep doctor --repair` while BullMQ runs (6.7 and 5.81): a live producer and
// workers, and a SIGKILLed worker's locks. The damage is lib/damage.js's, as in doctor.test.js.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { startRedis, waitFor } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');
const { assertReadable } = require('../lib/pending');
const { KINDS, BYSTANDERS, buildBystanders, openQueues, finish, withQueue } = require('../lib/damage');
const { VERSIONS, auditPolicy, runDoctor, findingsOf, repairEvents } = require('../lib/doctor_cli');
const { rawDump, diff } = require('../lib/snapshot');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

const doctor = (db, args, config) => runDoctor(redis, db, args, config);

// Live: a producer adds jobs, deduplicated jobs and flows in a loop and workers process them
// while `doctor --repair all` runs against a database holding damage of every kind (the kinds'
// queues above, and the live queues' own: orphan hashes, dangling ids, a stale dedup key, a
// stuck parent). No job is lost, no worker errs, the live queues' damage is found exactly (no
// live job mistaken for damage), and afterwards doctor finds nothing.
for (const v of VERSIONS) {
  test(`${v.label}: doctor --repair all under a live producer and workers loses no job`, async (t) => {
    const db = 5;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const { mq } = v;
    await buildBystanders(mq, connection);
    for (const spec of Object.values(KINDS)) {
      const ctx = await spec.build(mq, connection, client);
      await openQueues(mq, connection, spec.queues);
      await spec.fault(ctx, mq, connection, client);
    }
    // The live queues' own damage, made before the workers start.
    const live = new mq.Queue('live', { connection });
    const flows = new mq.FlowProducer({ connection });
    const old = await live.addBulk(Array.from({ length: 8 }, (_, i) => ({ name: 'old', data: { i }, opts: { jobId: `old-${i}` } })));
    await finish(mq, connection, 'live', old.map((j) => j.id));
    await client.zrem('bull:live:completed', 'old-0', 'old-1', 'old-2'); // orphan hashes
    await client.del('bull:live:old-3', 'bull:live:old-4', 'bull:live:old-5'); // dangling ids
    await live.add('dd', {}, { jobId: 'live-dd', deduplication: { id: 'live-dd' } });
    await client.del('bull:live:live-dd');
    await client.lrem('bull:live:wait', 1, 'live-dd'); // a stale dedup key
    await flows.add({ name: 'stuck', queueName: 'live-parents', opts: { jobId: 'lp-stuck' }, children: [
      { name: 'gone', queueName: 'live', opts: { jobId: 'lc-gone' } },
    ] });
    await client.del('bull:live:lc-gone');
    await client.lrem('bull:live:wait', 1, 'lc-gone'); // a stuck parent
    await openQueues(mq, connection, ['live-parents']);

    const problems = [];
    const completed = new Set();
    // Jobs named `retry` fail their first attempt on purpose (retried through `delayed`).
    const workers = ['live', 'live-parents'].map((name) => {
      const w = new mq.Worker(name, async (job) => {
        if (job.name === 'retry' && job.attemptsMade === 0) throw new Error('planned retry');
        return { n: job.data.n };
      }, { connection, concurrency: 8 });
      w.on('completed', (job) => completed.add(`${name}:${job.id}`));
      w.on('failed', (job, err) => {
        if (err.message !== 'planned retry') problems.push(`${name} failed ${job && job.id}: ${err.message}`);
      });
      w.on('error', (err) => problems.push(`${name} error: ${err.message}`));
      return w;
    });
    const added = [];
    const removedOnComplete = new Set();
    let stop = false;
    const producer = (async () => {
      for (let n = 0; !stop; n++) {
        if (n % 10 === 9) {
          const node = await flows.add({ name: 'flow', queueName: 'live-parents', data: { n }, children: [
            { name: 'kid', queueName: 'live', data: { n } }, { name: 'kid', queueName: 'live', data: { n } }] });
          added.push(`live-parents:${node.job.id}`, ...node.children.map((c) => `live:${c.job.id}`));
        } else {
          // Every way a job moves between states while doctor reads: dedup keys, custom ids,
          // retries through `delayed`, priorities, short delays, removal on completion.
          const kinds = [
            ['job', { deduplication: { id: `live-${n}` } }], ['job', { jobId: `custom:${n}:x` }],
            ['retry', { attempts: 2, backoff: { type: 'fixed', delay: 5 } }], ['job', { priority: 1 + (n % 7) }],
            ['job', { delay: 20 }], ['job', { removeOnComplete: true }], ['job', {}]];
          const [name, opts] = kinds[n % kinds.length];
          const job = await live.add(name, { n }, opts);
          added.push(`live:${job.id}`);
          if (opts.removeOnComplete) removedOnComplete.add(`live:${job.id}`);
        }
        await new Promise((r) => setImmediate(r));
      }
    })();
    await waitFor('the workers to be busy', async () => completed.size >= 50);
    const { file, trail } = auditPolicy();
    let run;
    try {
      run = await doctor(db, ['--repair', 'all'], file);
      const addedDuringRun = added.length;
      await waitFor('jobs added after the repair', async () => added.length >= addedDuringRun + 20);
      stop = true;
      await producer;
      assert.equal(run.code, 1, `${run.stderr}${run.stdout}`);
      await waitFor('the live queues to drain', async () => added.every((id) => completed.has(id)), 60000);
      await waitFor('the stuck parent to be processed', async () => completed.has('live-parents:lp-stuck'));
    } finally {
      stop = true;
      await producer;
      await Promise.all(workers.map((w) => w.close(true)));
      await live.close();
      await flows.close();
    }
    t.diagnostic(`${added.length} jobs added (${removedOnComplete.size} removed on completion), ${completed.size} completed; report ${run.stdout}`);

    assert.deepEqual(problems, [], 'no worker error, no job failed');
    for (const id of added.filter((x) => !removedOnComplete.has(x))) {
      const [queue, jobId] = [id.slice(0, id.indexOf(':')), id.slice(id.indexOf(':') + 1)];
      assert.notEqual(await client.zscore(`bull:${queue}:completed`, jobId), null, `${id} completed`);
      assert.equal(await client.exists(`bull:${queue}:${jobId}`), 1, `${id} is kept`);
    }
    // The live queues' damage, found exactly, and all repaired.
    const of = (queue, kind) => ((run.report.queues.find((q) => q.queue === queue) || {}).findings || []).find((f) => f.kind === kind) || { found: 0 };
    const liveFindings = Object.fromEntries(['orphanHashes', 'danglingIds'].map((k) => [k, of('live', k).found]));
    assert.deepEqual(liveFindings, { orphanHashes: 3, danglingIds: 3 }, run.stdout);
    // The seeded stale dedup key is found; the live producer's own traffic may leave another
    // for a moment (a deduplicated job removed on completion leaves its key until its TTL),
    // which the repair then re-checks and skips as changed when it is no longer stale.
    const dedup = of('live', 'staleDedup');
    assert.ok(dedup.found >= 1 && dedup.samples.includes('bull:live:de:live-dd'), run.stdout);
    assert.equal(dedup.repaired + ((dedup.skipped || {}).changed || 0), dedup.found, run.stdout);
    assert.equal(of('live-parents', 'stuckParents').found, 1, run.stdout);
    for (const kind of Object.keys(KINDS)) {
      const f = findingsOf(run.report, kind);
      // A dangling id's repair takes its sub-keys, which are orphanSubkeys findings too.
      const overlap = kind === 'orphanSubkeys' ? (f.skipped.changed || 0) : 0;
      assert.ok(f.found >= KINDS[kind].found && f.repaired + overlap === f.found, `${kind}: ${JSON.stringify(f)}`);
    }
    const kinds = new Set(repairEvents(trail).map((e) => e.repairKind));
    assert.deepEqual([...kinds].sort(), Object.keys(KINDS).sort(), 'every kind\'s repair is audited');

    const again = await doctor(db);
    assert.equal(again.code, 0, `the damage is gone: ${again.stdout}${again.stderr}`);
    const queues = [...BYSTANDERS, ...Object.values(KINDS).flatMap((s) => s.queues), 'live', 'live-parents'].map((name) => ({ prefix: 'bull', name }));
    await assertReadable(mq, redis, db, queues);
    await assertConsistent(redis, db, queues);
  });
}

// A SIGKILLed worker leaves its jobs in `active` under locks that outlive it. Damage around
// them (an active job's state entry gone: an orphan hash holding a lock; an active job's hash
// gone: a dangling id in `active` whose lock remains; an active child whose parent was
// removed without it: an orphan child holding a lock) is
// never touched while the lock lives; a `:lock` with no TTL whose job is gone is an orphan
// sub-key and goes; a `:lock` with a TTL whose job is gone is the worker's, and stays.
for (const v of VERSIONS) {
  test(`${v.label}: doctor --repair all never touches what a killed worker's lock holds`, async (t) => {
    const db = 7;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const ids = ['L-orphan', 'L-dangling', 'L-persist', 'L-ok', 'L-child'];
    await withQueue(v.mq, connection, 'held', async (q) => {
      for (const jobId of ids.slice(0, 4)) await q.add('hang', {}, { jobId });
      const flows = new v.mq.FlowProducer({ connection });
      await flows.add({ name: 'p', queueName: 'held-parent', opts: { jobId: 'L-parent' }, children: [
        { name: 'hang', queueName: 'held', opts: { jobId: 'L-child' } }] });
      await flows.close();
      const worker = spawn(process.execPath, [path.join(__dirname, '..', 'lib', 'hold_worker.js'), v.pkg, redis.url(db), 'held', String(ids.length)],
        { cwd: path.join(__dirname, '..'), stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      worker.stdout.on('data', (d) => { out += d; });
      try {
        await waitFor('the worker to take every job', async () => ids.every((id) => out.includes(`active ${id}\n`)));
      } finally {
        worker.kill('SIGKILL');
      }
      await new Promise((r) => worker.once('exit', r));
    });
    // The active child's parent removed without its children (BullMQ checks only the
    // parent's own lock): an orphan child under a live lock.
    await withQueue(v.mq, connection, 'held-parent', async (q) => {
      await (await v.mq.Job.fromId(q, 'L-parent')).remove({ removeChildren: false });
    });
    await client.lrem('bull:held:active', 1, 'L-orphan');
    await client.del('bull:held:L-dangling');
    await client.del('bull:held:L-persist');
    await client.lrem('bull:held:active', 1, 'L-persist');
    await client.persist('bull:held:L-persist:lock');

    const before = await rawDump(client);
    const { file } = auditPolicy();
    const run = await doctor(db, ['--repair', 'all'], file);
    assert.equal(run.code, 1, `${run.stdout}${run.stderr}`);
    const findings = Object.fromEntries(run.report.queues.find((q) => q.queue === 'held').findings.map((f) => [f.kind, f]));
    t.diagnostic(JSON.stringify(findings));
    for (const kind of ['orphanHashes', 'danglingIds', 'orphanChildren']) {
      const f = findings[kind] || {};
      assert.deepEqual([f.found, f.repaired, (f.skipped || {}).locked], [1, 0, 1], `${kind}: found, and skipped as locked: ${JSON.stringify(f)}`);
    }
    assert.equal(findings.orphanSubkeys && findings.orphanSubkeys.found, 1, JSON.stringify(findings.orphanSubkeys));
    assert.deepEqual(findings.orphanSubkeys.samples, ['bull:held:L-persist:lock']);
    const changes = diff(before, await rawDump(client));
    const ours = (k) => k.startsWith('bullsweep:');
    assert.deepEqual({ added: changes.added.filter((k) => !ours(k)), removed: changes.removed, changed: changes.changed.filter((k) => !ours(k)) },
      { added: [], removed: ['bull:held:L-persist:lock'], changed: [] }, 'only the lock with no TTL went');
  });
}

// A healthy queue under load is never damaged: while workers move thousands of jobs through
// active, delayed (retries), completed and failed, every read-only doctor run finds nothing.
for (const v of VERSIONS) {
  test(`${v.label}: a busy healthy queue: doctor finds nothing while workers process it`, async () => {
    const db = 13;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const busy = new v.mq.Queue('busy', { connection });
    await busy.addBulk(Array.from({ length: 4000 }, (_, i) => ({
      name: i % 3 ? 'job' : 'retry', data: { i }, opts: { attempts: 2, backoff: { type: 'fixed', delay: 1 } } })));
    const worker = new v.mq.Worker('busy', async (job) => {
      if (job.name === 'retry' && job.attemptsMade === 0) throw new Error('planned retry');
      return job.data.i;
    }, { connection, concurrency: 16 });
    const findings = [];
    try {
      await waitFor('the worker to be busy', async () => (await busy.getCompletedCount()) > 100);
      for (let run = 0; run < 8; run++) {
        const r = await doctor(db);
        const q = r.report && r.report.queues.find((x) => x.queue === 'busy');
        if (r.code !== 0 || !q || q.findings.length) findings.push(`run ${run}: exit ${r.code} ${JSON.stringify(q)} ${r.stderr}`);
      }
    } finally {
      await worker.close(true);
      await busy.close();
    }
    assert.deepEqual(findings, [], 'no finding on a healthy queue under load');
  });
}
