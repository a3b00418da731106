// Rule kinds beyond finished sets, judged by real BullMQ: stalled active jobs (retry and
// remove), the dead-letter lifecycle (warm, cold marker, purge) and moveExhaustedTo.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue, Worker } = require('bullmq');
const { startRedis, bullsweep, writePolicy, sleep, waitFor } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');

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
