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

// A policy whose one rule set governs every queue, archiving to a directory of its own with
// the audit trail beside it.
function archivePolicy(rules) {
  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-archive-'));
  const policy = writePolicy([
    'version: 1',
    `archive: { url: "file://${archiveDir}" }`,
    `audit: { url: "file://${archiveDir}/audit.jsonl" }`,
    'policies:',
    `  - { name: all, queueNamePattern: "*", rules: ${rules} }`,
    '',
  ].join('\n'));
  return { policy, archiveDir };
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

  const { policy } = archivePolicy('{ completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } }');
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

// Issue 24, finding 1: the oldest completed and the oldest failed job of a queue finished in the
// same millisecond, in two queues of one name under two prefixes. One run archives them all:
// every job that left Redis has its own copy, and comes back from it as BullMQ had it.
test('same-millisecond completed and failed jobs under two prefixes each keep their copy', async () => {
  const admin = redis.client(2);
  const connection = redis.connection(2);
  const prefixes = ['bull', '{app}'];
  const before = {};
  for (const prefix of prefixes) {
    const queue = new Queue('mail', { connection, prefix });
    const worker = new Worker('mail', async (job) => {
      if (job.data.fail) throw new Error(`bounced ${job.data.n}`);
      return { sent: job.data.n };
    }, { connection, prefix });
    for (let n = 0; n < 10; n++) await queue.add('send', { n, fail: n % 2 === 1, prefix });
    const deadline = Date.now() + 15000;
    for (;;) {
      const counts = await queue.getJobCounts('completed', 'failed');
      if (counts.completed === 5 && counts.failed === 5) break;
      if (Date.now() > deadline) throw new Error(`${prefix}:mail ${JSON.stringify(counts)}`);
      await sleep(50);
    }
    await worker.close();
    // One finish time for every job of both states: BullMQ's own data, aligned to one ms.
    const at = Date.now() - 1000;
    for (const state of ['completed', 'failed']) {
      for (const id of await admin.zrange(`${prefix}:mail:${state}`, 0, -1)) {
        await admin.hset(`${prefix}:mail:${id}`, 'finishedOn', String(at));
        await admin.zadd(`${prefix}:mail:${state}`, at, id);
        before[`${prefix}:mail ${state} ${id}`] = await queue.getJob(id);
      }
    }
    await queue.close();
  }
  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-archive-'));
  const policy = writePolicy([
    'version: 1',
    `archive: { url: "file://${archiveDir}" }`,
    `audit: { url: "file://${archiveDir}/audit.jsonl" }`,
    'discovery: { layouts: ["bull:{queue}", "{{app}}:{queue}"] }',
    'policies:',
    '  - { name: all, queueNamePattern: mail, rules: { completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } } }',
    '',
  ].join('\n'));
  const args = ['--redis', redis.url(2), '--config', policy];
  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const done = JSON.parse(run.stdout).queues
    .flatMap((q) => Object.values(q.states)).reduce((n, s) => n + (s.done || 0), 0);
  assert.equal(done, 20, 'run says it archived every job');
  const ls = await bullsweep([...args, '--json', 'archive', 'ls']);
  assert.equal(ls.code, 0, ls.stderr);
  const copies = new Set();
  for (const line of ls.stdout.trim().split('\n')) {
    const cat = await bullsweep([...args, 'archive', 'cat', JSON.parse(line).segment]);
    assert.equal(cat.code, 0, cat.stderr);
    for (const r of cat.stdout.trim().split('\n').map((l) => JSON.parse(l))) copies.add(`${r.queue} ${r.state} ${r.id}`);
  }
  assert.deepEqual([...copies].sort(), Object.keys(before).sort(), 'one copy of every job that left Redis');
  for (const key of Object.keys(before)) {
    const [base, , id] = key.split(' ');
    const back = await bullsweep([...args, 'archive', 'restore', base, id, '--as', 'original', '--actor', 'compat']);
    assert.equal(back.code, 0, back.stderr);
  }
  for (const prefix of prefixes) {
    const queue = new Queue('mail', { connection, prefix });
    for (const [key, job] of Object.entries(before).filter(([k]) => k.startsWith(`${prefix}:mail `))) {
      const restored = await queue.getJob(key.split(' ')[2]);
      assert.deepEqual(restored.data, job.data, key);
      assert.equal(await restored.getState(), key.split(' ')[1], key);
    }
    await queue.close();
  }
  await assertConsistent(redis, 2, prefixes.map((prefix) => ({ prefix, name: 'mail' })));
});

test('a job a pending rule archived is refused --as original and restored --as new; the queue\'s keys keep their types', async () => {
  const client = redis.client(3);
  await client.flushdb();
  const connection = redis.connection(3);
  const queue = new Queue('reminders', { connection });
  const job = await queue.add('remind', { user: { id: 'u9' } });
  const { policy } = archivePolicy('{ waiting: { maxAge: 1ms, action: archive } }');
  const args = ['--redis', redis.url(3), '--config', policy];
  const run = await bullsweep([...args, 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await queue.getJob(job.id), undefined, 'archived and removed');
  await queue.add('remind', { user: { id: 'u8' } });
  const original = await bullsweep([...args, 'archive', 'restore', 'bull:reminders', job.id, '--as', 'original']);
  assert.equal(original.code, 2, `${original.stdout}${original.stderr}`);
  assert.match(original.stderr, /not from a finished set; nothing restored/);
  assert.equal(await client.type('bull:reminders:wait'), 'list', 'the wait list stays a list');
  assert.equal(await client.exists(`bull:reminders:${job.id}`), 0);
  const copy = await bullsweep([...args, 'archive', 'restore', 'bull:reminders', job.id, '--as', 'new']);
  assert.equal(copy.code, 0, copy.stderr);
  assert.equal(await queue.getWaitingCount(), 2, 'BullMQ reads both waiting jobs');
  await queue.close();
});
