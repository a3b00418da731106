// Archive then restore: BullMQ's own API must read restored jobs as valid, and workers must
// run them to completion.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker } = require('../lib/bullmq');
const { startRedis, bullsweep, writePolicy, sleep } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

async function waitForState(queue, id, state) {
  const deadline = Date.now() + 15000;
  for (;;) {
    const now = await queue.getJobState(id);
    if (now === state) return;
    if (Date.now() > deadline) throw new Error(`job ${id} is ${now}, expected ${state}`);
    await sleep(50);
  }
}

test('archived jobs restore as valid BullMQ jobs that workers complete', async () => {
  const connection = redis.connection(0);
  const queue = new Queue('reports', { connection });
  let failing = true;
  const worker = new Worker('reports', async (job) => {
    await job.log(`ran ${job.id}`);
    if (job.name === 'flaky' && failing) throw new Error('upstream down');
    return { ok: true, user: job.data.user };
  }, { connection });
  const flaky = await queue.add('flaky', { user: { id: 'u1', tags: ['a', 'b'] }, n: 1 });
  const fine = await queue.add('render', { user: { id: 'u2' }, n: 2 });
  await waitForState(queue, flaky.id, 'failed');
  await waitForState(queue, fine.id, 'completed');
  await worker.close();
  const failedBefore = await queue.getJob(flaky.id);
  const logsBefore = await queue.getJobLogs(flaky.id);
  await sleep(20);

  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-archive-'));
  const policy = writePolicy([
    'version: 1',
    `archive: { url: "file://${archiveDir}" }`,
    `audit: { url: "file://${archiveDir}/audit.jsonl" }`,
    'policies:',
    '  - { name: all, queueNamePattern: "*", rules: { completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } } }',
    '',
  ].join('\n'));
  const args = ['--redis', redis.url(0), '--config', policy];
  const run = await bullsweep([...args, 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await queue.getJob(flaky.id), undefined, 'archived jobs are gone from Redis');
  assert.equal(await queue.getJob(fine.id), undefined);

  // The original failed job comes back exactly as BullMQ had it.
  const original = await bullsweep([...args, 'archive', 'restore', 'bull:reports', flaky.id, '--as', 'original']);
  assert.equal(original.code, 0, original.stderr);
  const restored = await queue.getJob(flaky.id);
  assert.ok(restored, 'BullMQ reads the restored job');
  assert.equal(await restored.getState(), 'failed');
  assert.deepEqual(restored.data, failedBefore.data);
  assert.equal(restored.name, failedBefore.name);
  assert.equal(restored.failedReason, failedBefore.failedReason);
  assert.deepEqual(restored.stacktrace, failedBefore.stacktrace);
  assert.equal(restored.attemptsMade, failedBefore.attemptsMade);
  assert.equal(restored.finishedOn, failedBefore.finishedOn);
  assert.deepEqual(await queue.getJobLogs(flaky.id), logsBefore);
  const again = await bullsweep([...args, 'archive', 'restore', 'bull:reports', flaky.id, '--as', 'original']);
  assert.equal(again.code, 1, 'an existing job is never overwritten');
  assert.match(again.stderr, /exists; nothing restored/);

  // A completed job comes back as a new waiting job.
  const asNew = await bullsweep([...args, 'archive', 'restore', 'bull:reports', fine.id]);
  assert.equal(asNew.code, 0, asNew.stderr);
  const newId = asNew.stdout.match(/as bull:reports:(\S+)/)[1];
  assert.notEqual(newId, fine.id);
  const copy = await queue.getJob(newId);
  assert.equal(await copy.getState(), 'waiting');
  assert.deepEqual(copy.data, fine.data);

  // Both run to completion: the failed one after BullMQ's own retry.
  failing = false;
  await restored.retry();
  const rerun = new Worker('reports', async (job) => ({ ok: true, user: job.data.user }), { connection });
  await waitForState(queue, flaky.id, 'completed');
  await waitForState(queue, newId, 'completed');
  await rerun.close();
  assert.deepEqual((await queue.getJob(newId)).returnvalue, { ok: true, user: { id: 'u2' } });
  await queue.close();
  await assertConsistent(redis, 0, [{ prefix: 'bull', name: 'reports' }]);
});
