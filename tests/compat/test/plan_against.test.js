// Issue 28: `plan --against OLD.yaml` predicts, on live data, what changes when a new version
// of the policy file replaces the old one. Judged by the two runs it predicts: real BullMQ
// builds a dataset, copied into two databases; the old version runs on one, the new on the
// other. For every state and action, what the new run did minus what the old run did must be
// the diff's "newly acted on" minus its "newly spared"; for the states whose actions only
// remove, the jobs each run removed and the other kept must be exactly the ones counted, and
// their bytes the bytes the diff gives.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker, FlowProducer } = require('../lib/bullmq');
const { startRedis, copyDatabase, bullsweep, writePolicy, sleep } = require('../lib/harness');
const { finishJobs } = require('../lib/dataset');
const { assertConsistent } = require('../lib/consistency');

const HOUR = 3600000;
const DAY = 24 * HOUR;

let redis;
const opened = [];
before(async () => { redis = await startRedis(); });
after(async () => {
  await Promise.all(opened.map((q) => q.close()));
  redis.stop();
});

const OLD = `version: 1
policies:
  - name: orders
    queueNamePattern: orders
    rules:
      completed: { maxAge: 10d }
      failed: { maxAge: 20d, action: remove }
    jobs:
      - name: email
        completed: { maxCount: 5 }
  - name: stable
    queueNamePattern: stable
    rules: { completed: { maxAge: 1d } }
  - name: guarded
    queueNamePattern: guarded
    protectWaitingParents: true
    rules: { completed: { maxAge: 30d } }
`;

const newPolicy = (archiveDir) => `version: 1
archive: { url: "file://${archiveDir}" }
policies:
  - name: orders
    queueNamePattern: orders
    rules:
      completed: { maxAge: 5d }
      failed: { maxAge: 20d, action: archive }
      waiting: { maxAge: 3h }
    jobs:
      - name: email
        completed: { maxCount: 12 }
  - name: stable
    queueNamePattern: stable
    rules: { completed: { maxAge: 1d } }
  - name: audit
    queueNamePattern: audit-log
    rules: { completed: { maxCount: 3 } }
  - name: guarded
    queueNamePattern: guarded
    protectWaitingParents: true
    rules: { completed: { maxAge: 1d } }
`;

// Sets a finished job's finishedOn (hash and score) to `ago` ms back.
async function age(client, base, state, id, ago) {
  const at = Date.now() - ago;
  await client.hset(`${base}:${id}`, 'finishedOn', String(at));
  await client.zadd(`${base}:${state}`, at, id);
}

// Builds the dataset in `db`: `orders` (completed charges 0.5 to 29.5 days old, completed
// emails under 4 days old, failed charges 1.5 to 28.5 days old, waiting jobs old and young),
// `audit-log` (8 completed, governed by the new version only) and `stable` (the same policy in
// both versions).
async function build(db) {
  const connection = redis.connection(db);
  const client = redis.client(db);
  const q = (name) => { const queue = new Queue(name, { connection }); opened.push(queue); return queue; };
  const orders = q('orders');
  const charges = await finishJobs(orders, connection, 30, { name: 'charge' });
  const emails = await finishJobs(orders, connection, 20, { name: 'email' });
  const failed = await finishJobs(orders, connection, 10, { name: 'charge', fail: () => true });
  for (const [k, j] of charges.entries()) await age(client, 'bull:orders', 'completed', j.id, (k + 0.5) * DAY);
  for (const [k, j] of emails.entries()) await age(client, 'bull:orders', 'completed', j.id, (k * 0.2 + 0.1) * DAY);
  for (const [k, j] of failed.entries()) await age(client, 'bull:orders', 'failed', j.id, (k + 0.5) * 3 * DAY);
  for (let i = 0; i < 6; i++) await orders.add('ship', { i }, { timestamp: Date.now() - 5 * HOUR - i * 1000 });
  for (let i = 0; i < 4; i++) await orders.add('ship', { i, young: true });
  await finishJobs(q('audit-log'), connection, 8, { name: 'entry' });
  await finishJobs(q('stable'), connection, 4, { name: 'tick' });
  await buildGuarded(connection, client, q);
}

// `guarded`: what a run's scripts leave although the rules select it. Three completed children
// whose parents still wait for a delayed sibling (protectWaitingParents), a job hash without
// finishedOn and a key that is not a hash (malformed), and an id without a hash (dangling:
// a removal drops it), beside three plain completed jobs; all two days old or more.
async function buildGuarded(connection, client, q) {
  const guarded = q('guarded');
  const flows = new FlowProducer({ connection });
  for (let i = 0; i < 3; i++) {
    await flows.add({
      name: 'parent', queueName: 'gparents', data: { i },
      children: [{ name: 'child', queueName: 'guarded', data: { i } }, { name: 'later', queueName: 'guarded', data: { i }, opts: { delay: HOUR } }],
    });
  }
  await flows.close();
  let done = 0;
  const worker = new Worker('guarded', async () => 'ok', { connection });
  worker.on('completed', () => { done += 1; });
  while (done < 3) await new Promise((r) => setTimeout(r, 20));
  await worker.close();
  const plain = await finishJobs(guarded, connection, 3, { name: 'plain' });
  const completed = await client.zrange('bull:guarded:completed', 0, -1);
  assert.equal(completed.length, 6);
  for (const [k, id] of completed.entries()) await age(client, 'bull:guarded', 'completed', id, (k + 2) * DAY);
  assert.equal(plain.length, 3);
  await client.hset('bull:guarded:nofin', 'name', 'x', 'timestamp', '1');
  await client.zadd('bull:guarded:completed', Date.now() - 3 * DAY, 'nofin');
  await client.set('bull:guarded:text', 'not a hash');
  await client.zadd('bull:guarded:completed', Date.now() - 3 * DAY, 'text');
  await client.zadd('bull:guarded:completed', Date.now() - 3 * DAY, 'gone');
}

async function idsOf(client, key) {
  const type = await client.type(key);
  if (type === 'zset') return client.zrange(key, 0, -1);
  if (type === 'list') return client.lrange(key, 0, -1);
  return [];
}

// Per queue and state, the ids present.
async function snapshot(client) {
  const out = {};
  for (const [queue, states] of Object.entries({ orders: ['completed', 'failed', 'wait'], 'audit-log': ['completed'], stable: ['completed'], guarded: ['completed'] })) {
    for (const s of states) out[`${queue} ${s === 'wait' ? 'waiting' : s}`] = new Set(await idsOf(client, `bull:${queue}:${s}`));
  }
  return out;
}

// Bytes of each job's hash and logs, as the diff measures them, per `queue id`. Measured on the
// database the plan read, before either run: a copied key can take a few bytes more or fewer
// than its original (allocator size classes), so the copy is no measure of the original.
async function bytesById(client, snap) {
  const out = new Map();
  for (const [k, ids] of Object.entries(snap)) {
    const queue = k.split(' ')[0];
    for (const id of ids) {
      let sum = 0;
      for (const key of [`bull:${queue}:${id}`, `bull:${queue}:${id}:logs`]) {
        sum += Number((await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) || 0);
      }
      out.set(`${queue} ${id}`, sum);
    }
  }
  return out;
}

const minus = (a, b) => [...a].filter((x) => !b.has(x));

test('plan --against predicts the difference between the old and the new version\'s runs', async () => {
  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-against-archive-'));
  const oldFile = writePolicy(OLD);
  const newFile = writePolicy(newPolicy(archiveDir));
  await build(1);
  await copyDatabase(redis.client(0), 1, 2);

  const plan = await bullsweep(['--json', '--config', newFile, 'plan', '--redis', redis.url(1), '--against', oldFile]);
  assert.equal(plan.code, 2, `changes exit 2: ${plan.stderr}`);
  const diff = JSON.parse(plan.stdout);
  const byKey = Object.fromEntries(diff.queues.map((q) => [q.key, q]));
  assert.deepEqual(Object.keys(byKey).sort(), ['bull:audit-log', 'bull:guarded', 'bull:orders'], 'stable does not change');
  assert.equal(diff.unchanged, 2, "stable, and gparents (uncovered by both)");
  assert.deepEqual([byKey['bull:audit-log'].old, byKey['bull:audit-log'].new], ['uncovered', 'audit']);
  const fields = Object.fromEntries(byKey['bull:orders'].fields.map((f) => [f.field, [f.old, f.new]]));
  assert.deepEqual(fields['completed.maxAge'], ['10d', '5d']);
  assert.deepEqual(fields['failed.action'], ['remove', 'archive']);
  assert.deepEqual(fields['waiting.maxAge'], [null, '3h']);
  assert.deepEqual(fields['jobs.email.completed.maxCount'], ['5', '12']);

  // The figures the scenario was built for.
  const jobs = (t) => Object.fromEntries(Object.entries(t || {}).map(([a, v]) => [a, v.jobs]));
  const o = byKey['bull:orders'].states;
  assert.deepEqual([jobs(o.completed.acted), jobs(o.completed.spared)], [{ remove: 5 }, { remove: 7 }]);
  assert.deepEqual([jobs(o.failed.acted), jobs(o.failed.spared)], [{ archive: 3 }, { remove: 3 }]);
  assert.deepEqual([jobs(o.waiting.acted), jobs(o.waiting.spared)], [{ remove: 6 }, {}]);
  assert.deepEqual(jobs(byKey['bull:audit-log'].states.completed.acted), { remove: 5 });
  // The plain jobs and the dangling id; not the protected children, nor the malformed two.
  const g = byKey['bull:guarded'].states.completed;
  assert.deepEqual([jobs(g.acted), jobs(g.spared), g.malformed], [{ remove: 4 }, {}, 2]);

  // The two runs it predicts: the old version on database 1, the new on database 2.
  const [a, b] = [redis.client(1), redis.client(2)];
  const before = await snapshot(a);
  const bytes = await bytesById(a, before);
  const bytesOf = (queue, ids) => ids.reduce((sum, id) => sum + bytes.get(`${queue} ${id}`), 0);
  const runOld = await bullsweep(['--json', '--config', oldFile, 'run', '--redis', redis.url(1)]);
  assert.equal(runOld.code, 0, runOld.stderr);
  const runNew = await bullsweep(['--json', '--config', newFile, 'run', '--redis', redis.url(2)]);
  assert.equal(runNew.code, 0, runNew.stderr);
  const [afterOld, afterNew] = [await snapshot(a), await snapshot(b)];

  // Per state and action: done(new) - done(old) = acted - spared.
  const done = (report) => {
    const out = {};
    for (const q of JSON.parse(report).queues) {
      for (const [state, s] of Object.entries(q.states)) out[`${q.key} ${state} ${s.action}`] = s.done || 0;
    }
    return out;
  };
  const [doneOld, doneNew] = [done(runOld.stdout), done(runNew.stdout)];
  const predicted = {};
  for (const q of diff.queues) {
    for (const [state, s] of Object.entries(q.states)) {
      for (const [action, t] of Object.entries(s.acted)) predicted[`${q.key} ${state} ${action}`] = (predicted[`${q.key} ${state} ${action}`] || 0) + t.jobs;
      for (const [action, t] of Object.entries(s.spared)) predicted[`${q.key} ${state} ${action}`] = (predicted[`${q.key} ${state} ${action}`] || 0) - t.jobs;
    }
  }
  const keys = new Set([...Object.keys(doneOld), ...Object.keys(doneNew), ...Object.keys(predicted)]);
  for (const k of keys) {
    assert.equal((doneNew[k] || 0) - (doneOld[k] || 0), predicted[k] || 0, `${k}: the runs' difference`);
  }

  // States whose actions remove: the jobs one run removed and the other kept, and their bytes.
  for (const [key, queue, state] of [['bull:orders', 'orders', 'completed'], ['bull:orders', 'orders', 'waiting'], ['bull:audit-log', 'audit-log', 'completed'], ['bull:guarded', 'guarded', 'completed']]) {
    const k = `${queue} ${state}`;
    const newlyActed = minus(afterOld[k], afterNew[k]);
    const newlySpared = minus(afterNew[k], afterOld[k]);
    const s = byKey[key].states[state];
    const acted = (s.acted.remove || { jobs: 0, bytes: 0 });
    const spared = (s.spared.remove || { jobs: 0, bytes: 0 });
    assert.equal(newlyActed.length, acted.jobs, `${k}: kept by the old run, removed by the new`);
    assert.equal(newlySpared.length, spared.jobs, `${k}: removed by the old run, kept by the new`);
    assert.ok([...newlyActed, ...newlySpared].every((id) => before[k].has(id)));
    assert.equal(bytesOf(queue, newlyActed), acted.bytes, `${k}: bytes newly acted on`);
    assert.equal(bytesOf(queue, newlySpared), spared.bytes, `${k}: bytes newly spared`);
  }
  await assertConsistent(redis, 1, [{ prefix: 'bull', name: 'orders' }, { prefix: 'bull', name: 'audit-log' }]);
  await assertConsistent(redis, 2, [{ prefix: 'bull', name: 'orders' }, { prefix: 'bull', name: 'audit-log' }]);
});

test('plan --against: no change exits 0; Markdown for a pull request; a broken old file exits 2 with its place', async () => {
  const policy = writePolicy(OLD);
  const same = await bullsweep(['--config', policy, 'plan', '--redis', redis.url(1), '--against', policy]);
  assert.equal(same.code, 0, same.stderr);
  assert.match(same.stdout, /^no change: 5 queues compared/m);

  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-against-md-'));
  const newFile = writePolicy(newPolicy(archiveDir));
  const md = await bullsweep(['--config', newFile, 'plan', '--redis', redis.url(1), '--against', policy, '--format', 'markdown']);
  assert.equal(md.code, 2, md.stderr);
  assert.match(md.stdout, /^### bullsweep plan: `.*bullsweep\.yaml` against `.*bullsweep\.yaml`$/m);
  assert.match(md.stdout, /^\| Queue \| Policy \| State \| Newly acted on \| Newly spared \|$/m);
  assert.match(md.stdout, /^\| `bull:audit-log` \| `uncovered` → `audit` \| completed \| remove 5 \(\d+\.\d\d MiB\) \| - \|$/m);
  assert.match(md.stdout, /^\| `bull:orders` \| `completed\.maxAge` \| `10d` \| `5d` \|$/m);

  const broken = writePolicy('version: 1\npolicies:\n  - name: x\n    queueNamePattern: [\n');
  const bad = await bullsweep(['--config', newFile, 'plan', '--redis', redis.url(1), '--against', broken]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, new RegExp(`${broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+`));
});

// Issue 42, follow-up (invariant 117): a repeat chain's next iteration, which no run removes,
// is not counted as newly acted on.
test('plan --against counts what the new run removes, not a repeat chain\'s next iteration', async () => {
  const db = 5;
  await redis.client(db).flushdb();
  const ticks = new Queue('ticks', { connection: redis.connection(db) });
  opened.push(ticks);
  await ticks.upsertJobScheduler('every-hour', { every: HOUR }, { name: 'tick', data: {} });
  // The scheduler's first iteration waits beside three plain jobs added two days ago.
  for (let i = 0; i < 3; i++) await ticks.add('plain', { i }, { timestamp: Date.now() - 2 * DAY });
  const oldFile = writePolicy('version: 1\npolicies:\n  - { name: ticks, queueNamePattern: ticks, rules: { completed: { maxAge: 1d } } }\n');
  const newFile = writePolicy('version: 1\npolicies:\n  - { name: ticks, queueNamePattern: ticks, rules: { completed: { maxAge: 1d }, waiting: { maxAge: 1ms } } }\n');
  await sleep(5); // every waiting job is older than 1ms
  const plan = await bullsweep(['--json', '--config', newFile, 'plan', '--redis', redis.url(db), '--against', oldFile]);
  assert.equal(plan.code, 2, plan.stderr);
  const waiting = JSON.parse(plan.stdout).queues[0].states.waiting;
  const run = await bullsweep(['--json', '--config', newFile, 'run', '--redis', redis.url(db)]);
  assert.equal(run.code, 0, run.stderr);
  const done = JSON.parse(run.stdout).queues[0].states.waiting;
  assert.deepEqual([done.done, done.skipped && done.skipped.scheduler], [3, 1], run.stdout);
  assert.equal(waiting.acted.remove.jobs, done.done, `newly acted on is what the new run removes: ${plan.stdout}`);
});
