// Issue 42, break 7, judged by real BullMQ (6.7 and 5.81): a worker fails jobs whose error
// names the customer's email; `action: notify` notices each failed job once however many
// runs there are, never with the email (the queue's `pii:` paths hide the value they find in
// the job's data, in its failedReason too); a job retried with `Job.retry()` that fails again,
// and every job retried by `Queue.retryJobs()` (bull-board's "Retry all") that fails again,
// is noticed again, once; `plan` sends nothing. A custom job id goes through the queue's
// `pii:` rules too, on the webhook and in the log, and the audit event names it as it is.
//
// Both BullMQ builds run here (BULLSWEEP_BULLMQ names one to run only that one).
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { startRedis, bullsweep, writePolicy, waitFor } = require('../lib/harness');

const VERSIONS = (process.env.BULLSWEEP_BULLMQ ? [process.env.BULLSWEEP_BULLMQ] : ['bullmq', 'bullmq5'])
  .map((pkg) => ({ pkg, mq: require(pkg), label: `BullMQ ${require(`${pkg}/package.json`).version}` }));

let redis;
let hook;
const opened = [];
const track = (x) => { opened.push(x); return x; };
before(async () => {
  redis = await startRedis();
  hook = await receiver();
});
after(async () => {
  await Promise.all(opened.map((x) => x.close(true).catch(() => {})));
  hook.server.close();
  redis.stop();
});

// A webhook that keeps every notice it is sent (before it answers, so that once a run has
// exited everything it sent is here).
async function receiver() {
  const notices = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      notices.push(body);
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, notices, url: `http://127.0.0.1:${server.address().port}/hook` };
}

// The notices sent since the last call: how many times each job was named, and the bodies.
function taken() {
  const bodies = hook.notices.splice(0);
  const named = {};
  for (const body of bodies) {
    const n = JSON.parse(body);
    assert.equal(n.count, n.jobs.length, 'a notice counts the jobs it names');
    for (const j of n.jobs) named[j.id] = (named[j.id] || 0) + 1;
  }
  return { named, bodies };
}

const once = (ids) => Object.fromEntries(ids.map((id) => [id, 1]));

for (const { mq, label } of VERSIONS) {
  test(`${label}: each failed job is noticed once, again once after a retry fails it again, never with the email`, async () => {
    const db = label.includes(' 5.') ? 2 : 1;
    const connection = redis.connection(db);
    const policy = writePolicy(['version: 1',
      `notify: { webhook: { url: "${hook.url}" } }`,
      'policies:',
      '  - name: mail',
      '    queueNamePattern: mail',
      '    rules: { failed: { maxAge: 1ms, action: notify } }',
      '    pii: { paths: [email] }', ''].join('\n'));
    const run = async (cmd = 'run') => {
      const out = await bullsweep(['--redis', redis.url(db), '--config', policy, '--json', cmd]);
      assert.equal(out.code, 0, out.stderr);
      return JSON.parse(out.stdout);
    };
    const queue = track(new mq.Queue('mail', { connection }));
    let failures = 0;
    const worker = track(new mq.Worker('mail', async (job) => {
      throw new Error(`mailbox of ${job.data.email} is full`);
    }, { connection }));
    worker.on('failed', () => { failures += 1; });
    const ids = ['order-1', 'order-2', 'order-3', 'order-4', 'order-5'];
    for (const [i, jobId] of ids.entries()) await queue.add('send', { email: `user${i}@example.com` }, { jobId });
    await waitFor('five failures', async () => failures === 5);

    const plan = await run('plan');
    assert.equal(plan.queues[0].states.failed.matched, 5);
    assert.deepEqual(taken().named, {}, 'plan sends nothing');

    const first = await run();
    assert.equal(first.queues[0].states.failed.done, 5, 'done counts the jobs noticed');
    const { named, bodies } = taken();
    assert.deepEqual(named, once(ids));
    for (const body of bodies) {
      assert.ok(!body.includes('@'), `no email leaves in a notice: ${body}`);
      for (const j of JSON.parse(body).jobs) assert.equal(j.failedReason, 'mailbox of [REDACTED] is full');
    }
    assert.equal((await run()).queues[0].states.failed.done, 0);
    assert.deepEqual(taken().named, {}, 'a second run notices nobody again');

    // Job.retry(): the job runs again and fails again; only it is noticed, once.
    await (await queue.getJob('order-2')).retry();
    await waitFor('order-2 to fail again', async () => failures === 6);
    await run();
    assert.deepEqual(taken().named, once(['order-2']));

    // Queue.retryJobs() (bull-board's "Retry all"): every job fails again; each noticed once.
    await queue.retryJobs({ state: 'failed' });
    await waitFor('every job to fail again', async () => failures === 11);
    await run();
    assert.deepEqual(taken().named, once(ids));
    await run();
    assert.deepEqual(taken().named, {}, 'and nobody twice');
    assert.equal(await queue.getFailedCount(), 5, 'notify deletes nothing');
    await worker.close();
    await queue.close();
  });
}

// Red team (issue 42, F6): custom job ids carried personal data into notices verbatim (the
// webhook's body and the log), while failedReason was scrubbed. An id reads as free text does
// for a viewer: the patterns and the values the paths find replaced where they stand, the
// rest kept; the notice's audit event names each job as it is, in the notice's order.
test('a notice shows each job id as the queue\'s pii rules let a viewer read it; its audit event names the ids as they are', async () => {
  const { mq } = VERSIONS[0];
  const db = 3;
  const connection = redis.connection(db);
  const trail = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-notify-')), 'audit.jsonl');
  const policy = writePolicy(['version: 1',
    `notify: { log: true, webhook: { url: "${hook.url}" } }`,
    `audit: { url: "file://${trail}" }`,
    'policies:',
    '  - name: signup',
    '    queueNamePattern: signup',
    '    rules: { failed: { maxAge: 1ms, action: notify } }',
    '    pii: { paths: ["user.name", "user.phone"], patterns: [email] }', ''].join('\n'));
  const queue = track(new mq.Queue('signup', { connection }));
  let failures = 0;
  const worker = track(new mq.Worker('signup', async (job) => {
    throw new Error(`duplicate account ${job.data.user.name} / ${job.data.user.email}`);
  }, { connection }));
  worker.on('failed', () => { failures += 1; });
  const user = { name: 'Zoë Müller', email: 'zoe@example.com', phone: '+1 555 0100' };
  const ids = ['welcome-zoe@example.com', 'welcome zoe@example.com', 'welcome-Zoë Müller', 'call +1 555 0100', 'welcome-42'];
  for (const jobId of ids) await queue.add('welcome', { user }, { jobId });
  await waitFor('five failures', async () => failures === 5);
  await worker.close();
  hook.notices.splice(0);

  const args = ['--redis', redis.url(db), '--config', policy];
  const out = await bullsweep([...args, '--json', 'run']);
  assert.equal(out.code, 0, out.stderr);
  const { bodies } = taken();
  assert.equal(bodies.length, 1, 'one notice');
  const logged = out.stderr.split('\n').filter((l) => l.startsWith('notify: '));
  assert.equal(logged.length, 1, out.stderr);
  for (const text of [...bodies, ...logged]) {
    for (const secret of ['zoe@', 'Zoë', 'Müller', '555 0100']) {
      assert.ok(!text.includes(secret) && !text.includes(JSON.stringify(secret).slice(1, -1)), `${secret} left in a notice: ${text}`);
    }
  }
  const notice = JSON.parse(bodies[0]);
  const shown = notice.jobs.map((j) => j.id);
  assert.deepEqual([...shown].sort(), ['[REDACTED]', 'call [REDACTED]', 'welcome-42', 'welcome-[REDACTED]', 'welcome [REDACTED]'].sort());
  assert.ok(notice.jobs.every((j) => j.failedReason === 'duplicate account [REDACTED] / [REDACTED]'), bodies[0]);
  // The audit event names the jobs as they are, in the notice's order: an operator tells
  // which job each line of the notice is.
  const audit = await bullsweep([...args, '--json', 'audit', 'query', '--action', 'notify']);
  assert.equal(audit.code, 0, audit.stderr);
  const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l)).flatMap((e) => e.events || [e]);
  assert.equal(events.length, 1, audit.stdout);
  assert.equal(events[0].executionId, notice.executionId);
  assert.deepEqual([...events[0].jobIds].sort(), [...ids].sort());
  assert.equal(events[0].jobIds.length, shown.length);
  assert.equal(shown[events[0].jobIds.indexOf('welcome-42')], 'welcome-42');
  assert.equal(shown[events[0].jobIds.indexOf('welcome-Zoë Müller')], 'welcome-[REDACTED]');
  assert.equal(shown[events[0].jobIds.indexOf('welcome zoe@example.com')], 'welcome [REDACTED]');
  await queue.close();
});
