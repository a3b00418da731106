// Legacy Bull (OptimalBits/bull 4.16): the same dataset on two databases, Bull's own
// Queue.clean or Job.remove on one and `bullsweep run` on the other; the keyspaces must be
// identical, Bull's API must read every queue whole, and no events stream or BullMQ meta may
// appear. Then the mixed Redis: Bull and BullMQ queues under one prefix, each governed by its
// own semantics; then archive, restore and forget on Bull data.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRedis, dumpKeyspace, copyDatabase, bullsweep, writePolicy, sleep, waitFor, startDaemon, stopDaemons } = require('../lib/harness');
const { BULL_QUEUES, BULL_LAYOUTS, bullQueue, buildBull } = require('../lib/bull_dataset');
const { assertBullWhole } = require('../lib/bull_checks');
const { summaryOf } = require('../lib/removals');

let redis;
let release = async () => {};
before(async () => { redis = await startRedis(); });
after(async () => { stopDaemons(); await release(); redis.stop(); });

function policy(rules, { layouts = BULL_LAYOUTS, extra = [], policies } = {}) {
  return writePolicy([
    'version: 1',
    ...extra,
    'discovery:',
    '  layouts:',
    ...layouts.map((l) => `    - "${l}"`),
    'policies:',
    ...(policies || [`  - { name: everything, queueNamePattern: "*", rules: ${rules} }`]),
    '',
  ].join('\n'));
}

// The Bull dataset on database 0, copied to database 1.
async function twoCopies() {
  const admin = redis.client(0);
  await admin.flushall();
  await release();
  release = await buildBull(redis.connection(0));
  await copyDatabase(admin, 0, 1);
  await sleep(20); // every finished job is now older than maxAge below
}

async function streams(client) {
  const out = [];
  for (const key of await client.keys('*')) {
    if (!key.startsWith('bullsweep:') && (await client.type(key)) === 'stream') out.push(key);
  }
  return out;
}

async function counts(db) {
  const out = {};
  for (const spec of BULL_QUEUES) {
    const q = bullQueue(redis.connection(db), spec);
    out[`${spec.prefix}:${spec.name}`] = await q.getJobCounts();
    await q.close();
  }
  return out;
}

test('bull: a run leaves the same keyspace as Bull\'s Queue.clean(0, "completed") and clean(0, "failed")', async () => {
  await twoCopies();
  const before = await dumpKeyspace(redis.client(1));
  for (const spec of BULL_QUEUES) {
    const q = bullQueue(redis.connection(0), spec);
    await q.clean(0, 'completed');
    await q.clean(0, 'failed');
    await q.close();
  }
  const run = await bullsweep(['--redis', redis.url(1), '--config', policy('{ completed: { maxAge: 1ms }, failed: { maxAge: 1ms } }'), '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  assert.deepEqual(report.queues.map((q) => [q.key, q.backend]).sort(), BULL_QUEUES.map((s) => [`${s.prefix}:${s.name}`, 'bull']).sort());
  for (const q of report.queues) assert.equal(q.error, undefined, JSON.stringify(q));

  const expected = await dumpKeyspace(redis.client(0));
  const actual = await dumpKeyspace(redis.client(1));
  assert.deepEqual(actual, expected);
  assert.deepEqual(await streams(redis.client(1)), [], 'no events stream is written on a Bull queue');
  assert.deepEqual(await counts(1), await counts(0));

  // Not vacuous: logs, custom ids with ':', repeat iterations, the debounced job and the
  // jobs Bull's removeOnComplete left went; the locked job and the waiting ones stayed.
  const gone = Object.keys(before).filter((k) => !(k in actual));
  assert.ok(gone.some((k) => k.endsWith(':logs')), 'logs removed');
  assert.ok(gone.includes('bull:legacy-mail:order:2024:1'), 'custom ids with colons removed');
  assert.ok(gone.some((k) => /^bull:legacy-mail:repeat:[0-9a-f]+:\d+$/.test(k)), 'repeat iterations removed');
  assert.ok(gone.some((k) => /^legacy:reports:\d+$/.test(k) && before[k].value.name === 'trimmed'), 'removeOnComplete leftovers removed');
  if (Object.values(before).some((v) => v.value && v.value.deid)) {
    assert.ok(gone.some((k) => before[k].value && before[k].value.deid === 'digest'), 'the debounced job removed');
  }
  assert.ok('bull:legacy-mail:held-by-worker:lock' in actual, 'the locked active job is untouched');
  const done = report.queues.flatMap((q) => Object.values(q.states)).reduce((n, s) => n + (s.done || 0), 0);
  assert.ok(done >= 60, `bullsweep removed ${done} jobs`);
  for (const spec of BULL_QUEUES) {
    const s = await assertBullWhole(redis, 1, spec);
    assert.deepEqual([s.completed, s.failed], [[], []]);
  }
});

test('bull: removing waiting, paused and delayed jobs leaves what Bull\'s Job.remove() leaves; a repeatable job\'s next iteration stays', async () => {
  await twoCopies();
  const client = redis.client(0);
  const schedulers = [];
  for (const spec of BULL_QUEUES) {
    const base = `${spec.prefix}:${spec.name}`;
    const q = bullQueue(redis.connection(0), spec);
    const due = new Set((await client.zrange(`${base}:repeat`, 0, -1, 'WITHSCORES')).filter((_, i) => i % 2 === 1));
    const ids = [...await client.lrange(`${base}:wait`, 0, -1), ...await client.lrange(`${base}:paused`, 0, -1),
      ...await client.zrange(`${base}:delayed`, 0, -1)];
    for (const id of ids) {
      const m = id.match(/^repeat:[0-9a-f]+:(\d+)$/);
      if (m && due.has(m[1])) { schedulers.push(`${base}:${id}`); continue; }
      await (await q.getJob(id)).remove();
    }
    await q.close();
  }
  assert.ok(schedulers.length >= 1, 'the dataset has a repeatable job\'s next iteration');
  const rules = policy('{ waiting: { maxAge: 1ms }, delayed: { maxAge: 1ms } }');
  const plan = await bullsweep(['--redis', redis.url(1), '--config', rules, '--json', 'plan']);
  const planned = JSON.parse(plan.stdout).queues.flatMap((q) => Object.values(q.states)).reduce((n, s) => n + ((s.skipped || {}).scheduler || 0), 0);
  assert.equal(planned, schedulers.length, 'the plan counts the next iterations as held');
  const run = await bullsweep(['--redis', redis.url(1), '--config', rules, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(await dumpKeyspace(redis.client(1)), await dumpKeyspace(redis.client(0)));
  assert.deepEqual(await streams(redis.client(1)), []);
  const report = JSON.parse(run.stdout);
  const held = report.queues.flatMap((q) => Object.values(q.states)).reduce((n, s) => n + ((s.skipped || {}).scheduler || 0), 0);
  assert.equal(held, schedulers.length, 'the next iterations are counted as held');
  for (const key of schedulers) assert.equal(await redis.client(1).exists(key), 1, `${key} stays`);
  // Prioritized jobs left `priority` with `wait`; the pending debounce key went, as in Bull.
  assert.equal(await redis.client(1).exists('bull:legacy-mail:priority'), 0);
  assert.equal(await redis.client(1).exists('bull:legacy-mail:de:pending-digest'), 0);
  for (const spec of BULL_QUEUES) await assertBullWhole(redis, 1, spec);
});

test('bull: a mixed Redis, Bull and BullMQ queues under one prefix, each governed by its own semantics and neither mistaken for the other', async () => {
  const { Queue } = require('../lib/bullmq');
  const { build, QUEUES, LAYOUTS } = require('../lib/dataset');
  const { assertConsistent } = require('../lib/consistency');
  const admin = redis.client(0);
  await admin.flushall();
  await release();
  await build(redis.connection(0));
  release = await buildBull(redis.connection(0));
  // Not queues, though each has an integer `:id`: a counter of the application's own, and a
  // Bull job whose custom id is `events` does not hide its queue.
  await admin.set('bull:orders-seq:id', '42');
  const evq = bullQueue(redis.connection(0), { prefix: 'legacy', name: 'reports' });
  await evq.add('named', { n: 1 }, { jobId: 'events' });
  await evq.close();
  await copyDatabase(admin, 0, 1);
  await sleep(20);
  const layouts = [...LAYOUTS, 'legacy:{queue}'];

  // Which library each queue is, and a policy per library.
  const split = policy(null, {
    layouts,
    policies: [
      '  - { name: legacy, queueNamePattern: "*", backend: bull, rules: { completed: { maxAge: 1ms } } }',
      '  - { name: modern, queueNamePattern: "*", backend: bullmq, rules: { completed: { maxAge: 30d } } }',
    ],
  });
  const plan = await bullsweep(['--redis', redis.url(1), '--config', split, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const seen = Object.fromEntries(JSON.parse(plan.stdout).queues.map((q) => [q.key, [q.backend, q.policy]]));
  const expectSeen = {};
  for (const s of QUEUES) expectSeen[`${s.prefix}:${s.name}`] = ['bullmq', 'modern'];
  for (const s of BULL_QUEUES) expectSeen[`${s.prefix}:${s.name}`] = ['bull', 'legacy'];
  assert.deepEqual(seen, expectSeen, 'bull:orders-seq is no queue; legacy:reports is found though a job is named events');
  const text = await bullsweep(['--redis', redis.url(1), '--config', split, 'plan']);
  assert.match(text.stdout, /bull:legacy-mail \(bull\)/, 'the table names the library of a Bull queue');

  // One policy for both: each queue ends as its own library's clean leaves it.
  for (const { prefix, name } of QUEUES) {
    const q = new Queue(name, { connection: redis.connection(0), prefix });
    for (const state of ['completed', 'failed']) await q.clean(0, 0, state);
    await q.close();
  }
  for (const spec of BULL_QUEUES) {
    const q = bullQueue(redis.connection(0), spec);
    await q.clean(0, 'completed');
    await q.clean(0, 'failed');
    await q.close();
  }
  const run = await bullsweep(['--redis', redis.url(1), '--config', policy('{ completed: { maxAge: 1ms }, failed: { maxAge: 1ms } }', { layouts }), '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(await dumpKeyspace(redis.client(1)), await dumpKeyspace(redis.client(0)));
  // BullMQ's queues got their `cleaned` events; no Bull queue got a stream.
  const made = await streams(redis.client(1));
  assert.ok(made.length > 0 && made.every((k) => !k.startsWith('legacy:') && !k.startsWith('bull:legacy-')), made.join(' '));
  await assertConsistent(redis, 1, QUEUES);
  for (const spec of BULL_QUEUES) await assertBullWhole(redis, 1, spec);
});

test('bull: archive leaves what clean leaves, restore --as original puts a Bull job back as Bull wrote it, --as new adds one as Bull adds one', async () => {
  await twoCopies();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-bull-archive-'));
  const file = policy('{ completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } }', {
    extra: [`archive: { url: "file://${dir}/archive" }`, `audit: { url: "file://${dir}/audit.jsonl" }`],
  });
  const client = redis.client(1);
  const failedId = (await client.zrange('bull:legacy-mail:failed', 0, 0))[0];
  const doneId = (await client.zrange('bull:legacy-mail:completed', -1, -1))[0];
  const other = (await client.zrange('legacy:reports:completed', 0, 0))[0];
  const hashBefore = await client.hgetall(`bull:legacy-mail:${failedId}`);
  const logsBefore = await client.lrange(`bull:legacy-mail:${failedId}:logs`, 0, -1);
  for (const spec of BULL_QUEUES) {
    const q = bullQueue(redis.connection(0), spec);
    await q.clean(0, 'completed');
    await q.clean(0, 'failed');
    await q.close();
  }
  const args = ['--redis', redis.url(1), '--config', file];
  const run = await bullsweep([...args, 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(await dumpKeyspace(client), await dumpKeyspace(redis.client(0)));
  assert.deepEqual(await streams(client), []);

  const original = await bullsweep([...args, 'archive', 'restore', 'bull:legacy-mail', failedId, '--as', 'original']);
  assert.equal(original.code, 0, original.stderr);
  assert.deepEqual(await client.hgetall(`bull:legacy-mail:${failedId}`), hashBefore, 'every field as Bull wrote it');
  assert.deepEqual(await client.lrange(`bull:legacy-mail:${failedId}:logs`, 0, -1), logsBefore);
  // Never into a queue BullMQ used too: `legacy:reports` got BullMQ's meta hash and events
  // stream beside its Bull data (its repeatable job), so neither library's semantics hold.
  await client.hset('legacy:reports:meta', 'opts.maxLenEvents', '10000');
  await client.xadd('legacy:reports:events', '*', 'event', 'added', 'jobId', 'x');
  const across = await bullsweep([...args, 'archive', 'restore', 'legacy:reports', other, '--as', 'original']);
  assert.equal(across.code, 2, across.stderr);
  assert.match(across.stderr, /written by bull and legacy:reports is now a queue both bullmq and bull wrote; nothing restored/);
  await client.del('legacy:reports:events');
  await client.hdel('legacy:reports:meta', 'opts.maxLenEvents');
  const q = bullQueue(redis.connection(1), BULL_QUEUES[0]);
  const job = await q.getJob(failedId);
  assert.equal(await job.getState(), 'failed');
  assert.equal(job.failedReason, hashBefore.failedReason);

  const idBefore = Number(await client.get('bull:legacy-mail:id'));
  const asNew = await bullsweep([...args, 'archive', 'restore', 'bull:legacy-mail', doneId]);
  assert.equal(asNew.code, 0, asNew.stderr);
  const newId = asNew.stdout.match(/as bull:legacy-mail:(\S+)/)[1];
  assert.equal(newId, String(idBefore + 1), 'the next id from Bull\'s counter');
  assert.equal(await (await q.getJob(newId)).getState(), 'waiting');
  assert.equal(await client.exists('bull:legacy-mail:marker'), 0, 'no BullMQ marker on a Bull queue');
  assert.deepEqual(await streams(client), []);
  // A Bull worker runs the restored job.
  q.process('*', 1, async (j) => ({ again: j.id }));
  await waitUntil(async () => (await q.getJob(newId)).finishedOn);
  assert.deepEqual((await q.getJob(newId)).returnvalue, { again: newId });
  await q.close();
  for (const spec of BULL_QUEUES) await assertBullWhole(redis, 1, spec);
});

async function waitUntil(check, ms = 15000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(50);
  }
}

test('bull: forget erases one person\'s finished and waiting jobs from every Bull queue, with a receipt of exactly what it did', async () => {
  await twoCopies();
  const client = redis.client(1);
  const file = policy('{ completed: { maxAge: 30d } }', { extra: ['subjects: [{ name: user, paths: [email] }]'] });
  const matches = [];
  for (const spec of BULL_QUEUES) {
    const base = `${spec.prefix}:${spec.name}`;
    for (const id of await client.zrange(`${base}:completed`, 0, -1)) {
      const data = JSON.parse(await client.hget(`${base}:${id}`, 'data'));
      if (data.email === 'user3@example.com') matches.push(`${base}:${id}`);
    }
  }
  // And waiting: a plain job and a prioritized one (in `wait` and ranked in `priority`).
  const adder = bullQueue(redis.connection(1), BULL_QUEUES[1]);
  const waiting = await adder.add('send', { email: 'user3@example.com' });
  const ranked = await adder.add('send', { email: 'user3@example.com' }, { priority: 2 });
  await adder.close();
  matches.push(`legacy:reports:${waiting.id}`, `legacy:reports:${ranked.id}`);
  assert.ok(matches.length >= 4, 'the person has jobs in several Bull queues');
  const r = await bullsweep(['--redis', redis.url(1), '--config', file, 'forget', '--subject', 'user=user3@example.com', '--request-id', 'GDPR-B1']);
  assert.equal(r.code, 0, r.stderr);
  const receipt = JSON.parse(r.stdout);
  assert.equal(receipt.status, 'erased', r.stdout);
  for (const key of matches) assert.equal(await client.exists(key), 0, `${key} erased`);
  const erased = receipt.queues.flatMap((q) => Object.values(q.states).flat().map((id) => `${q.queue}:${id}`)).sort();
  assert.deepEqual(erased, [...matches].sort(), 'the receipt names exactly the jobs erased');
  assert.ok(!receipt.searched.some((p) => p.kind === 'events'), 'no events stream is claimed searched on a Bull queue');
  assert.deepEqual(await streams(client), []);
  // Another person's jobs stay.
  assert.equal(await client.zscore('legacy:reports:priority', ranked.id), null, 'the prioritized job left `priority`');
  const other = [];
  for (const id of await client.zrange('bull:legacy-mail:completed', 0, -1)) {
    if (JSON.parse(await client.hget(`bull:legacy-mail:${id}`, 'data')).email === 'user4@example.com') other.push(id);
  }
  assert.equal(other.length, 1);
  for (const spec of BULL_QUEUES) await assertBullWhole(redis, 1, spec);
});


test('bull: forget never calls an erasure done while a repeatable job\'s next iteration keeps the person\'s data', async () => {
  const db = 14;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'legacy', name: 'nightly' };
  const queue = bullQueue(redis.connection(db), spec);
  await queue.add('digest', { email: 'ada@example.com' }, { repeat: { every: 3600000 } });
  await queue.add('digest', { email: 'ada@example.com' }, { jobId: 'once' });
  const [next] = await client.zrange('legacy:nightly:delayed', 0, -1);
  assert.match(next, /^repeat:/);
  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["legacy:{queue}"]', 'subjects: [{ name: user, paths: [email] }]', 'policies:',
    '  - { name: n, queueNamePattern: "*", rules: { completed: { maxAge: 30d } } }', ''].join('\n'));
  const args = ['--redis', redis.url(db), '--config', file, 'forget', '--subject', 'user=ada@example.com'];
  const r = await bullsweep([...args, '--request-id', 'R-1']);
  assert.equal(r.code, 1, `${r.stdout}${r.stderr}`);
  const receipt = JSON.parse(r.stdout);
  assert.equal(receipt.status, 'incomplete', r.stdout);
  const left = receipt.remaining.find((p) => p.kind === 'key' && p.name === `legacy:nightly:${next}`);
  assert.ok(left && /removeRepeatableByKey/.test(left.reason), r.stdout);
  assert.equal(await client.exists('legacy:nightly:once'), 0, 'the other job is erased');
  assert.equal(await client.hget(`legacy:nightly:${next}`, 'data'), JSON.stringify({ email: 'ada@example.com' }), 'the chain is kept');
  // With the repeatable job removed by its owner, the erasure finishes.
  await queue.removeRepeatable('digest', { every: 3600000 });
  await client.zrem('legacy:nightly:delayed', next);
  await client.del(`legacy:nightly:${next}`);
  const again = await bullsweep([...args, '--request-id', 'R-2']);
  assert.equal(again.code, 0, again.stdout);
  assert.equal(JSON.parse(again.stdout).status, 'nothingFound', again.stdout);
  await queue.close();
});
test('bull: the daemon removes jobs as Bull publishes them finished, keeps keepIf jobs, and sweeps what it missed while it was down', async () => {
  const db = 3;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-orders' };
  const file = writePolicy(['version: 1', 'schedule: 1h', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    '  - name: orders', '    queueNamePattern: legacy-orders', '    backend: bull', '    mode: event', '    rules:',
    '      completed: { maxCount: 0, keepIf: { path: returnvalue.status, equals: failed } }',
    '      failed: { maxAge: 1h }', ''].join('\n'));
  const q = bullQueue(redis.connection(db), spec);
  await q.add('first', { i: -1 }); // the queue exists before the daemon starts
  const status = (i) => (i % 10 === 0 ? 'failed' : 'ok');
  let finished = 0;
  q.on('completed', () => { finished += 1; });
  q.on('failed', () => { finished += 1; });
  const args = ['--redis', redis.url(db), '--config', file];
  let d = startDaemon(args);
  await waitFor('the Bull listener', async () => d.log().includes("bull:legacy-orders: hearing Bull's completed and failed events"));
  await waitFor('the first sweep', async () => (await client.hget('bullsweep:lastrun', 'bull:legacy-orders')) !== null);
  const firstRun = await client.hget('bullsweep:lastrun', 'bull:legacy-orders');
  await sleep(300); // the subscription is made in the reader's next round

  q.process('*', 5, async (job) => {
    if (job.data.i % 50 === 1) throw new Error('boom');
    return { status: status(job.data.i) };
  });
  for (let i = 0; i < 300; i++) await q.add('order', { i });
  await waitFor('every job', async () => finished >= 301);
  const kept = (n) => [-1, ...Array.from({ length: n }, (_, i) => i)].filter((i) => i >= 0 && i % 50 !== 1 && status(i) === 'failed').length;
  await waitFor('removal as the jobs finish', async () => (await q.getCompletedCount()) === kept(300), 15000);
  assert.equal(await client.hget('bullsweep:lastrun', 'bull:legacy-orders'), firstRun, 'the events did it, not a sweep');
  const completed = await q.getCompleted(0, -1);
  assert.ok(completed.every((j) => j.returnvalue.status === 'failed'), 'only keepIf jobs stay');
  assert.equal(await q.getFailedCount(), 6, 'failed jobs are younger than maxAge');

  // Down while 200 more finish: Bull's messages are lost, the sweep on taking over makes up
  // for them (maxCount: 0 there).
  await d.kill('SIGKILL');
  for (let i = 300; i < 500; i++) await q.add('order', { i });
  await waitFor('the jobs finished while the daemon was down', async () => finished >= 501);
  assert.ok((await q.getCompletedCount()) > kept(500), 'nothing removed them while the daemon was down');
  d = startDaemon(args);
  // The sweep keeps no keepIf job: keepIf keeps a job out of the event path only.
  await waitFor('the sweep after taking over', async () => (await q.getCompletedCount()) === 0, 15000);
  assert.match(d.log(), /bull:legacy-orders: hearing Bull's completed and failed events/);
  // The run is recorded once it is done, a moment after its removals.
  await waitFor('the sweep recorded', async () => (await client.hget('bullsweep:lastrun', 'bull:legacy-orders')) !== firstRun);
  assert.equal((await d.kill('SIGTERM')).code, 0, d.log());
  await q.close();
  assert.equal(await client.exists('bull:legacy-orders:events'), 0);
  await assertBullWhole(redis, db, spec);
});

test('bull: stalled retry is Bull\'s (back to wait, stalledCounter), anonymize scrubs Bull jobs Bull still reads', async () => {
  const db = 4;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-signups' };
  const q = bullQueue(redis.connection(db), spec);
  let done = 0;
  q.on('completed', () => { done += 1; });
  q.process('*', 2, async (job) => ({ welcomed: job.data.email }));
  for (let i = 0; i < 3; i++) await q.add('signup', { email: `new${i}@example.com`, plan: 'pro' });
  await waitFor('the signups', async () => done >= 3);
  await q.close();
  // A worker took this job and vanished: its lock expires and nobody renews it.
  const holder = bullQueue(redis.connection(db), spec, { settings: { lockDuration: 300 } });
  const abandoned = await holder.add('import', { n: 1 });
  const taken = await holder.getNextJob();
  assert.equal(taken.id, abandoned.id);
  await holder.close(true);
  await sleep(1200);
  assert.equal(await client.exists(`bull:legacy-signups:${abandoned.id}:lock`), 0, 'the lock expired');

  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'pii: { paths: [email] }', 'policies:',
    '  - { name: signups, queueNamePattern: legacy-signups, rules: { completed: { maxAge: 1ms, action: anonymize }, stalled: { maxAge: 1s, action: retry } } }', ''].join('\n'));
  // As Bull's own stalled check. The worker above checked a moment ago: its stamp stands for
  // its interval, so the first run checks nothing. Once the stamp is gone (as after 30 s) a
  // run checks and marks the job, and a run one interval after that retries it.
  const stamp = 'bull:legacy-signups:stalled-check';
  assert.equal(await client.exists(stamp), 1, 'the worker\'s check stamped the queue');
  const runOnce = async () => {
    const r = await bullsweep(['--redis', redis.url(db), '--config', file, '--json', 'run']);
    assert.equal(r.code, 0, r.stderr);
    return r;
  };
  const first = await runOnce();
  const waited = JSON.parse(first.stdout).queues[0].states;
  assert.deepEqual([waited.completed.done, waited.stalled.done, waited.stalled.skipped.unconfirmed], [3, 0, 1], first.stdout);
  assert.deepEqual(await client.smembers('bull:legacy-signups:stalled'), [], 'nothing marked while another check stands');
  await client.del(stamp);
  const second = await runOnce();
  const marked = JSON.parse(second.stdout).queues[0].states;
  assert.deepEqual([marked.stalled.done, marked.stalled.skipped.unconfirmed], [0, 1], second.stdout);
  assert.deepEqual(await client.smembers('bull:legacy-signups:stalled'), [abandoned.id], 'marked in Bull\'s stalled set');
  assert.ok(await client.pttl(stamp) > 0, 'the check stamped for its interval');
  await client.del(stamp);
  const run = await runOnce();
  assert.equal(run.code, 0, run.stderr);
  const states = JSON.parse(run.stdout).queues[0].states;
  assert.deepEqual([states.stalled.done, states.stalled.skipped], [1, undefined], run.stdout);
  assert.deepEqual(await client.smembers('bull:legacy-signups:stalled'), [], 'unmarked as it left active');

  const reader = bullQueue(redis.connection(db), spec);
  const retried = await reader.getJob(abandoned.id);
  assert.equal(await retried.getState(), 'waiting');
  assert.equal(await client.hget(`bull:legacy-signups:${abandoned.id}`, 'stalledCounter'), '1');
  assert.deepEqual(await client.lrange('bull:legacy-signups:active', 0, -1), []);
  for (const job of await reader.getCompleted()) {
    assert.equal(job.data.email, '[REDACTED]', 'Bull reads the scrubbed data');
    assert.equal(job.data.plan, 'pro');
  }
  assert.deepEqual(await streams(client), [], 'no events stream');
  // A Bull worker picks the retried job up.
  reader.process('*', 1, async () => 'imported');
  await waitFor('the retried job completes', async () => (await reader.getJob(abandoned.id)).finishedOn);
  await reader.close();
  await assertBullWhole(redis, db, spec);
});

test('bull: moveExhaustedTo moves a Bull job into a Bull dead-letter queue, and never into a BullMQ one', async () => {
  const db = 5;
  const client = redis.client(db);
  await client.flushdb();
  const q = bullQueue(redis.connection(db), { prefix: 'bull', name: 'legacy-pay' });
  let failed = 0;
  q.on('failed', () => { failed += 1; });
  q.process('*', 2, async () => { throw new Error('declined'); });
  for (let i = 0; i < 3; i++) await q.add('charge', { i });
  await waitFor('the charges fail', async () => failed >= 3);
  await q.close();
  const file = (dlq) => writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    `  - { name: pay, queueNamePattern: legacy-pay, moveExhaustedTo: ${dlq} }`, ''].join('\n'));
  // Into a BullMQ queue: refused, nothing moved.
  const { Queue: MqQueue } = require('../lib/bullmq');
  const mq = new MqQueue('modern-dlq', { connection: redis.connection(db) });
  await mq.add('x', {});
  await mq.close();
  const refused = await bullsweep(['--redis', redis.url(db), '--config', file('modern-dlq'), '--json', 'run']);
  assert.equal(refused.code, 1);
  assert.match(JSON.parse(refused.stdout).queues[0].error, /bull:modern-dlq is a bullmq queue and bull:legacy-pay a bull queue: a job moves only between queues of one library; nothing was moved/);
  assert.equal(await client.zcard('bull:legacy-pay:failed'), 3);
  // Into a new queue: a Bull one, found as Bull afterwards.
  const moved = await bullsweep(['--redis', redis.url(db), '--config', file('legacy-pay-dlq'), '--json', 'run']);
  assert.equal(moved.code, 0, moved.stderr);
  assert.equal(await client.zcard('bull:legacy-pay:failed'), 0);
  assert.equal(await client.zcard('bull:legacy-pay-dlq:failed'), 3);
  assert.equal(await client.exists('bull:legacy-pay-dlq:meta'), 0, 'no BullMQ meta on the Bull dead-letter queue');
  const all = writePolicy('version: 1\npolicies:\n  - { name: all, queueNamePattern: "*" }\n');
  const plan = await bullsweep(['--redis', redis.url(db), '--config', all, '--json', 'plan']);
  const seen = Object.fromEntries(JSON.parse(plan.stdout).queues.map((x) => [x.key, x.backend]));
  assert.deepEqual([seen['bull:legacy-pay-dlq'], seen['bull:modern-dlq']], ['bull', 'bullmq']);
  const dlq = bullQueue(redis.connection(db), { prefix: 'bull', name: 'legacy-pay-dlq' });
  const jobs = await dlq.getFailed();
  assert.equal(jobs.length, 3);
  assert.ok(jobs.every((j) => j.failedReason === 'declined'));
  await dlq.close();
  assert.deepEqual(await streams(client), ['bull:modern-dlq:events'], 'only the BullMQ queue has a stream');
});

test('bull: a queue moved in place from Bull to BullMQ is taken again by the daemon and its stream read', async () => {
  const db = 6;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-moving' };
  const file = writePolicy(['version: 1', 'schedule: 1h', 'policies:',
    '  - { name: moving, queueNamePattern: legacy-moving, mode: event, rules: { completed: { maxCount: 0 } } }', ''].join('\n'));
  const q = bullQueue(redis.connection(db), spec);
  await q.add('old', { n: 1 });
  await q.close();
  const d = startDaemon(['--redis', redis.url(db), '--config', file]);
  await waitFor('the Bull listener', async () => d.log().includes("bull:legacy-moving: hearing Bull's completed and failed events"));
  // The team moves the queue to BullMQ in place: BullMQ writes its meta, and its first job the
  // events stream. Meta alone beside Bull's id counter is what a BullMQ Queue opened on a Bull
  // queue leaves, so the queue is BullMQ's from that first job on.
  await client.del('bull:legacy-moving:wait', 'bull:legacy-moving:1', 'bull:legacy-moving:stalled-check');
  const { Queue: MqQueue, Worker: MqWorker } = require('../lib/bullmq');
  const mq = new MqQueue('legacy-moving', { connection: redis.connection(db) });
  await mq.add('new', { i: 0 });
  await waitFor('the daemon takes it again as BullMQ', async () => d.log().includes('bull:legacy-moving: now a bullmq queue; taking its events again'), 20000);
  await waitFor('reading its stream', async () => d.log().includes('bull:legacy-moving: reading events from'));
  let done = 0;
  const w = new MqWorker('legacy-moving', async () => 'ok', { connection: redis.connection(db) });
  w.on('completed', () => { done += 1; });
  for (let i = 1; i < 20; i++) await mq.add('new', { i });
  await waitFor('the jobs complete', async () => done >= 20);
  await waitFor('removed as their events arrive', async () => (await mq.getCompletedCount()) === 0, 15000);
  assert.ok(!d.log().includes('Invalid stream ID'), d.log());
  await w.close();
  await mq.close();
  assert.equal((await d.kill('SIGTERM')).code, 0, d.log());
});

// Bull takes a job in two calls: BRPOPLPUSH from `wait` to `active`, then moveToActive, which
// locks it. A job retried after a failed attempt keeps that attempt's `processedOn`, so in
// between it sits in `active` unlocked and looks long started. The test makes that moment
// itself (Bull's first call, then its second) instead of hoping a live worker hits it.
test('bull: stalled remove never takes a retried job a worker has moved to active but not yet locked; an abandoned one goes only after two checks', async () => {
  const db = 7;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-fetch' };
  const base = 'bull:legacy-fetch';
  const worker = bullQueue(redis.connection(db), spec);
  const added = await worker.add('flaky', { order: 7 }, { attempts: 3 });
  // An attempt fails: a worker takes the job (both calls at once) and fails it, and Bull
  // retries it at once, back to `wait`. Bull takes the oldest job first.
  const fail = async (id) => {
    assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), id);
    const job = await worker.moveToActive(id);
    assert.equal(job.id, id);
    await job.moveToFailed(new Error('boom'));
    // Bull 3 keeps the attempt's lock after a retry until it expires; the job waits behind
    // others longer than that (its expiry, done here at once). Bull 4 released it already.
    await client.del(`${base}:${id}:lock`);
  };
  // Bull's first call: the job is in `active`, unlocked, with its first attempt's processedOn.
  const takeWithoutLock = async (id) => {
    assert.equal(await client.brpoplpush(`${base}:wait`, `${base}:active`, 1), id);
    assert.equal(await client.exists(`${base}:${id}:lock`), 0);
    assert.ok(Number(await client.hget(`${base}:${id}`, 'processedOn')) > 0);
  };
  await fail(added.id);
  await sleep(20); // its processedOn is now older than maxAge
  await takeWithoutLock(added.id);
  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    '  - { name: fetch, queueNamePattern: legacy-fetch, rules: { stalled: { maxAge: 1ms, action: remove } } }', ''].join('\n'));
  const args = ['--redis', redis.url(db), '--config', file, '--json'];
  const stalledOf = (r) => JSON.parse(r.stdout).queues[0].states.stalled;

  const plan = await bullsweep([...args, 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const run = await bullsweep([...args, 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await client.exists(`${base}:${added.id}`), 1, `the job a worker is taking was removed: ${run.stdout}`);
  assert.deepEqual([stalledOf(run).done, (stalledOf(run).skipped || {}).unconfirmed], [0, 1], run.stdout);
  assert.deepEqual([stalledOf(plan).matched, (stalledOf(plan).skipped || {}).unconfirmed], [1, 1], `the plan says so: ${plan.stdout}`);
  assert.deepEqual(await client.lrange(`${base}:active`, 0, -1), [added.id]);

  // Bull's second call locks it; a later check, one interval on, finds it locked.
  let job = await worker.moveToActive(added.id);
  assert.equal(job.id, added.id);
  assert.deepEqual(await client.smembers(`${base}:stalled`), [], 'moveToActive unmarked it');
  await client.del(`${base}:stalled-check`); // the check's interval passes
  assert.equal(stalledOf(await bullsweep([...args, 'run'])).done, 0);

  // It fails again and is taken again: the mark of its earlier attempt is gone, so a check
  // that is due (no stamp stands) still does not take it.
  await job.moveToFailed(new Error('boom again'));
  await client.del(`${base}:${added.id}:lock`); // expired, as above
  await sleep(20);
  await takeWithoutLock(added.id);
  await client.del(`${base}:stalled-check`);
  const again = await bullsweep([...args, 'run']);
  assert.equal(stalledOf(again).done, 0, again.stdout);
  assert.equal(await client.exists(`${base}:${added.id}`), 1);
  job = await worker.moveToActive(added.id);
  await job.moveToCompleted('shipped');
  const done = await worker.getJob(added.id);
  assert.equal(await done.getState(), 'completed');
  assert.deepEqual([done.returnvalue, done.data, done.attemptsMade], ['shipped', { order: 7 }, 2]);

  // A job left in `active` unlocked by a worker that died between its two calls is Bull's
  // stalled job: marked by one check, taken by the next one an interval later.
  const other = await worker.add('flaky', { order: 8 }, { attempts: 3 });
  await fail(other.id);
  await sleep(20);
  await takeWithoutLock(other.id);
  await client.del(`${base}:stalled-check`);
  const marks = await bullsweep([...args, 'run']);
  assert.equal(stalledOf(marks).done, 0, marks.stdout);
  assert.deepEqual(await client.smembers(`${base}:stalled`), [other.id]);
  const early = await bullsweep([...args, 'run']);
  assert.deepEqual([stalledOf(early).done, stalledOf(early).skipped.unconfirmed], [0, 1], 'not within the interval of the check that marked it');
  await client.del(`${base}:stalled-check`);
  const taken = await bullsweep([...args, 'run']);
  assert.equal(stalledOf(taken).done, 1, taken.stdout);
  assert.equal(await worker.getJob(other.id), null);
  await worker.close();
  await assertBullWhole(redis, db, spec);
});

// Found by the soak (issue 42): Bull's own stalled check marks every job in `active`, locked or
// not, and only a call that holds its lock (or its next moveToActive) unmarks it. A job marked
// while a worker held it, failed without its lock, retried, and caught between the two calls of its next fetch is marked, unlocked and
// in `active` with its old attempt's processedOn: a check that took it removed a job its worker
// was about to run (the worker then ran a job with no data). And `forget` erased a job a Bull
// worker had just taken the same way.
test('bull: a job Bull\'s check marked while its worker held it, caught in its next fetch, is neither taken as stalled nor erased', async () => {
  const db = 15;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-marked' };
  const base = 'bull:legacy-marked';
  const worker = bullQueue(redis.connection(db), spec);
  const added = await worker.add('flaky', { order: 9, email: 'ada@example.com' }, { attempts: 3 });
  // A worker takes it (both calls) and holds it while Bull's own check runs: marked.
  assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), added.id);
  const job = await worker.moveToActive(added.id);
  await client.del(`${base}:stalled-check`);
  await worker.moveUnlockedJobsToWait();
  assert.deepEqual(await client.smembers(`${base}:stalled`), [added.id], 'Bull marks the held job');
  // The attempt fails without its lock (Bull's `ignoreLock`, as when its lock was lost), and
  // Bull retries it; a worker's first call takes it again.
  await job.moveToFailed(new Error('boom'), true);
  await client.del(`${base}:${added.id}:lock`);
  await sleep(20);
  assert.equal(await client.brpoplpush(`${base}:wait`, `${base}:active`, 1), added.id);
  assert.deepEqual(await client.smembers(`${base}:stalled`), [added.id], 'still marked: no moveToActive yet');

  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'subjects: [{ name: user, paths: [email] }]', 'policies:',
    '  - { name: marked, queueNamePattern: legacy-marked, rules: { stalled: { maxAge: 1ms, action: remove } } }', ''].join('\n'));
  const args = ['--redis', redis.url(db), '--config', file];
  await client.del(`${base}:stalled-check`); // the marking check's interval has passed
  const run = await bullsweep([...args, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const stalled = JSON.parse(run.stdout).queues[0].states.stalled;
  assert.deepEqual([stalled.done, (stalled.skipped || {}).unconfirmed], [0, 1], run.stdout);
  assert.equal(await client.exists(`${base}:${added.id}`), 1, `the job its worker is taking was removed: ${run.stdout}`);
  // The run records what it saw, for a later check: one run by cron a day later still reads it.
  const record = `bullsweep:{${base}}:unlocked:${base}`;
  const [processedOn, attemptsMade] = await client.hmget(`${base}:${added.id}`, 'processedOn', 'attemptsMade');
  assert.equal(await client.hget(record, added.id), `${processedOn}/${attemptsMade}/0`, 'its attempt: processedOn, attemptsMade, stalledCounter');
  assert.ok(await client.pttl(record) > 31 * 24 * 3600 * 1000, 'the record outlives a monthly check');

  const forget = await bullsweep([...args, 'forget', '--subject', 'user=ada@example.com', '--request-id', 'R-1', '--wait-active', '1s']);
  assert.equal(await client.hget(`${base}:${added.id}`, 'data'), JSON.stringify({ order: 9, email: 'ada@example.com' }), `erased while its worker was taking it: ${forget.stdout} ${forget.stderr}`);
  assert.equal(forget.code, 1, `exit 1 while something is pending: ${forget.stderr}`);
  const receipt = JSON.parse(forget.stdout);
  assert.deepEqual(receipt.queues.flatMap((q) => q.pending.map((p) => [p.id, p.state])), [[added.id, 'active']], forget.stdout);

  // The worker's second call: it runs the job, with its data, and finishes it.
  const taken = await worker.moveToActive(added.id);
  assert.deepEqual(taken.data, { order: 9, email: 'ada@example.com' });
  await taken.moveToCompleted('done');
  assert.equal(await (await worker.getJob(added.id)).getState(), 'completed');

  // A job whose worker lost its lock mid-attempt is seen unlocked by a check (marked and
  // recorded); the worker then fails it without its lock, Bull retries it, and a worker's
  // first call takes it again: same processedOn, still marked, but another attempt.
  const lost = await worker.add('flaky', { order: 10 }, { attempts: 3 });
  assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), lost.id);
  const held = await worker.moveToActive(lost.id);
  await sleep(20);
  await client.del(`${base}:${lost.id}:lock`); // its lock expired while it ran
  await client.del(`${base}:stalled-check`);
  const sees = JSON.parse((await bullsweep([...args, '--json', 'run'])).stdout).queues[0].states.stalled;
  assert.deepEqual([sees.done, sees.skipped.unconfirmed], [0, 1], 'seen and marked, not yet taken');
  assert.deepEqual(await client.smembers(`${base}:stalled`), [lost.id]);
  await held.moveToFailed(new Error('boom'), true);
  assert.equal(await client.brpoplpush(`${base}:wait`, `${base}:active`, 1), lost.id);
  await client.del(`${base}:stalled-check`);
  const next = JSON.parse((await bullsweep([...args, '--json', 'run'])).stdout).queues[0].states.stalled;
  assert.deepEqual([next.done, next.skipped.unconfirmed], [0, 1], `a new attempt caught in its fetch was taken: ${JSON.stringify(next)}`);
  const again = await worker.moveToActive(lost.id);
  assert.deepEqual(again.data, { order: 10 });
  await again.moveToCompleted('done');
  await worker.close();
  await assertBullWhole(redis, db, spec);
});

// Found by the soak (issue 42, seed 4242, op 617): a failed job's ttl expired, the producer
// added its id again (a new job; the expired one's id still in `failed`), and "Retry" of it
// from the failed list put the id in the paused list twice. A pending rule's removal took
// one entry and the hash: the other entry was left with no job. Bull's own Job.remove takes
// the id out of every state, as often as it is there; a job also found in `active` (a worker
// taking it) is held.
// "Retry all" of a Bull queue's failed jobs: Bull 4's retryJobs, or on Bull 3 (which has none)
// the same moves by hand, as Bull 4's script makes them (every id in `failed` to the front of
// `wait`, whether its hash is there or not).
async function retryAll(queue, client, base) {
  if (typeof queue.retryJobs === 'function') return queue.retryJobs({ count: 100 });
  for (const id of await client.zrange(`${base}:failed`, 0, -1)) {
    await client.hdel(`${base}:${id}`, 'finishedOn', 'processedOn', 'failedReason');
    await client.lpush(`${base}:wait`, id);
    await client.zrem(`${base}:failed`, id);
  }
}

test('bull: removing a job whose reused id sits in several states leaves none of them, and holds it while a worker takes it', async () => {
  const db = 15;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-reused' };
  const base = 'bull:legacy-reused';
  const queue = bullQueue(redis.connection(db), spec);
  const removePolicy = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    '  - { name: reused, queueNamePattern: legacy-reused, rules: { waiting: { maxAge: 1ms, action: remove } } }', ''].join('\n'));
  const args = (file) => ['--redis', redis.url(db), '--config', file, '--json'];

  // Two orders fail for good, and their hashes go as Redis deletes a hash whose ttl passed
  // (their ids stay in `failed` until a run drops them).
  for (const id of ['order-1', 'order-2']) {
    await queue.add('order', { id }, { jobId: id });
    assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), id);
    const job = await queue.moveToActive(id);
    await job.moveToFailed(new Error('declined'));
  }
  assert.equal(await client.del(`${base}:order-1`, `${base}:order-2`), 2);
  // The producer submits both orders again (new jobs; their old ids still in `failed`),
  // someone presses "Retry all" (Bull's retryJobs moves every id in `failed` to `wait`), and
  // the queue is paused.
  for (const id of ['order-1', 'order-2']) await queue.add('order', { id, again: true }, { jobId: id });
  await retryAll(queue, client, base);
  await queue.pause();
  assert.deepEqual((await client.lrange(`${base}:paused`, 0, -1)).sort(), ['order-1', 'order-1', 'order-2', 'order-2']);
  // A worker's first call takes one entry (it would lock the job in its second call).
  await queue.resume();
  const inActive = await client.rpoplpush(`${base}:wait`, `${base}:active`);
  assert.ok(['order-1', 'order-2'].includes(inActive), String(inActive));
  const other = inActive === 'order-1' ? 'order-2' : 'order-1';

  const run = await bullsweep([...args(removePolicy), 'run']);
  assert.equal(run.code, 0, run.stderr);
  const waiting = JSON.parse(run.stdout).queues[0].states.waiting;
  assert.equal(waiting.done, 1, run.stdout);
  assert.equal(await client.exists(`${base}:${other}`), 0, 'the job no worker holds is removed');
  for (const state of ['wait', 'paused', 'active']) {
    assert.equal(await client.lpos(`${base}:${state}`, other), null, `no entry of ${other} is left in ${state}`);
  }
  for (const state of ['failed', 'completed', 'delayed']) assert.equal(await client.zscore(`${base}:${state}`, other), null);
  // The job a worker is taking keeps its data: the worker's second call runs it.
  assert.equal(await client.hget(`${base}:${inActive}`, 'data'), JSON.stringify({ id: inActive, again: true }), run.stdout);
  const taken = await queue.moveToActive(inActive);
  assert.deepEqual(taken.data, { id: inActive, again: true });
  await taken.moveToCompleted('done');
  await queue.close();
});

test('bull: a waiting rule leaves a delayed job whose reused id also has a stale entry in wait', async () => {
  const db = 13;
  const client = redis.client(db);
  await client.flushdb();
  const base = 'bull:legacy-stale';
  const queue = bullQueue(redis.connection(db), { prefix: 'bull', name: 'legacy-stale' });
  await queue.add('order', { v: 1 }, { jobId: 'o1' });
  assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), 'o1');
  await (await queue.moveToActive('o1')).moveToFailed(new Error('declined'));
  // Redis deletes the failed hash (a ttl), "Retry all" puts its id back in wait, and the
  // producer adds the same id again as a delayed job.
  await client.del(`${base}:o1`);
  await retryAll(queue, client, base);
  await queue.add('order', { v: 2 }, { jobId: 'o1', delay: 3600000, timestamp: Date.now() - 60000 });
  assert.deepEqual([await client.lrange(`${base}:wait`, 0, -1), await client.zrange(`${base}:delayed`, 0, -1)], [['o1'], ['o1']]);
  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    '  - { name: r, queueNamePattern: legacy-stale, rules: { waiting: { maxAge: 1ms, action: remove } } }', ''].join('\n'));
  const run = await bullsweep(['--redis', redis.url(db), '--config', file, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const waiting = JSON.parse(run.stdout).queues[0].states.waiting;
  assert.deepEqual([waiting.done, waiting.skipped.changed], [0, 1], run.stdout);
  assert.equal(await client.hget(`${base}:o1`, 'data'), JSON.stringify({ v: 2 }), 'the delayed job keeps its data');
  assert.deepEqual(await client.zrange(`${base}:delayed`, 0, -1), ['o1']);
  await queue.close();
});

test('bull: forget erases a job whose reused id also has a stale entry in wait, and leaves no entry', async () => {
  const db = 12;
  const client = redis.client(db);
  await client.flushdb();
  const base = 'bull:legacy-erase';
  const queue = bullQueue(redis.connection(db), { prefix: 'bull', name: 'legacy-erase' });
  await queue.add('order', { email: 'ada@example.com', v: 1 }, { jobId: 'o1' });
  assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), 'o1');
  await (await queue.moveToActive('o1')).moveToFailed(new Error('declined'));
  await client.del(`${base}:o1`);
  await retryAll(queue, client, base);
  await queue.add('order', { email: 'ada@example.com', v: 2 }, { jobId: 'o1' });
  assert.deepEqual(await client.lrange(`${base}:wait`, 0, -1), ['o1', 'o1']);
  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'subjects: [{ name: user, paths: [email] }]', 'policies:',
    '  - { name: e, queueNamePattern: "*", rules: { completed: { maxAge: 30d } } }', ''].join('\n'));
  const r = await bullsweep(['--redis', redis.url(db), '--config', file, 'forget', '--subject', 'user=ada@example.com', '--request-id', 'R-9']);
  assert.equal(r.code, 0, `${r.stdout}${r.stderr}`);
  assert.equal(JSON.parse(r.stdout).status, 'erased', r.stdout);
  assert.equal(await client.exists(`${base}:o1`), 0);
  assert.deepEqual(await client.lrange(`${base}:wait`, 0, -1), [], 'no entry is left for a worker to take as a job with no data');
  await queue.close();
});

test('bull: a Bull worker retrying half its jobs beside repeated stalled runs loses no job', async () => {
  const db = 8;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-live' };
  const q = bullQueue(redis.connection(db), spec);
  const total = 1500;
  const errors = [];
  q.on('error', (e) => errors.push(e.message));
  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    '  - { name: live, queueNamePattern: legacy-live, rules: { stalled: { maxAge: 1ms, action: remove } } }', ''].join('\n'));
  for (let i = 0; i < total; i += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, k) => q.add('order', { i: i + k }, { attempts: 3 })));
  }
  // Every other job fails its first attempt: Bull retries it at once, and a worker takes it
  // again in its two calls, with the first attempt's processedOn.
  q.process('*', 8, async (job) => {
    if (job.attemptsMade === 0 && job.data.i % 2 === 0) throw new Error('first attempt fails');
    return { i: job.data.i };
  });
  let runs = 0;
  let removed = 0;
  while ((await q.getCompletedCount()) < total && runs < 400) {
    const r = await bullsweep(['--redis', redis.url(db), '--config', file, '--json', 'run']);
    assert.equal(r.code, 0, r.stderr);
    removed += JSON.parse(r.stdout).queues.reduce((n, x) => n + ((x.states.stalled || {}).done || 0), 0);
    runs += 1;
  }
  await waitFor('every job', async () => (await q.getCompletedCount()) === total, 60000);
  assert.ok(runs >= 3, `runs beside the worker: ${runs}`);
  assert.equal(removed, 0, 'no job a worker held was removed');
  assert.deepEqual(errors.filter((m) => /active state|Missing key|Missing lock/.test(m)), []);
  const counts = await q.getJobCounts();
  assert.deepEqual([counts.active, counts.waiting, counts.failed, counts.delayed], [0, 0, 0, 0]);
  const seen = new Set((await q.getCompleted(0, -1)).map((j) => j.returnvalue.i));
  assert.equal(seen.size, total, 'every job completed with its own data');
  await q.close();
  await assertBullWhole(redis, db, spec);
});

// A Bull queue with a repeatable job and an old delayed job; returns the repeatable job's
// next iteration's id (`repeat:<md5>:<millis>`, due at <millis>).
async function repeatingBull(db, spec) {
  const client = redis.client(db);
  await client.flushdb();
  const q = bullQueue(redis.connection(db), spec);
  await q.add('tick', { n: 1 }, { repeat: { every: 1000 } });
  await q.add('later', { plain: true }, { delay: 3600 * 1000 });
  await q.close();
  const next = (await client.zrange(`${spec.prefix}:${spec.name}:delayed`, 0, -1)).filter((id) => id.startsWith('repeat:'));
  assert.equal(next.length, 1, 'one next iteration');
  await sleep(1100); // both are older than maxAge below
  return next[0];
}

// Opens a BullMQ Queue on the Bull queue's name (as a migration script or a bull-board
// adapter of the wrong kind does): BullMQ writes its meta hash.
async function openBullmqOn(db, spec) {
  const { Queue: MqQueue } = require('../lib/bullmq');
  const mq = new MqQueue(spec.name, { connection: redis.connection(db), prefix: spec.prefix });
  await waitFor('BullMQ\'s meta hash', async () => (await redis.client(db).hget(`${spec.prefix}:${spec.name}:meta`, 'version')) !== null);
  return mq;
}

const delayedMaxAge = () => writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
  '  - { name: ticks, queueNamePattern: "legacy-*", rules: { delayed: { maxAge: 1s } } }', ''].join('\n'));

test('bull: a BullMQ Queue opened on a Bull queue leaves it a Bull queue, and delayed maxAge keeps its repeat chain going', async () => {
  const db = 9;
  const spec = { prefix: 'bull', name: 'legacy-ticks' };
  const base = 'bull:legacy-ticks';
  const client = redis.client(db);
  const next = await repeatingBull(db, spec);
  await (await openBullmqOn(db, spec)).close();
  const args = ['--redis', redis.url(db), '--config', delayedMaxAge(), '--json'];
  const plan = await bullsweep([...args, 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const run = await bullsweep([...args, 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await client.exists(`${base}:${next}`), 1, `the repeat chain's next iteration was removed: ${run.stdout}`);

  const planned = JSON.parse(plan.stdout).queues[0];
  assert.deepEqual([planned.key, planned.backend], [base, 'bull'], 'discovery tells the Bull queue by its data');
  assert.deepEqual([planned.states.delayed.matched, planned.states.delayed.skipped.scheduler], [2, 1], plan.stdout);
  const ran = JSON.parse(run.stdout).queues[0];
  assert.equal(ran.backend, 'bull');
  assert.deepEqual([ran.states.delayed.done, ran.states.delayed.skipped.scheduler], [1, 1], run.stdout);
  assert.deepEqual(await client.zrange(`${base}:delayed`, 0, -1), [next], 'the plain delayed job went');
  const text = await bullsweep(['--redis', redis.url(db), '--config', delayedMaxAge(), 'plan']);
  assert.match(text.stdout, /bull:legacy-ticks \(bull\)/);
  assert.match(text.stdout, /will skip 1 the next iteration of a repeat chain/);
  assert.deepEqual(await streams(client), [], 'no events stream was written');

  // Bull keeps scheduling: a worker runs the iteration, and Bull adds the one after it.
  const q = bullQueue(redis.connection(db), spec);
  const ran2 = [];
  q.process('*', 1, async (job) => { ran2.push(job.id); return 'ticked'; });
  await waitFor('two iterations run', async () => ran2.length >= 2, 15000);
  await q.close();
  assert.equal(ran2[0], next, 'the kept iteration ran');
  const later = (await client.zrange(`${base}:delayed`, 0, -1)).filter((id) => id.startsWith('repeat:'));
  assert.equal(later.length, 1);
  assert.ok(Number(later[0].split(':').pop()) > Number(next.split(':').pop()), `a later iteration is scheduled: ${later}`);
  await assertBullWhole(redis, db, spec, { bullmqMeta: true });
});

test('bull: a queue both Bull and BullMQ used is left alone and named in plan and run', async () => {
  const db = 10;
  const spec = { prefix: 'bull', name: 'legacy-both' };
  const base = 'bull:legacy-both';
  const client = redis.client(db);
  const next = await repeatingBull(db, spec);
  // Bull ranks a prioritized job in its `priority` set, which BullMQ never writes.
  const bq = bullQueue(redis.connection(db), spec);
  await bq.add('urgent', { u: 1 }, { priority: 1, timestamp: Date.now() - 60 * 1000 });
  await bq.close();
  const mq = await openBullmqOn(db, spec);
  await mq.add('modern', { m: 1 }, { delay: 3600 * 1000, timestamp: Date.now() - 60 * 1000 });
  await mq.close();
  const before = await dumpKeyspace(client);
  const args = ['--redis', redis.url(db), '--config', delayedMaxAge()];
  for (const cmd of ['plan', 'run']) {
    const r = await bullsweep([...args, cmd]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /bull:legacy-both: written by both BullMQ and legacy Bull/, `${cmd} warns: ${r.stderr}`);
    assert.match(r.stdout, /unmanaged \(never touched\): bull:legacy-both: written by both BullMQ and legacy Bull/, r.stdout);
  }
  const json = JSON.parse((await bullsweep([...args, '--json', 'plan'])).stdout);
  assert.deepEqual([json.queues, json.unmanaged], [[], [base]]);
  const after = await dumpKeyspace(client);
  for (const k of Object.keys(after)) if (k.startsWith('bullsweep:')) delete after[k];
  assert.deepEqual(after, before, 'nothing was changed');
  assert.ok(`${base}:${next}` in after);
});

// Issue 42 (red team, F1): a BullMQ Queue opened on a Bull queue that has plain jobs (no
// pause, no priority, no repeat) left it judged BullMQ's, so `stalled: remove` took BullMQ's
// single look and removed a retried job a Bull worker had moved to active but not yet locked;
// its `removed` events then made an events stream, which marked the queue BullMQ's for good.
// Bull's first call is made here by hand, as in the break-4 test above.
test('bull: a BullMQ Queue opened on a Bull queue with plain jobs leaves it Bull\'s: stalled remove keeps a job a Bull worker is taking, and no events stream is made', async () => {
  const db = 11;
  const client = redis.client(db);
  await client.flushdb();
  const spec = { prefix: 'bull', name: 'legacy-race' };
  const base = 'bull:legacy-race';
  const worker = bullQueue(redis.connection(db), spec);
  const added = await worker.add('order', { n: 1 }, { attempts: 3 });
  // Its first attempt fails; Bull retries it at once, back to `wait`.
  assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), added.id);
  const first = await worker.moveToActive(added.id);
  await first.moveToFailed(new Error('first attempt'));
  await client.del(`${base}:${added.id}:lock`); // Bull 3 keeps it until it expires
  await (await openBullmqOn(db, spec)).close();
  assert.equal(await client.exists(`${base}:events`), 0);
  await sleep(20); // its first attempt's processedOn is older than maxAge
  // Bull's first call: in `active`, unlocked, with the first attempt's processedOn.
  assert.equal(await client.brpoplpush(`${base}:wait`, `${base}:active`, 1), added.id);
  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    '  - { name: race, queueNamePattern: legacy-race, rules: { stalled: { maxAge: 1ms, action: remove }, completed: { maxAge: 1ms } } }', ''].join('\n'));
  const args = ['--redis', redis.url(db), '--config', file, '--json'];
  const plan = await bullsweep([...args, 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const run = await bullsweep([...args, 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await client.exists(`${base}:${added.id}`), 1, `the job a Bull worker is taking was removed: ${run.stdout}`);
  assert.deepEqual(JSON.parse(plan.stdout).queues.map((q) => [q.key, q.backend]), [[base, 'bull']], `told by its data: ${plan.stdout}`);
  assert.equal(JSON.parse(run.stdout).queues[0].states.stalled.done, 0, run.stdout);
  assert.deepEqual(await client.lrange(`${base}:active`, 0, -1), [added.id]);

  // Bull's second call locks it, and the worker completes it; a run then removes it as
  // Bull's clean does, with no event.
  const job = await worker.moveToActive(added.id);
  assert.equal(job.id, added.id);
  await job.moveToCompleted('shipped');
  assert.equal((await worker.getJob(added.id)).returnvalue, 'shipped');
  await sleep(20);
  const swept = await bullsweep([...args, 'run']);
  assert.equal(swept.code, 0, swept.stderr);
  assert.equal(JSON.parse(swept.stdout).queues[0].states.completed.done, 1, swept.stdout);
  assert.equal(await worker.getJob(added.id), null);
  assert.deepEqual(await streams(client), [], 'bullsweep made no events stream');
  const again = JSON.parse((await bullsweep([...args, 'plan'])).stdout);
  assert.equal(again.queues[0].backend, 'bull', 'and the queue is still Bull\'s');
  await worker.close();
  await assertBullWhole(redis, db, spec, { bullmqMeta: true });
});

// Issue 42 (red team, F1 and F5): which library a base with BullMQ's meta belongs to, by what
// each library writes when it is used: Bull's jobs without an events stream, BullMQ's events
// stream (written by every add, custom ids and trimmed streams too, in BullMQ 6.7 and 5.81),
// and Bull's pause stamp only where it is a string (a BullMQ job may have the id `meta-paused`).
test('bull: discovery tells Bull\'s and BullMQ\'s queues by what each writes when used, not by meta alone', async () => {
  const db = 12;
  const client = redis.client(db);
  await client.flushdb();
  const connection = redis.connection(db);
  const bull = { prefix: 'bull', name: 'legacy-plain' };
  const bq = bullQueue(connection, bull);
  for (let i = 0; i < 3; i++) await bq.add('order', { i });
  await bq.close();
  await (await openBullmqOn(db, bull)).close();
  const opened = [];
  const open = (pkg, name, opts = {}) => {
    const q = new (require(pkg).Queue)(name, { connection, ...opts });
    opened.push(q);
    return q;
  };
  // A fresh BullMQ queue (no job yet): BullMQ's, as its meta says.
  await open('bullmq', 'mq-fresh').waitUntilReady();
  await waitFor('the fresh queue\'s meta', async () => (await client.exists('bull:mq-fresh:meta')) === 1);
  for (const pkg of ['bullmq', 'bullmq5']) {
    // Only custom ids, and an events stream trimmed to nothing.
    const q = open(pkg, `${pkg}-custom`, { streams: { events: { maxLen: 0 } } });
    for (let i = 0; i < 3; i++) await q.add('order', { i }, { jobId: `order-${i}` });
    await q.trimEvents(0);
    assert.equal(await client.xlen(`bull:${pkg}-custom:events`), 0);
    // Custom ids named like Bull's stamps: hashes, not Bull's string and sorted set.
    const s = open(pkg, `${pkg}-stamps`);
    for (const jobId of ['meta-paused', 'priority']) await s.add('odd', {}, { jobId });
  }
  for (const q of opened) await q.close();
  const file = writePolicy('version: 1\ndiscovery:\n  layouts: ["bull:{queue}"]\npolicies:\n  - { name: all, queueNamePattern: "*", rules: { completed: { maxAge: 30d } } }\n');
  const plan = await bullsweep(['--redis', redis.url(db), '--config', file, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const json = JSON.parse(plan.stdout);
  const seen = Object.fromEntries(json.queues.map((q) => [q.key, q.backend]));
  assert.deepEqual(seen, {
    'bull:legacy-plain': 'bull',
    'bull:mq-fresh': 'bullmq',
    'bull:bullmq-custom': 'bullmq',
    'bull:bullmq-stamps': 'bullmq',
    'bull:bullmq5-custom': 'bullmq',
    'bull:bullmq5-stamps': 'bullmq',
  }, plan.stdout);
  assert.deepEqual(json.unmanaged, [], plan.stdout);
  assert.doesNotMatch(plan.stderr, /written by both/);
});

// The events stream is BullMQ's own sign of use, so bullsweep never makes one: on a queue it
// governs as BullMQ's whose stream is gone (deleted by hand here; a Bull queue with BullMQ's
// meta judged before Bull added a job is the case that matters), its removals add no event.
test('bull: bullsweep never makes an events stream, even on a queue it governs as BullMQ\'s', async () => {
  const db = 13;
  const client = redis.client(db);
  await client.flushdb();
  const { Queue: MqQueue, Worker: MqWorker } = require('../lib/bullmq');
  const connection = redis.connection(db);
  const mq = new MqQueue('modern-bare', { connection });
  let done = 0;
  const w = new MqWorker('modern-bare', async () => 'ok', { connection });
  w.on('completed', () => { done += 1; });
  for (let i = 0; i < 5; i++) await mq.add('order', { i });
  await waitFor('the jobs complete', async () => done === 5);
  await w.close();
  // A prioritized job waits: `prioritized` and `pc` are BullMQ's signs beside the stream.
  await mq.add('urgent', {}, { priority: 3 });
  await client.del('bull:modern-bare:events');
  const file = writePolicy('version: 1\npolicies:\n  - { name: all, queueNamePattern: "*", rules: { completed: { maxAge: 1ms } } }\n');
  await sleep(20);
  const run = await bullsweep(['--redis', redis.url(db), '--config', file, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const ran = JSON.parse(run.stdout).queues[0];
  assert.deepEqual([ran.key, ran.backend, ran.states.completed.done], ['bull:modern-bare', 'bullmq', 5], run.stdout);
  assert.equal(await mq.getCompletedCount(), 0);
  assert.deepEqual(await streams(client), [], 'no events stream was made');
  assert.equal(await mq.getPrioritizedCount(), 1);
  await mq.close();
});

// Issue 42, follow-up (invariant 117): `plan --queue legacy2` said "will skip 1 not confirmed
// stalled" and then "Plan: 1 job to act on (retry 1)"; the run did none. A plan's summary,
// table and `toActOn` leave out what it says a run will skip: Bull stalled jobs no check has
// confirmed yet, and a repeat chain's next iteration.
test('bull: plan counts only the stalled jobs and delayed jobs a run acts on, as the run does (issue 42, invariant 117)', async () => {
  const db = 14;
  const client = redis.client(db);
  const ticks = { prefix: 'bull', name: 'legacy-ticks' };
  await repeatingBull(db, ticks); // flushes the database
  const spec = { prefix: 'bull', name: 'legacy-stuck' };
  const base = 'bull:legacy-stuck';
  const worker = bullQueue(redis.connection(db), spec);
  const added = await worker.add('flaky', { order: 1 }, { attempts: 3 });
  // One attempt fails and is retried; a worker then takes the job without locking it yet
  // (Bull's first call): it sits in `active`, unlocked, with the failed attempt's processedOn.
  assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), added.id);
  await (await worker.moveToActive(added.id)).moveToFailed(new Error('boom'));
  await client.del(`${base}:${added.id}:lock`);
  await sleep(20);
  assert.equal(await client.rpoplpush(`${base}:wait`, `${base}:active`), added.id);
  const file = writePolicy(['version: 1', 'discovery:', '  layouts: ["bull:{queue}"]', 'policies:',
    '  - { name: stuck, queueNamePattern: legacy-stuck, rules: { stalled: { maxAge: 1ms, action: retry } } }',
    '  - { name: ticks, queueNamePattern: legacy-ticks, rules: { delayed: { maxAge: 1s } } }', ''].join('\n'));
  const args = ['--redis', redis.url(db), '--config', file];
  // Each step: the plan, then the run it plans, agree job for job, state by state.
  const step = async (what, want) => {
    const text = await bullsweep([...args, 'plan']);
    const planned = JSON.parse((await bullsweep([...args, '--json', 'plan'])).stdout);
    const run = await bullsweep([...args, 'run']);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(summaryOf(run.stdout), want, `${what}: ${run.stdout}`);
    assert.deepEqual(summaryOf(text.stdout), summaryOf(run.stdout), `${what}: the plan's summary is the run's: ${text.stdout}`);
    return { text: text.stdout, planned };
  };
  // The first run is a stalled check that marks the job; the next iteration of the repeat
  // chain stays, the plain delayed job goes.
  const first = await step('a check marks it', { total: 1, by: { remove: 1 } });
  assert.match(first.text, /legacy-stuck stalled: will skip 1 not confirmed stalled/, first.text);
  assert.match(first.text, /legacy-ticks delayed: will skip 1 the next iteration of a repeat chain/, first.text);
  assert.match(first.text, /bull:legacy-stuck \(bull\) +- +- +stuck +stalled +1 +1 +retry +0 +1 +│/, first.text);
  const stalled = first.planned.queues.find((q) => q.queue === 'legacy-stuck').states.stalled;
  const delayed = first.planned.queues.find((q) => q.queue === 'legacy-ticks').states.delayed;
  assert.deepEqual([stalled.matched, stalled.toActOn, stalled.skipped.unconfirmed], [1, 0, 1]);
  assert.deepEqual([delayed.matched, delayed.toActOn, delayed.skipped.scheduler], [2, 1, 1]);
  // Within the interval of the check that marked it, still not confirmed.
  await step('too soon for another check', { total: 0, by: {} });
  // One interval on, the next check confirms it: planned, then retried.
  await client.del(`${base}:stalled-check`);
  await step('the next check', { total: 1, by: { retry: 1 } });
  assert.deepEqual(await client.lrange(`${base}:wait`, 0, -1), [added.id], 'back to wait, as Bull retries it');
  await worker.close();
});
