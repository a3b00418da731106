// Issue 12, finding 4: a failed child under `action: archive` and `auditRequired` takes its
// parent along (BullMQ's Queue.clean semantics). The parent in the same queue is archived
// with its role before it goes, the parent in another queue is released to wait, and the
// audit event names both. With `protectWaitingParents`, the children stay and are counted.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker, FlowProducer } = require('../lib/bullmq');
const { startRedis, bullsweep, writePolicy, sleep } = require('../lib/harness');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

async function waitFor(check, what) {
  const deadline = Date.now() + 15000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// Two flows whose only child fails: parent `same` in the child's queue, parent `other` in
// another queue. Both parents wait in waiting-children, the children sit in `failed`.
async function buildFlows(db) {
  const connection = redis.connection(db);
  const flows = new FlowProducer({ connection });
  await flows.add({ name: 'same', queueName: 'render', data: { p: 1 }, children: [{ name: 'child', queueName: 'render', data: { c: 1 } }] });
  await flows.add({ name: 'other', queueName: 'reports', data: { p: 2 }, children: [{ name: 'child', queueName: 'render', data: { c: 2 } }] });
  await flows.close();
  const worker = new Worker('render', async (job) => {
    if (job.name === 'child') throw new Error('child failed');
    return 'ok';
  }, { connection });
  const render = new Queue('render', { connection });
  await waitFor(async () => (await render.getFailedCount()) === 2, 'two failed children');
  await worker.close();
  await render.close();
}

function config(dir, trail, extra) {
  return writePolicy(`version: 1
audit: { url: "file://${trail}" }
archive: { url: "file://${dir}" }
policies:
  - { name: flows, queueNamePattern: "*", rules: { failed: { maxAge: 1ms, action: archive } }, sla: { auditRequired: true }${extra} }
`);
}

test('a failed child takes its parents along: archived, named in the audit, released', async () => {
  await redis.client(0).flushall();
  await buildFlows(0);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-flows-'));
  const trail = path.join(tmp, 'audit.jsonl');
  const policy = config(path.join(tmp, 'archive'), trail, '');
  await sleep(5);
  const plan = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const planned = JSON.parse(plan.stdout).queues.find((q) => q.queue === 'render').states.failed;
  assert.deepEqual(planned.takenAlong, { parentsRemoved: 1, parentsReleased: 1 }, 'plan counts the parents a run takes along');
  const run = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);

  const render = new Queue('render', { connection: redis.connection(0) });
  const reports = new Queue('reports', { connection: redis.connection(0) });
  assert.equal(await render.getFailedCount(), 0);
  assert.equal(await render.getWaitingChildrenCount(), 0, 'the same-queue parent went with its child');
  const released = await reports.getWaiting();
  assert.deepEqual(released.map((j) => j.name), ['other'], 'the other-queue parent was released to wait');

  const events = fs.readFileSync(trail, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const archiveEvent = events.find((e) => e.action === 'archive' && e.state === 'failed');
  assert.ok(archiveEvent, 'the archive batch is audited');
  const roles = Object.fromEntries((archiveEvent.relatedJobs || []).map((r) => [r.key.split(':')[1], r.role]));
  assert.deepEqual(roles, { render: 'parentRemoved', reports: 'parentReleased' }, JSON.stringify(archiveEvent));

  const ls = await bullsweep(['--config', policy, '--json', 'archive', 'ls']);
  const records = [];
  for (const m of ls.stdout.trim().split('\n').map((l) => JSON.parse(l))) {
    records.push(...(await bullsweep(['--config', policy, 'archive', 'cat', m.segment])).stdout.trim().split('\n').map((l) => JSON.parse(l)));
  }
  const parent = records.find((r) => r.role === 'parentRemoved');
  assert.ok(parent, 'the removed parent has an archived copy');
  assert.equal(parent.state, 'waiting-children');
  assert.deepEqual(parent.fields.data, { p: 1 });
  assert.equal(records.filter((r) => !r.role).length, 2, 'both children are archived');
  const verify = await bullsweep(['--redis', redis.url(0), '--config', policy, 'audit', 'verify']);
  assert.equal(verify.code, 0, verify.stderr + verify.stdout);
  await render.close();
  await reports.close();
});

test('protectWaitingParents leaves children whose parent waits, counted as parentWaiting', async () => {
  await redis.client(0).flushall();
  await buildFlows(0);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-flows-'));
  const policy = config(path.join(tmp, 'archive'), path.join(tmp, 'audit.jsonl'), ', protectWaitingParents: true');
  await sleep(5);
  const plan = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const planned = JSON.parse(plan.stdout).queues.find((q) => q.queue === 'render').states.failed;
  assert.deepEqual(planned.takenAlong, { parentsRemoved: 0, parentsReleased: 0, parentWaiting: 2 });
  const run = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  const failed = report.queues.find((q) => q.queue === 'render').states.failed;
  assert.equal(failed.done, 0);
  assert.equal(failed.skipped.parentWaiting, 2, JSON.stringify(failed));
  const render = new Queue('render', { connection: redis.connection(0) });
  const reports = new Queue('reports', { connection: redis.connection(0) });
  assert.equal(await render.getFailedCount(), 2, 'the children stay');
  assert.equal(await render.getWaitingChildrenCount(), 1);
  assert.equal(await reports.getWaitingChildrenCount(), 1, 'no parent was released');
  await render.close();
  await reports.close();
});

// Issue 24, finding 19: what a sweep does to flow parents is shown, not only audited. `plan`
// says which parents a run would take along and suggests protectWaitingParents; `run` reports
// the parents it removed and released, in its table and in --json.
test('plan and run show the flow parents taken along, and plan suggests protectWaitingParents', async () => {
  await redis.client(0).flushall();
  await buildFlows(0);
  const policy = writePolicy(`version: 1
policies:
  - { name: flows, queueNamePattern: "*", rules: { failed: { maxAge: 1ms } } }
`);
  await sleep(5);
  const plan = await bullsweep(['--redis', redis.url(0), '--config', policy, 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  assert.match(plan.stdout, /bull:render failed: would take along 2 flow parents: 1 removed \(same queue\), 1 released to wait \(other queues\)/, plan.stdout);
  assert.match(plan.stdout, /hint: a run would release flow parents .*protectWaitingParents: true in policy `flows`/, plan.stdout);
  assert.match(plan.stdout, /flow parents it would take along: 1 removed, 1 released; nothing was changed\.$/m, plan.stdout);

  const run = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const failed = JSON.parse(run.stdout).queues.find((q) => q.queue === 'render').states.failed;
  assert.equal(failed.done, 2, run.stdout);
  assert.deepEqual(failed.takenAlong, { parentsRemoved: 1, parentsReleased: 1 }, run.stdout);
  // BullMQ agrees: the same-queue parent is gone, the other-queue parent waits.
  const render = new Queue('render', { connection: redis.connection(0) });
  const reports = new Queue('reports', { connection: redis.connection(0) });
  assert.equal(await render.getWaitingChildrenCount(), 0);
  assert.deepEqual((await reports.getWaiting()).map((j) => j.name), ['other']);
  await render.close();
  await reports.close();

  await redis.client(0).flushall();
  await buildFlows(0);
  await sleep(5);
  const text = await bullsweep(['--redis', redis.url(0), '--config', policy, 'run']);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /bull:render failed: took along 2 flow parents: 1 removed \(same queue\), 1 released to wait \(other queues\)/, text.stdout);
  assert.match(text.stdout, /^Run: acted on 2 jobs \(remove 2\) in 2 queues; flow parents taken along: 1 removed, 1 released\.$/m, text.stdout);
});
