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
const { startRedis, bullsweep, writePolicy, sleep, dumpKeyspace, copyDatabase } = require('../lib/harness');

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
  assert.deepEqual(planned.takenAlong, {
    parentsRemoved: 1, parentsReleased: 1,
    queues: { 'bull:render': { 'waiting-children': { parentRemoved: 1 } }, 'bull:reports': { 'waiting-children': { parentReleased: 1 } } },
  }, 'plan counts the parents a run takes along, by the queue and state each is in');
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
  assert.match(plan.stdout, /bull:render failed: would take along 2 flow jobs: 1 parent removed, 1 parent released to wait/, plan.stdout);
  assert.match(plan.stdout, /bull:render +failed +bull:reports +waiting-children +0 +1 +0/, 'where each parent is, in the table');
  assert.match(plan.stdout, /hint: a run would release flow parents .*protectWaitingParents: true in policy `flows`/, plan.stdout);
  assert.match(plan.stdout, /flow jobs it would take along: 1 parent removed, 1 parent released to wait; nothing was changed\.$/m, plan.stdout);

  const run = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const failed = JSON.parse(run.stdout).queues.find((q) => q.queue === 'render').states.failed;
  assert.equal(failed.done, 2, run.stdout);
  assert.deepEqual(failed.takenAlong, {
    parentsRemoved: 1, parentsReleased: 1,
    queues: { 'bull:render': { 'waiting-children': { parentRemoved: 1 } }, 'bull:reports': { 'waiting-children': { parentReleased: 1 } } },
  }, run.stdout);
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
  assert.match(text.stdout, /bull:render failed: took along 2 flow jobs: 1 parent removed, 1 parent released to wait/, text.stdout);
  assert.match(text.stdout, /^Run: acted on 2 jobs \(remove 2\) in 2 queues; flow jobs taken along: 1 parent removed, 1 parent released to wait\.$/m, text.stdout);
});

// --- Issue 42, breaks 8 and 9: plan and run agree on every job a run removes, per queue and
// state, taken-along jobs included; a queue the plan leaves alone is left alone; a removed
// parent is recorded as removed, never as released.

const { rawDump } = require('../lib/snapshot');
const { assertConsistent } = require('../lib/consistency');

const { membership, removedPer, reportedRemovals, summaryOf } = require('../lib/removals');

const MINUTE = 60000;
const DAY = 24 * 60 * MINUTE;

// Ten exports, each waiting for six parts in another queue: two completed, two failed, two
// delayed a day. The exports are older than a minute.
async function buildExports(db) {
  const connection = redis.connection(db);
  const flows = new FlowProducer({ connection });
  const old = Date.now() - 2 * MINUTE;
  for (let i = 0; i < 10; i++) {
    const part = (name, opts = {}) => ({ name, queueName: 'export-parts', data: { i, name }, opts });
    await flows.add({
      name: 'export', queueName: 'exports', data: { i }, opts: { timestamp: old },
      children: [part('ok'), part('ok'), part('bad'), part('bad'), part('later', { delay: DAY }), part('later', { delay: DAY })],
    });
  }
  await flows.close();
  const parts = new Queue('export-parts', { connection });
  const worker = new Worker('export-parts', async (job) => {
    if (job.name === 'bad') throw new Error('part failed');
    return 'ok';
  }, { connection });
  await waitFor(async () => {
    const c = await parts.getJobCounts('completed', 'failed');
    return c.completed === 20 && c.failed === 20;
  }, 'twenty completed and twenty failed parts');
  await worker.close();
  await parts.close();
}

function exportsPolicy(trail, extra) {
  return writePolicy(`version: 1
audit: { url: "file://${trail}" }
policies:
  - { name: exports, queueNamePattern: exports, rules: { waiting-children: { maxAge: 1m } }${extra} }
`);
}

// Every key of a database under one queue base, streams included, as rawDump shows them.
async function dumpOf(db, base) {
  const all = await rawDump(redis.client(db));
  return Object.fromEntries(Object.entries(all).filter(([k]) => k.startsWith(`${base}:`)));
}

test('a removal reaches no queue the plan leaves alone: parents with children elsewhere stay, by default (issue 42, break 8)', async () => {
  await redis.client(0).flushall();
  await buildExports(0);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-flows-'));
  const policy = exportsPolicy(path.join(tmp, 'audit.jsonl'), '');
  const args = ['--redis', redis.url(0), '--config', policy];
  const plan = await bullsweep([...args, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const planned = JSON.parse(plan.stdout);
  const text = await bullsweep([...args, 'plan']);

  const bases = ['bull:exports', 'bull:export-parts'];
  const before = await membership(redis.client(0), bases);
  const parts = await dumpOf(0, 'bull:export-parts');
  const exportsBefore = await dumpOf(0, 'bull:exports');
  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  // Judged first by the keyspace: the uncovered queue, which plan calls left alone, is
  // byte-identical, and what the run removed per queue and state is what plan counted.
  assert.ok(planned.uncovered.includes('bull:export-parts'), plan.stdout);
  assert.deepEqual(await dumpOf(0, 'bull:export-parts'), parts, 'the queue the plan leaves alone is byte-identical');
  const removed = removedPer(before, await membership(redis.client(0), bases));
  assert.deepEqual(removed, reportedRemovals(planned, 'matched'), 'the run removed what the plan counted, per queue and state');
  assert.deepEqual(removed, {}, 'the parents stay with their children');
  assert.deepEqual(await dumpOf(0, 'bull:exports'), exportsBefore);

  const wc = planned.queues.find((q) => q.queue === 'exports').states['waiting-children'];
  assert.equal(wc.matched, 10, plan.stdout);
  assert.equal(wc.skipped && wc.skipped.childrenElsewhere, 10, `plan says the ten parents stay: ${plan.stdout}`);
  assert.equal(wc.takenAlong, undefined, plan.stdout);
  assert.match(text.stdout, /uncovered \(no policy, left alone\): bull:export-parts/, text.stdout);
  assert.match(text.stdout, /will skip 10 have flow children in another queue/, text.stdout);
  assert.match(text.stdout, /hint: .*childrenInOtherQueues: remove in policy `exports`/, text.stdout);
  const done = JSON.parse(run.stdout).queues.find((q) => q.queue === 'exports').states['waiting-children'];
  assert.equal(done.done, 0, run.stdout);
  assert.equal(done.skipped.childrenElsewhere, 10, run.stdout);
});

test('childrenInOtherQueues: remove takes the children, and plan counts them per queue and state as the run removes them (issue 42, breaks 8 and 9)', async () => {
  await redis.client(0).flushall();
  await buildExports(0);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-flows-'));
  const trail = path.join(tmp, 'audit.jsonl');
  const policy = exportsPolicy(trail, ', childrenInOtherQueues: remove');
  const args = ['--redis', redis.url(0), '--config', policy];
  const plan = await bullsweep([...args, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const planned = JSON.parse(plan.stdout);
  const wc = planned.queues.find((q) => q.queue === 'exports').states['waiting-children'];
  assert.deepEqual(wc.takenAlong.queues, {
    'bull:export-parts': { completed: { childRemoved: 20 }, failed: { childRemoved: 20 }, delayed: { childRemoved: 20 } },
  }, plan.stdout);
  assert.equal(wc.takenAlong.childrenRemoved, 60);
  const text = await bullsweep([...args, 'plan']);
  assert.match(text.stdout, /would take along 60 flow jobs: 60 children removed/, text.stdout);
  assert.match(text.stdout, /uncovered \(no policy\), reached by flows of governed queues: bull:export-parts \(a run would take along: 60 children removed\)/, text.stdout);
  assert.doesNotMatch(text.stdout, /left alone\): bull:export-parts/, text.stdout);
  assert.match(text.stdout, /flow jobs a run would take along, by where they are:/, text.stdout);

  const bases = ['bull:exports', 'bull:export-parts'];
  const before = await membership(redis.client(0), bases);
  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  const removed = removedPer(before, await membership(redis.client(0), bases));
  assert.deepEqual(removed, {
    'bull:exports waiting-children': 10,
    'bull:export-parts completed': 20, 'bull:export-parts failed': 20, 'bull:export-parts delayed': 20,
  });
  assert.deepEqual(reportedRemovals(planned, 'matched'), removed, 'the plan counts what the run removes, per queue and state');
  assert.deepEqual(reportedRemovals(report, 'done'), removed, 'the run reports what it removed, per queue and state');
  const ran = report.queues.find((q) => q.queue === 'exports').states['waiting-children'];
  assert.deepEqual(ran.takenAlong, wc.takenAlong, 'the run took along what the plan said');
  const exportsQ = new Queue('exports', { connection: redis.connection(0) });
  assert.equal(await exportsQ.getWaitingChildrenCount(), 0);
  assert.equal(await exportsQ.getWaitingCount(), 0, 'no removed parent is left in wait');
  await exportsQ.close();
  await assertConsistent(redis, 0, [{ prefix: 'bull', name: 'exports' }, { prefix: 'bull', name: 'export-parts' }]);

  // The audit event names the removed parents by id and each child with its role and state;
  // no removed parent is called released.
  const events = fs.readFileSync(trail, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const related = events.flatMap((e) => e.relatedJobs || []);
  assert.deepEqual(events.flatMap((e) => e.jobIds).length, 10);
  assert.equal(related.filter((r) => r.role === 'parentReleased').length, 0, JSON.stringify(related.slice(0, 3)));
  const byState = {};
  for (const r of related) {
    assert.equal(r.role, 'childRemoved');
    assert.match(r.key, /^bull:export-parts:/);
    byState[r.state] = (byState[r.state] || 0) + 1;
  }
  assert.deepEqual(byState, { completed: 20, failed: 20, delayed: 20 });
});

test('a parent removed by forget or with its children is recorded as removed; one whose last child went, as released (issue 42, break 9)', async () => {
  await redis.client(0).flushall();
  const connection = redis.connection(0);
  const flows = new FlowProducer({ connection });
  const old = Date.now() - 2 * MINUTE;
  // P: an old parent waiting for its child in the same queue (expires with it).
  const p = await flows.add({ name: 'p', queueName: 'jobs', data: { user: { id: 'u1' } }, opts: { timestamp: old },
    children: [{ name: 'c', queueName: 'jobs', data: {}, opts: { timestamp: Date.now(), delay: DAY } }] });
  // R: a young parent waiting for its old child, which expires alone: R is released to wait.
  const r = await flows.add({ name: 'r', queueName: 'jobs', data: {}, opts: { timestamp: Date.now() },
    children: [{ name: 'rc', queueName: 'jobs', data: {}, opts: { timestamp: old } }] });
  // F: a parent forget erases, with a child that is not the subject's.
  const f = await flows.add({ name: 'f', queueName: 'jobs', data: { user: { id: 'u9' } },
    children: [{ name: 'fc', queueName: 'jobs', data: {}, opts: { delay: DAY } }] });
  await flows.close();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-flows-'));
  const trail = path.join(tmp, 'audit.jsonl');
  const policy = writePolicy(`version: 1
audit: { url: "file://${trail}" }
subjects: [{ name: user, paths: [user.id] }]
policies:
  - { name: jobs, queueNamePattern: jobs, rules: { waiting-children: { maxAge: 1m }, waiting: { maxAge: 1m } } }
`);
  const args = ['--redis', redis.url(0), '--config', policy];
  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const forget = await bullsweep([...args, '--json', 'forget', '--subject', 'user=u9', '--request-id', 'F-1']);
  assert.equal(forget.code, 0, forget.stderr + forget.stdout);
  const jobs = new Queue('jobs', { connection });
  assert.equal(await jobs.getJob(p.job.id), undefined, 'P expired');
  assert.equal(await jobs.getJob(f.job.id), undefined, 'F was erased');
  assert.equal(await jobs.getJobState(r.job.id), 'waiting', 'R was released to wait');
  await jobs.close();

  const events = fs.readFileSync(trail, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const roles = {};
  for (const rel of events.flatMap((e) => e.relatedJobs || [])) roles[rel.key.split(':').pop()] = rel.role;
  assert.deepEqual(roles, {
    [p.children[0].job.id]: 'childRemoved',
    [r.job.id]: 'parentReleased',
    [f.children[0].job.id]: 'childRemoved',
  }, JSON.stringify(events.map((e) => ({ action: e.action, jobIds: e.jobIds, relatedJobs: e.relatedJobs }))));
});

// --- Issue 42, break 10: a queue bullsweep swept is healthy to doctor. Removing a finished
// parent leaves its finished children naming a parent that is gone, as BullMQ's own
// Queue.clean does; doctor counts a child still to run whose parent is gone, never those.

const { runDoctor, findingsOf } = require('../lib/doctor_cli');

test('after a sweep removes finished flow parents doctor finds nothing, as after BullMQ\'s own clean (issue 42, break 10)', async () => {
  for (const db of [0, 1]) await redis.client(db).flushdb();
  const connection = redis.connection(0);
  const flows = new FlowProducer({ connection });
  for (let i = 0; i < 40; i++) {
    await flows.add({ name: 'report', queueName: 'reports', data: { i }, children: [
      { name: 'part', queueName: 'report-parts', data: { i, n: 1 } },
      { name: 'part', queueName: 'report-parts', data: { i, n: 2 } },
    ] });
  }
  await flows.close();
  const reports = new Queue('reports', { connection });
  const parts = new Queue('report-parts', { connection });
  const workers = ['reports', 'report-parts'].map((name) => new Worker(name, async () => 'ok', { connection }));
  await waitFor(async () => (await reports.getCompletedCount()) === 40 && (await parts.getCompletedCount()) === 80, 'every report and part to complete');
  await Promise.all(workers.map((w) => w.close()));
  await reports.close();
  await parts.close();
  await copyDatabase(redis.client(0), 0, 1);

  // Database 0: bullsweep's routine sweep; database 1: BullMQ's own removal of the same jobs.
  const policy = writePolicy(`version: 1
policies:
  - { name: reports, queueNamePattern: reports, rules: { completed: { maxCount: 20 } } }
`);
  const run = await bullsweep(['--redis', redis.url(0), '--config', policy, 'run']);
  assert.equal(run.code, 0, run.stderr);
  const twin = new Queue('reports', { connection: redis.connection(1) });
  assert.equal((await twin.clean(0, 20, 'completed')).length, 20);
  await twin.close();
  assert.deepEqual(await dumpKeyspace(redis.client(0)), await dumpKeyspace(redis.client(1)), 'the sweep leaves what Queue.clean leaves');
  assert.equal(await redis.client(0).zcard('bull:report-parts:completed'), 80, 'the parts of the removed reports stay, as with Queue.clean');

  for (const db of [0, 1]) {
    const d = await runDoctor(redis, db);
    assert.equal(d.code, 0, `doctor on database ${db} (${db ? 'BullMQ\'s clean' : 'bullsweep\'s sweep'}): ${d.stdout}${d.stderr}`);
    assert.equal(findingsOf(d.report, 'orphanChildren').found, 0, d.stdout);
  }

  // A child still to run whose parent is gone is damage, and still found.
  const c = redis.client(0);
  await c.hset('bull:report-parts:live', { name: 'part', data: '{}', opts: '{}', timestamp: String(Date.now()), parentKey: 'bull:reports:gone', parent: '{"id":"gone","queueKey":"bull:reports"}' });
  await c.rpush('bull:report-parts:wait', 'live');
  const damaged = await runDoctor(redis, 0);
  assert.equal(damaged.code, 1, damaged.stdout);
  assert.deepEqual(findingsOf(damaged.report, 'orphanChildren').samples, ['bull:report-parts:live'], damaged.stdout);
});

test('a finished parent whose child was retried waits for it: no sweep, ttl, archive or moveExhaustedTo takes it, and doctor finds nothing (issue 42, break 10)', async () => {
  const c = redis.client(0);
  await c.flushdb();
  const connection = redis.connection(0);
  const flows = new FlowProducer({ connection });
  const trees = [];
  for (let i = 0; i < 3; i++) {
    trees.push(await flows.add({ name: 'bill', queueName: 'billing', data: { i }, children: [{ name: 'line', queueName: 'billing', data: { i } }] }));
  }
  await flows.close();
  const billing = new Queue('billing', { connection });
  let worker = new Worker('billing', async () => 'ok', { connection });
  await waitFor(async () => (await billing.getCompletedCount()) === 6, 'every bill and line to complete');
  await worker.close();
  // A ttl run gives every finished job an expiry; then someone retries each child after its
  // parent completed (bull-board's Retry on a completed job): BullMQ puts the child back in
  // its parent's :dependencies, and the parent's expiry must end before Redis acts on it.
  const ttlFirst = await bullsweep(['--redis', redis.url(0), '--config', writePolicy(`version: 1
policies:
  - { name: billing, queueNamePattern: billing, rules: { completed: { ttl: 1h } } }
`), 'run']);
  assert.equal(ttlFirst.code, 0, ttlFirst.stderr);
  for (const t of trees) assert.ok(await c.pttl(`bull:billing:${t.job.id}`) > 0);
  for (const t of trees) await (await billing.getJob(t.children[0].job.id)).retry('completed');
  for (const t of trees) assert.equal(await c.scard(`bull:billing:${t.job.id}:dependencies`), 1);
  const parents = trees.map((t) => t.job.id);

  // A prefix sweep, a job-rule (by id) sweep, a ttl and an archive: each holds the parents.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-retried-child-'));
  const rules = [
    '{ completed: { maxAge: 1ms } }',
    '{ completed: { maxAge: 1ms } }, jobs: [{ name: bill, completed: { maxAge: 1ms } }]',
    '{ completed: { maxAge: 1ms, ttl: 1s } }',
    `{ completed: { maxAge: 1ms, action: archive } }`,
  ];
  for (const rule of rules) {
    const policy = writePolicy(`version: 1
archive: { url: "file://${dir}" }
policies:
  - { name: billing, queueNamePattern: billing, rules: ${rule} }
`);
    const run = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'run']);
    assert.equal(run.code, 0, `${rule}: ${run.stderr}`);
    const state = JSON.parse(run.stdout).queues[0].states;
    for (const s of Object.values(state).filter((x) => x.matched > 0)) assert.equal((s.skipped || {}).parentWaiting, 3, `${rule}: ${run.stdout}`);
    for (const id of parents) {
      assert.equal(await c.zscore('bull:billing:completed', id) !== null, true, `${rule}: parent ${id} stays completed`);
      assert.equal(await c.pttl(`bull:billing:${id}`), -1, `${rule}: parent ${id} has no expiry`);
    }
    const d = await runDoctor(redis, 0);
    assert.equal(d.code, 0, `${rule}: ${d.stdout}${d.stderr}`);
  }

  // A parent that failed after its child completed, the child retried since: moveExhaustedTo
  // leaves the parent where it is while the child is still to run.
  const flows2 = new FlowProducer({ connection });
  const failing = await flows2.add({ name: 'refund', queueName: 'refunds', data: {}, children: [{ name: 'line', queueName: 'refunds', data: {} }] });
  await flows2.close();
  const refunds = new Queue('refunds', { connection });
  worker = new Worker('refunds', async (job) => { if (job.name === 'refund') throw new Error('declined'); return 'ok'; }, { connection });
  await waitFor(async () => (await refunds.getFailedCount()) === 1 && (await refunds.getCompletedCount()) === 1, 'the refund to fail');
  await worker.close();
  await (await refunds.getJob(failing.children[0].job.id)).retry('completed');
  const dlq = await bullsweep(['--redis', redis.url(0), '--config', writePolicy(`version: 1
policies:
  - { name: refunds, queueNamePattern: refunds, moveExhaustedTo: refunds-dead, rules: { failed: { maxAge: 30d } } }
`), '--json', 'run']);
  assert.equal(dlq.code, 0, dlq.stderr);
  assert.equal(await c.zscore('bull:refunds:failed', failing.job.id) !== null, true, dlq.stdout);
  assert.equal(await c.exists('bull:refunds-dead:1'), 0, dlq.stdout);
  assert.equal((await runDoctor(redis, 0)).code, 0);
  await refunds.close();

  // The children run; then the parents go like any finished job.
  worker = new Worker('billing', async () => 'again', { connection });
  await waitFor(async () => (await billing.getWaitingCount()) === 0 && (await billing.getActiveCount()) === 0, 'the retried children to run');
  await worker.close();
  const policy = writePolicy(`version: 1
policies:
  - { name: billing, queueNamePattern: billing, rules: { completed: { maxAge: 1ms } } }
`);
  const run = await bullsweep(['--redis', redis.url(0), '--config', policy, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  for (const id of parents) assert.equal(await c.exists(`bull:billing:${id}`), 0, run.stdout);
  assert.equal(await billing.getCompletedCount(), 0, run.stdout);
  const d = await runDoctor(redis, 0);
  assert.equal(d.code, 0, d.stdout);
  await billing.close();
});

test('forget leaves a parent whose retried child a worker holds, whichever of the parent\'s sets names the child', async () => {
  const c = redis.client(0);
  await c.flushdb();
  const connection = redis.connection(0);
  const flows = new FlowProducer({ connection });
  const tree = await flows.add({ name: 'bill', queueName: 'ledger', data: { user: 'ada' }, children: [
    { name: 'line', queueName: 'ledger', data: { n: 1 }, opts: { ignoreDependencyOnFailure: true } },
  ] });
  await flows.close();
  const ledger = new Queue('ledger', { connection });
  let fail = true;
  let release;
  const held = new Promise((r) => { release = r; });
  let started;
  const running = new Promise((r) => { started = r; });
  const errors = [];
  const worker = new Worker('ledger', async (job) => {
    if (job.name !== 'line') return 'ok';
    if (fail) throw new Error('first attempt fails');
    started();
    await held;
    return 'done';
  }, { connection });
  worker.on('error', (e) => errors.push(e.message));
  worker.on('failed', (job, e) => { if (!/first attempt/.test(e.message)) errors.push(e.message); });
  await waitFor(async () => (await ledger.getCompletedCount()) === 1 && (await ledger.getFailedCount()) === 1, 'the parent to complete and its child to fail');
  // "Retry all" of failed jobs: the child runs again, held by the worker.
  fail = false;
  await ledger.retryJobs({ state: 'failed' });
  await running;
  const file = writePolicy(`version: 1
subjects: [{ name: user, paths: [user] }]
policies:
  - { name: ledger, queueNamePattern: ledger, rules: { completed: { maxAge: 30d } } }
`);
  const r = await bullsweep(['--redis', redis.url(0), '--config', file, 'forget', '--subject', 'user=ada', '--request-id', 'R-7', '--wait-active', '1s']);
  assert.equal(r.code, 1, `${r.stdout}${r.stderr}`);
  assert.equal(JSON.parse(r.stdout).status, 'pending', r.stdout);
  assert.equal(await c.exists(`bull:ledger:${tree.children[0].job.id}`), 1, 'the child a worker holds keeps its hash');
  release();
  await waitFor(async () => (await ledger.getCompletedCount()) === 2, 'the child to complete');
  await worker.close();
  assert.deepEqual(errors, []);
  await ledger.close();
});

test('a parent a run released is left in wait by that run, as its plan says (issue 42, invariant 104)', async () => {
  await redis.client(0).flushall();
  const connection = redis.connection(0);
  const flows = new FlowProducer({ connection });
  const old = Date.now() - 2 * MINUTE;
  // Old parents waiting in one queue, each for one old child waiting in another.
  const added = [];
  for (let i = 0; i < 5; i++) {
    added.push(await flows.add({ name: 'parent', queueName: 'b-parents', data: { i }, opts: { timestamp: old },
      children: [{ name: 'kid', queueName: 'a-kids', data: { i }, opts: { timestamp: old } }] }));
  }
  await flows.close();
  const policy = writePolicy(`version: 1
policies:
  - { name: all, queueNamePattern: "*", rules: { waiting: { maxAge: 1m } } }
`);
  const args = ['--redis', redis.url(0), '--config', policy];
  const plan = await bullsweep([...args, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const bases = ['bull:a-kids', 'bull:b-parents'];
  const before = await membership(redis.client(0), bases);
  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const removed = removedPer(before, await membership(redis.client(0), bases));
  assert.deepEqual(removed, { 'bull:a-kids waiting': 5 }, 'the kids went; their parents were released, not removed');
  assert.deepEqual(reportedRemovals(JSON.parse(plan.stdout), 'matched'), removed, plan.stdout);
  assert.deepEqual(reportedRemovals(JSON.parse(run.stdout), 'done'), removed, run.stdout);
  const parents = new Queue('b-parents', { connection });
  for (const f of added) assert.equal(await parents.getJobState(f.job.id), 'waiting');
  await parents.close();
  // The next run, planned from the state this one left, takes them.
  const next = await bullsweep([...args, '--json', 'plan']);
  assert.equal(JSON.parse(next.stdout).queues.find((q) => q.queue === 'b-parents').states.waiting.matched, 5);
});

test('a job one step of a run takes along is counted there, and not again by a later step (issue 42, invariant 104)', async () => {
  await redis.client(0).flushall();
  await buildFlows(0);
  const connection = redis.connection(0);
  // Two more old parents in `render`, each waiting for a child that sits old in its `wait`.
  const flows = new FlowProducer({ connection });
  const old = Date.now() - 2 * MINUTE;
  for (let i = 0; i < 2; i++) {
    await flows.add({ name: 'later', queueName: 'render', data: { i }, opts: { timestamp: old },
      children: [{ name: 'todo', queueName: 'render', data: { i }, opts: { timestamp: old } }] });
  }
  await flows.close();
  // The failed pass removes `same` with its child (Queue.clean); the waiting-children rule
  // selects it too, and the older parents, whose waiting children go with them before the
  // waiting rule comes to them.
  const policy = writePolicy(`version: 1
policies:
  - { name: all, queueNamePattern: "*", rules: { failed: { maxAge: 1ms }, waiting-children: { maxAge: 1ms }, waiting: { maxAge: 1m } }, childrenInOtherQueues: remove }
`);
  await sleep(5);
  const args = ['--redis', redis.url(0), '--config', policy];
  const plan = await bullsweep([...args, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const bases = ['bull:render', 'bull:reports'];
  const before = await membership(redis.client(0), bases);
  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const removed = removedPer(before, await membership(redis.client(0), bases));
  assert.deepEqual(removed, { 'bull:render failed': 2, 'bull:render waiting-children': 3, 'bull:render waiting': 2 });
  assert.deepEqual(reportedRemovals(JSON.parse(plan.stdout), 'matched'), removed, plan.stdout);
  assert.deepEqual(reportedRemovals(JSON.parse(run.stdout), 'done'), removed, run.stdout);
  await assertConsistent(redis, 0, bases.map((b) => ({ prefix: 'bull', name: b.split(':')[1] })));
});

// --- Issue 42, follow-up (invariant 117): plan's summary, its table and its JSON count what
// the run will do, less every job the plan itself says a run will skip.

test('plan\'s summary, table and toActOn leave out the jobs it says a run will skip, and equal what the run does (issue 42, invariant 117)', async () => {
  await redis.client(0).flushall();
  // Ten exports whose parts sit in another queue (left alone: childrenInOtherQueues'
  // default), and four whose one part sits in `exports` itself (removed with it).
  await buildExports(0);
  const connection = redis.connection(0);
  const flows = new FlowProducer({ connection });
  const old = Date.now() - 2 * MINUTE;
  for (let i = 0; i < 4; i++) {
    await flows.add({ name: 'export', queueName: 'exports', data: { own: i }, opts: { timestamp: old }, children: [{ name: 'part', queueName: 'exports', data: { i } }] });
  }
  await flows.close();
  const policy = exportsPolicy(path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-flows-')), 'audit.jsonl'), '');
  const args = ['--redis', redis.url(0), '--config', policy];
  const planned = JSON.parse((await bullsweep([...args, '--json', 'plan'])).stdout);
  const text = await bullsweep([...args, 'plan']);
  assert.equal(text.code, 0, text.stderr);
  const bases = ['bull:exports', 'bull:export-parts'];
  const before = await membership(redis.client(0), bases);
  const ran = await bullsweep([...args, 'run']);
  assert.equal(ran.code, 0, ran.stderr);
  const removed = removedPer(before, await membership(redis.client(0), bases));
  // Judged by the keyspace: the four parents and their parts went; the ten stay.
  assert.deepEqual(removed, { 'bull:exports waiting-children': 4, 'bull:exports waiting': 4 });
  // The summary lines agree, by action, with each other and with the keyspace.
  assert.match(text.stdout, /will skip 10 have flow children in another queue/, text.stdout);
  assert.deepEqual(summaryOf(ran.stdout), { total: 4, by: { remove: 4 } }, ran.stdout);
  assert.deepEqual(summaryOf(text.stdout), summaryOf(ran.stdout), `the plan's summary is the run's: ${text.stdout}`);
  assert.deepEqual(reportedRemovals(planned, 'toActOn'), removed, `toActOn is what the run removes: ${JSON.stringify(planned)}`);
  const wc = planned.queues.find((q) => q.queue === 'exports').states['waiting-children'];
  assert.deepEqual([wc.matched, wc.toActOn, wc.skipped.childrenElsewhere], [14, 4, 10]);
  // The table has the run's columns: what the run will act on and what it will skip.
  assert.match(text.stdout, /│ queue +tenant +env +policy +state +jobs +matched +action +to act on +will skip +│/, text.stdout);
  assert.match(text.stdout, /bull:exports +- +- +exports +waiting-children +14 +14 +remove +4 +10 +│/, text.stdout);

  // protectWaitingParents: the children whose parent waits are a skip the plan knows.
  await redis.client(0).flushall();
  await buildFlows(0);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-flows-'));
  const protect = config(path.join(tmp, 'archive'), path.join(tmp, 'audit.jsonl'), ', protectWaitingParents: true');
  const pArgs = ['--redis', redis.url(0), '--config', protect];
  await sleep(5);
  const pJson = JSON.parse((await bullsweep([...pArgs, '--json', 'plan'])).stdout);
  const pText = await bullsweep([...pArgs, 'plan']);
  const failed = pJson.queues.find((q) => q.queue === 'render').states.failed;
  const detailed = await bullsweep([...pArgs, 'plan', '--detailed-exitcode']);
  const pRun = await bullsweep([...pArgs, 'run']);
  assert.equal(pRun.code, 0, pRun.stderr);
  assert.deepEqual(summaryOf(pRun.stdout), { total: 0, by: {} }, pRun.stdout);
  assert.deepEqual(summaryOf(pText.stdout), summaryOf(pRun.stdout), `the plan's summary is the run's: ${pText.stdout}`);
  assert.equal(detailed.code, 0, 'nothing is pending');
  assert.deepEqual([failed.matched, failed.toActOn, failed.skipped && failed.skipped.parentWaiting], [2, 0, 2], JSON.stringify(failed));
  const render = new Queue('render', { connection: redis.connection(0) });
  assert.equal(await render.getFailedCount(), 2, 'the children stay');
  await render.close();
});

test('a source link\'s removal of parents with children elsewhere is planned as the run does it: left alone by default, taken with them when asked (issue 42, invariant 117)', async () => {
  const linked = (extra) => writePolicy(`version: 1
sources:
  orders: { redis: { url: "${redis.url(2)}", key: "order:{key}" } }
policies:
  - { name: exports, queueNamePattern: exports, source: { name: orders, key: data.i }, deleteWhen: sourceDeleted, keepFor: 1ms${extra} }
`);
  const bases = ['bull:exports', 'bull:export-parts'];
  for (const extra of ['', ', childrenInOtherQueues: remove']) {
    await redis.client(0).flushall();
    // The ten exports' orders are gone: the link lets every export go.
    await buildExports(0);
    const args = ['--redis', redis.url(0), '--config', linked(extra)];
    const planned = JSON.parse((await bullsweep([...args, '--json', 'plan'])).stdout);
    const text = await bullsweep([...args, 'plan']);
    const before = await membership(redis.client(0), bases);
    const run = await bullsweep([...args, 'run']);
    assert.equal(run.code, 0, run.stderr);
    const removed = removedPer(before, await membership(redis.client(0), bases));
    assert.deepEqual(summaryOf(text.stdout), summaryOf(run.stdout), `${extra || 'keepParent'}: the plan's summary is the run's: ${text.stdout}\n${run.stdout}`);
    assert.deepEqual(reportedRemovals(planned, 'toActOn'), removed, `${extra || 'keepParent'}: ${JSON.stringify(planned)}`);
    const wc = planned.queues.find((q) => q.queue === 'exports').states['waiting-children:source'];
    if (extra) {
      assert.equal(removed['bull:exports waiting-children'], 10);
      assert.equal(wc.takenAlong.childrenRemoved, 60, JSON.stringify(wc));
    } else {
      assert.deepEqual(removed, {}, 'the parents stay with their children');
      assert.deepEqual([wc.matched, wc.toActOn, wc.skipped.childrenElsewhere], [10, 0, 10], JSON.stringify(wc));
    }
  }
});
