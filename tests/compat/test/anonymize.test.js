// Anonymize: real BullMQ builds a flow whose children complete and fail with personal data in
// their data, return values, failure reasons, stack traces, logs and the parent's copies.
// After `bullsweep run`, BullMQ's own API must read scrubbed values, everything else must be
// untouched, a second run must change nothing, and a scrubbed failed job must still retry.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker, FlowProducer } = require('bullmq');
const { startRedis, dumpKeyspace, bullsweep, writePolicy, sleep, waitFor } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');

const EMAIL = 'jane.doe@example.com';
const CARD = '4111 1111 1111 1111';
const R = '[REDACTED]';

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

test('anonymize scrubs PII everywhere BullMQ keeps it, once, and BullMQ still reads the jobs', async () => {
  const connection = redis.connection(0);
  const signups = new Queue('signups', { connection });
  const accounts = new Queue('accounts', { connection });
  let failOnce = true;
  const childWorker = new Worker('signups', async (job) => {
    await job.log(`welcome mail to ${job.data.user.email}, card ${CARD}`);
    await job.log('no personal data in this line');
    if (job.name === 'bounce' && failOnce) throw new Error(`mailbox ${job.data.user.email} is full`);
    return { status: 'sent', user: { id: job.data.user.id, email: job.data.user.email } };
  }, { connection });
  const parentWorker = new Worker('accounts', async (job) => ({ children: Object.keys(await job.getChildrenValues()).length }), { connection });

  const producer = new FlowProducer({ connection });
  const flow = await producer.add({
    name: 'open-account',
    queueName: 'accounts',
    data: { owner: { email: EMAIL, phone: '+1 555 0100' }, plan: 'pro' },
    children: [
      { name: 'welcome', queueName: 'signups', data: { user: { id: 'u1', email: EMAIL, phone: '555' }, items: [{ card: CARD, sku: 'a' }] } },
      { name: 'bounce', queueName: 'signups', data: { user: { id: 'u1', email: EMAIL }, items: [] }, opts: { ignoreDependencyOnFailure: true } },
    ],
  });
  const [welcome, bounce] = flow.children.map((c) => c.job);
  const parentId = flow.job.id;
  await waitFor('the parent to complete', async () => (await accounts.getJobState(parentId)) === 'completed');
  await childWorker.close();
  await parentWorker.close();
  await producer.close();
  // Another person's job, not selected by any path or pattern, stays byte for byte.
  const bystander = await signups.add('other', { user: { id: 'u2' }, note: 'nothing personal' });
  const client = redis.client(0);
  assert.equal((await client.hgetall(`bull:accounts:${parentId}:processed`))[`bull:signups:${welcome.id}`] !== undefined, true);
  assert.ok((await client.hget(`bull:accounts:${parentId}:failed`, `bull:signups:${bounce.id}`)).includes(EMAIL));
  await sleep(5);

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-anon-'));
  const policy = writePolicy([
    'version: 1',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    'pii:',
    '  paths: ["user.email", "items[*].card", "**.phone", "owner.email"]',
    '  patterns: [email, credit-card]',
    'policies:',
    '  - name: scrub',
    '    queueNamePattern: "*"',
    '    rules:',
    '      completed: { maxAge: 1ms, action: anonymize }',
    '      failed: { maxAge: 1ms, action: anonymize }',
    '',
  ].join('\n'));
  const args = ['--redis', redis.url(0), '--config', policy];
  const countsBefore = [await signups.getJobCounts(), await accounts.getJobCounts()];
  const bystanderBefore = await client.hgetall(`bull:signups:${bystander.id}`);

  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  const done = report.queues.flatMap((q) => Object.values(q.states)).reduce((n, s) => n + (s.done || 0), 0);
  assert.equal(done, 3, 'welcome, bounce and the parent are scrubbed');

  // BullMQ reads every scrubbed job.
  const w = await signups.getJob(welcome.id);
  assert.deepEqual(w.data, { user: { id: 'u1', email: R, phone: R }, items: [{ card: R, sku: 'a' }] });
  assert.deepEqual(w.returnvalue, { status: 'sent', user: { id: 'u1', email: R } });
  assert.equal(await w.getState(), 'completed');
  assert.deepEqual((await signups.getJobLogs(welcome.id)).logs, [`welcome mail to ${R}, card ${R}`, 'no personal data in this line']);
  const b = await signups.getJob(bounce.id);
  assert.equal(b.failedReason, `mailbox ${R} is full`);
  assert.ok(b.stacktrace.length > 0 && b.stacktrace.every((line) => !line.includes(EMAIL)), JSON.stringify(b.stacktrace));
  assert.ok(b.stacktrace[0].includes(`mailbox ${R} is full`), 'the stack trace keeps its shape');
  const p = await accounts.getJob(parentId);
  assert.deepEqual(p.data, { owner: { email: R, phone: R }, plan: 'pro' });
  assert.deepEqual(await p.getChildrenValues(), { [`bull:signups:${welcome.id}`]: { status: 'sent', user: { id: 'u1', email: R } } });
  assert.deepEqual(await p.getIgnoredChildrenFailures(), { [`bull:signups:${bounce.id}`]: `mailbox ${R} is full` });
  assert.deepEqual(await client.hgetall(`bull:signups:${bystander.id}`), bystanderBefore, 'a waiting job is not selected');
  assert.deepEqual([await signups.getJobCounts(), await accounts.getJobCounts()], countsBefore, 'anonymize keeps every job');

  // Nothing personal is left anywhere BullMQ keeps job data (events streams are not job data).
  const after1 = await dumpKeyspace(client);
  const text = JSON.stringify(after1);
  assert.ok(!text.includes('jane.doe'), 'no email left in the keyspace');
  // The whole number, not its first digits: a timestamp or a lock token may hold '4111'.
  assert.ok(!text.includes(CARD) && !text.includes(CARD.replace(/ /g, '')), 'no card number left in the keyspace');
  await assertConsistent(redis, 0, [{ prefix: 'bull', name: 'signups' }, { prefix: 'bull', name: 'accounts' }]);

  // Idempotent: a second run finds every job already scrubbed and changes nothing.
  const again = await bullsweep([...args, '--json', 'run']);
  assert.equal(again.code, 0, again.stderr);
  const states = JSON.parse(again.stdout).queues.flatMap((q) => Object.values(q.states));
  assert.equal(states.reduce((n, s) => n + (s.done || 0), 0), 0);
  assert.equal(states.reduce((n, s) => n + ((s.skipped && s.skipped.alreadyAnonymized) || 0), 0), 3);
  assert.deepEqual(await dumpKeyspace(client), after1);

  // Each scrub is in the audit trail under `anonymize`, and the trail verifies.
  const trail = fs.readFileSync(`${dir}/audit.jsonl`, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const ids = trail.filter((e) => e.action === 'anonymize').flatMap((e) => e.jobIds).sort();
  assert.deepEqual(ids, [welcome.id, bounce.id, parentId].sort());
  const verify = await bullsweep([...args, 'audit', 'verify']);
  assert.equal(verify.code, 0, verify.stderr);

  // A scrubbed failed job is still a valid job: retried, a worker completes it.
  failOnce = false;
  const retryWorker = new Worker('signups', async (job) => ({ seen: job.data.user.email }), { connection });
  await b.retry();
  await waitFor('the retried job to complete', async () => (await signups.getJobState(bounce.id)) === 'completed');
  assert.deepEqual((await signups.getJob(bounce.id)).returnvalue, { seen: R });
  await retryWorker.close();
  await signups.close();
  await accounts.close();
});
