// Rule kinds beyond finished sets, judged by real BullMQ: stalled active jobs (retry and
// remove), the dead-letter lifecycle (warm, cold marker, purge) and moveExhaustedTo.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker, UnrecoverableError } = require('bullmq');
const { startRedis, bullsweep, writePolicy, sleep, waitFor } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');

const range = (n) => Array.from({ length: n }, (_, i) => i);

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

// Takes the next job as a worker that then disappears: its lock lives `lockMs`.
async function takeAndVanish(name, connection, lockMs) {
  const worker = new Worker(name, null, { connection, lockDuration: lockMs });
  const job = await worker.getNextJob(`vanished-${lockMs}`);
  await worker.close();
  return job;
}

test('stalled jobs: retry moves them back to wait, remove removes them, locked jobs stay', async () => {
  const db = 1;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const policy = writePolicy(`version: 1
policies:
  - { name: retried, queueNamePattern: retryq, rules: { stalled: { maxAge: 1s, action: retry } } }
  - { name: removed, queueNamePattern: removeq, rules: { stalled: { maxAge: 1s, action: remove } } }
`);
  const out = {};
  for (const name of ['retryq', 'removeq']) {
    const queue = new Queue(name, { connection });
    await queue.add('abandoned', { n: 1 });
    await queue.add('alive', { n: 2 });
    await queue.add('fresh', { n: 3 });
    const abandoned = await takeAndVanish(name, connection, 300);
    const alive = await takeAndVanish(name, connection, 60000);
    out[name] = { queue, abandoned, alive };
  }
  await sleep(1200);
  // Started just now, without a lock: younger than maxAge, so left alone.
  for (const name of ['retryq', 'removeq']) {
    out[name].fresh = await takeAndVanish(name, connection, 1);
    await sleep(5);
  }

  const plan = await bullsweep(['--json', 'plan', '--redis', redis.url(db), '--config', policy]);
  assert.equal(plan.code, 0, plan.stderr);
  const planned = JSON.parse(plan.stdout).queues.find((q) => q.queue === 'retryq').states.stalled;
  assert.deepEqual([planned.jobs, planned.matched, planned.action], [3, 1, 'retry']);

  const run = await bullsweep(['--json', 'run', '--redis', redis.url(db), '--config', policy]);
  assert.equal(run.code, 0, run.stderr);

  const { queue: rq, abandoned, alive, fresh } = out.retryq;
  const retried = await rq.getJob(abandoned.id);
  assert.equal(await retried.getState(), 'waiting');
  assert.equal(retried.stalledCounter, 1);
  assert.equal(await (await rq.getJob(alive.id)).getState(), 'active');
  assert.equal(await (await rq.getJob(fresh.id)).getState(), 'active');
  const events = await client.xrange('bull:retryq:events', '-', '+');
  assert.ok(events.some(([, f]) => f[1] === 'stalled' && f[3] === abandoned.id), 'a stalled event');
  // A real worker picks the retried job up and completes it.
  const worker = new Worker('retryq', async (job) => `done ${job.id}`, { connection });
  await waitFor('the retried job to complete', async () => (await rq.getJob(abandoned.id)).finishedOn !== undefined);
  await worker.close();
  assert.equal(await (await rq.getJob(abandoned.id)).getState(), 'completed');

  const { queue: mq } = out.removeq;
  assert.equal(await mq.getJob(out.removeq.abandoned.id), undefined);
  assert.equal(await (await mq.getJob(out.removeq.alive.id)).getState(), 'active');
  assert.equal(await (await mq.getJob(out.removeq.fresh.id)).getState(), 'active');
  assert.equal(await client.exists(`bull:removeq:${out.removeq.abandoned.id}:logs`), 0);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'removeq' }]);
  for (const name of ['retryq', 'removeq']) await out[name].queue.close();
});

test('moveExhaustedTo and the dead-letter lifecycle: warm, cold marker, gone, purged', async () => {
  const db = 2;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-dlq-archive-'));
  const policy = writePolicy(`version: 1
archive: { url: "file://${archiveDir}" }
policies:
  - { name: payments, queueNamePattern: payments, moveExhaustedTo: payments-dlq }
  - name: dead-letters
    queueNamePattern: "*-dlq"
    deadLetter: { warm: 2s, cold: 4s, purgeAfter: 6s }
`);
  const run = async () => {
    const r = await bullsweep(['--json', 'run', '--redis', redis.url(db), '--config', policy]);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  const payments = new Queue('payments', { connection });
  const dlq = new Queue('payments-dlq', { connection });
  await payments.addBulk(range(5).map((i) => ({ name: 'charge', data: { card: `c${i}`, amount: i } })));
  await payments.add('refund', { card: 'r1' }, { attempts: 3 });
  const worker = new Worker('payments', async (job) => {
    await job.log(`trying ${job.name}`);
    if (job.name === 'refund') throw new UnrecoverableError('card blocked');
    throw new Error(`declined ${job.data.card}: ${'x'.repeat(400)}`);
  }, { connection });
  await waitFor('six failures', async () => (await payments.getFailedCount()) === 6);
  await worker.close();

  // Exhausted jobs move; the refund, with attempts left, stays.
  await run();
  assert.equal(await payments.getFailedCount(), 1);
  assert.equal((await payments.getFailed())[0].name, 'refund');
  const moved = await dlq.getFailed(0, -1);
  assert.equal(moved.length, 5);
  assert.deepEqual(moved.map((j) => j.data.card).sort(), ['c0', 'c1', 'c2', 'c3', 'c4']);
  assert.ok(moved.every((j) => j.failedReason.startsWith('declined') && j.attemptsMade === 1));
  assert.deepEqual((await dlq.getJobLogs(moved[0].id)).logs, ['trying charge']);
  // A moved job is a real BullMQ job: it can be retried and completed in the dead-letter queue.
  await moved[0].retry('failed');
  const dlqWorker = new Worker('payments-dlq', async () => 'handled by hand', { connection });
  await waitFor('the retried job', async () => (await dlq.getCompletedCount()) === 1);
  await dlqWorker.close();
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'payments' }, { prefix: 'bull', name: 'payments-dlq' }]);

  // Warm: everything stays whole.
  await run();
  assert.equal((await dlq.getFailed(0, -1)).filter((j) => j.data.card).length, 4);

  // Cold: archived, then a small marker that BullMQ still lists (past `warm`, by the failed
  // jobs' own finish times, and well before `cold`).
  const failedLast = Math.max(...(await client.zrange('bull:payments-dlq:failed', 0, -1, 'WITHSCORES'))
    .filter((_, i) => i % 2 === 1).map(Number));
  await sleep(Math.max(0, failedLast + 2000 + 300 - Date.now()));
  const coldReport = await run();
  assert.equal(coldReport.queues.find((q) => q.queue === 'payments-dlq').states['failed:deadLetter-cold'].done, 4);
  const cold = await dlq.getFailed(0, -1);
  assert.equal(cold.length, 4);
  for (const job of cold) {
    assert.equal(job.name, 'charge');
    assert.deepEqual(job.data, {});
    assert.ok(job.failedReason.startsWith('declined'));
    const fields = await client.hgetall(`bull:payments-dlq:${job.id}`);
    const bytes = Object.entries(fields).reduce((n, [k, v]) => n + k.length + v.length, 0);
    assert.ok(bytes <= 300, `marker of ${bytes} bytes`);
    assert.ok(Number(fields.archivedAt) > 0 && Number(fields.purgeAfter) === Number(fields.finishedOn) + 6000);
    assert.equal(await client.exists(`bull:payments-dlq:${job.id}:logs`), 0);
  }
  assert.equal((await dlq.getCompleted())[0].name, 'charge');
  const grep = await bullsweep(['archive', 'grep', 'fields.data.card=c3', '--config', policy]);
  assert.equal(grep.code, 0, grep.stderr);
  assert.equal(JSON.parse(grep.stdout.trim()).fields.failedReason.length > 300, true);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'payments-dlq' }]);

  // Gone from Redis: past `cold` for every job, the one completed after its retry included
  // (waited for by its own finish time, not a fixed sleep: a loaded machine finishes it later).
  const finishedLast = Math.max(...(await client.zrange('bull:payments-dlq:completed', 0, -1, 'WITHSCORES'))
    .filter((_, i) => i % 2 === 1).map(Number));
  await sleep(Math.max(0, finishedLast + 4000 + 300 - Date.now()));
  await run();
  assert.equal(await dlq.getFailedCount(), 0);
  assert.equal(await dlq.getCompletedCount(), 0);
  assert.equal((await bullsweep(['archive', 'grep', 'fields.data.card=c3', '--config', policy])).code, 0);

  // Purged: past `purgeAfter` (6 s after each finish), the archived copies go too.
  await sleep(Math.max(0, finishedLast + 6000 + 300 - Date.now()));
  const purged = await run();
  assert.equal(purged.queues.find((q) => q.queue === 'payments-dlq').states['archive:deadLetter-purge'].done, 5);
  const none = await bullsweep(['archive', 'grep', 'fields.data.card=c3', '--config', policy]);
  assert.equal(none.code, 1, 'no trace left in the archive');
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'payments-dlq' }]);
  await payments.close();
  await dlq.close();
});

test('moveExhaustedTo counts attempts as BullMQ 6 does (atm): jobs that set attempts move once they are used up', async () => {
  const db = 3;
  const connection = redis.connection(db);
  const policy = writePolicy(`version: 1
policies:
  - { name: retried, queueNamePattern: retried, moveExhaustedTo: retried-dlq }
`);
  const queue = new Queue('retried', { connection });
  const dlq = new Queue('retried-dlq', { connection });
  await queue.add('twice', { n: 1 }, { attempts: 2 });
  await queue.add('once', { n: 2 }, { attempts: 1 });
  await queue.add('blocked', { n: 3 }, { attempts: 3 });
  const worker = new Worker('retried', async (job) => {
    if (job.name === 'blocked') throw new UnrecoverableError('no retry');
    throw new Error(`failed ${job.name}`);
  }, { connection });
  await waitFor('three failures', async () => (await queue.getFailedCount()) === 3);
  await worker.close();
  const twice = (await queue.getFailed()).find((j) => j.name === 'twice');
  assert.equal(twice.attemptsMade, 2, 'retried once, then failed for good');

  const plan = await bullsweep(['--json', 'plan', '--redis', redis.url(db), '--config', policy]);
  assert.equal(plan.code, 0, plan.stderr);
  const planned = JSON.parse(plan.stdout).queues.find((q) => q.queue === 'retried').states['failed:exhausted'];
  assert.equal(planned.matched, 2, 'twice and once are exhausted; blocked has attempts left');
  const run = await bullsweep(['--json', 'run', '--redis', redis.url(db), '--config', policy]);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual((await queue.getFailed()).map((j) => j.name), ['blocked']);
  const moved = await dlq.getFailed(0, -1);
  assert.deepEqual(moved.map((j) => [j.name, j.attemptsMade]).sort(), [['once', 1], ['twice', 2]]);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'retried' }, { prefix: 'bull', name: 'retried-dlq' }]);
  await queue.close();
  await dlq.close();
});
