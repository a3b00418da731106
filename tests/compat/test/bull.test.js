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
  const run = await bullsweep(['--redis', redis.url(1), '--config', policy('{ waiting: { maxAge: 1ms }, delayed: { maxAge: 1ms } }'), '--json', 'run']);
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
  // Never into a queue of the other library: `legacy:reports` turned into a BullMQ queue.
  await client.hset('legacy:reports:meta', 'opts.maxLenEvents', '10000');
  const across = await bullsweep([...args, 'archive', 'restore', 'legacy:reports', other, '--as', 'original']);
  assert.equal(across.code, 2, across.stderr);
  assert.match(across.stderr, /written by bull and legacy:reports is now a bullmq queue; nothing restored/);
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
  const run = await bullsweep(['--redis', redis.url(db), '--config', file, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const states = JSON.parse(run.stdout).queues[0].states;
  assert.deepEqual([states.completed.done, states.stalled.done], [3, 1], run.stdout);

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
  // The team moves the queue to BullMQ in place: BullMQ writes its meta and events stream.
  await client.del('bull:legacy-moving:wait', 'bull:legacy-moving:1', 'bull:legacy-moving:stalled-check');
  const { Queue: MqQueue, Worker: MqWorker } = require('../lib/bullmq');
  const mq = new MqQueue('legacy-moving', { connection: redis.connection(db) });
  await waitFor('the daemon takes it again as BullMQ', async () => d.log().includes('bull:legacy-moving: now a bullmq queue; taking its events again'), 20000);
  await waitFor('reading its stream', async () => d.log().includes('bull:legacy-moving: reading events from'));
  let done = 0;
  const w = new MqWorker('legacy-moving', async () => 'ok', { connection: redis.connection(db) });
  w.on('completed', () => { done += 1; });
  for (let i = 0; i < 20; i++) await mq.add('new', { i });
  await waitFor('the jobs complete', async () => done >= 20);
  await waitFor('removed as their events arrive', async () => (await mq.getCompletedCount()) === 0, 15000);
  assert.ok(!d.log().includes('Invalid stream ID'), d.log());
  await w.close();
  await mq.close();
  assert.equal((await d.kill('SIGTERM')).code, 0, d.log());
});
