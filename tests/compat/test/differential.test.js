// Differential test: BullMQ's Queue.clean on one database, `bullsweep run` with the equivalent
// policy on an identical copy; the two keyspaces must be identical (streams excluded), and
// BullMQ's own API must find the swept queues consistent.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue } = require('../lib/bullmq');
const { startRedis, dumpKeyspace, copyDatabase, bullsweep, writePolicy, sleep } = require('../lib/harness');
const { build, QUEUES, LAYOUTS } = require('../lib/dataset');
const { assertConsistent } = require('../lib/consistency');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

function policy(rules) {
  return [
    'version: 1',
    'discovery:',
    '  layouts:',
    ...LAYOUTS.map((l) => `    - "${l}"`),
    'policies:',
    `  - { name: everything, queueNamePattern: "*", rules: ${rules} }`,
    '',
  ].join('\n');
}

async function cleanWithBullMQ(db, grace, limitFor) {
  for (const { prefix, name } of [...QUEUES].sort((a, b) => `${a.prefix}:${a.name}`.localeCompare(`${b.prefix}:${b.name}`))) {
    const q = new Queue(name, { connection: redis.connection(db), prefix });
    for (const state of ['completed', 'failed']) {
      await q.clean(grace, limitFor ? await limitFor(q, state) : 0, state);
    }
    await q.close();
  }
}

test('bullsweep run leaves the same keyspace as Queue.clean(0, 0)', async () => {
  const admin = redis.client(0);
  await admin.flushall();
  await build(redis.connection(0));
  await copyDatabase(admin, 0, 1);
  await sleep(20); // every finished job is now older than maxAge below
  const before = await dumpKeyspace(redis.client(1));

  await cleanWithBullMQ(0, 0);
  const run = await bullsweep(['--redis', redis.url(1), '--config', writePolicy(policy('{ completed: { maxAge: 1ms }, failed: { maxAge: 1ms } }')), '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);

  const expected = await dumpKeyspace(redis.client(0));
  const actual = await dumpKeyspace(redis.client(1));
  assert.deepEqual(actual, expected);

  // The comparison is not vacuous: jobs, sub-keys, parents and dedup keys went away.
  const gone = Object.keys(before).filter((k) => !(k in actual));
  assert.ok(gone.some((k) => k.endsWith(':logs')), 'logs removed');
  assert.ok(gone.some((k) => k.endsWith(':processed')), 'a parent\'s :processed removed');
  assert.ok(gone.some((k) => k.includes(':de:')), 'a dedup key removed');
  assert.ok(gone.some((k) => k.startsWith('bull:emails:order:2024:')), 'custom ids with colons removed');
  assert.ok(gone.some((k) => k.includes(':repeat:tick:')), 'scheduler iterations removed');
  assert.ok('bull:acme:prod:billing:held-by-worker:lock' in actual, 'the locked active job is untouched');
  assert.ok(await redis.client(1).exists('bullsweep:audit:head'), 'the run was audited');
  const report = JSON.parse(run.stdout);
  const done = report.queues.flatMap((q) => Object.values(q.states)).reduce((n, s) => n + s.done, 0);
  assert.ok(done > 150, `bullsweep removed ${done} jobs`);

  await assertConsistent(redis, 1, QUEUES);
});

test('action: archive (detach, write, verify, drop) leaves the same keyspace as Queue.clean(0, 0), with a copy of every job it took', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const admin = redis.client(0);
  await admin.flushall();
  await build(redis.connection(0));
  await copyDatabase(admin, 0, 1);
  await sleep(20);
  const before = await dumpKeyspace(redis.client(1));
  await cleanWithBullMQ(0, 0);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-diff-archive-'));
  const text = policy('{ completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } }')
    .replace('policies:', `archive: { url: "file://${dir}" }\npolicies:`);
  const config = writePolicy(text);
  const run = await bullsweep(['--redis', redis.url(1), '--config', config, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(await dumpKeyspace(redis.client(1)), await dumpKeyspace(redis.client(0)));
  const staged = await redis.client(1).keys('bullsweep:*stag*');
  assert.deepEqual(staged, [], 'no staged key is left');

  // Every job hash that went has its copy, field for field; parents taken along say so.
  const ls = await bullsweep(['--config', config, '--json', 'archive', 'ls']);
  assert.equal(ls.code, 0, ls.stderr);
  const records = [];
  for (const m of ls.stdout.trim().split('\n').map((l) => JSON.parse(l))) {
    const cat = await bullsweep(['--config', config, 'archive', 'cat', m.segment]);
    assert.equal(cat.code, 0, cat.stderr);
    records.push(...cat.stdout.trim().split('\n').map((l) => JSON.parse(l)));
  }
  const copies = new Map(records.map((r) => [`${r.queue}:${r.id}`, r]));
  const after = await dumpKeyspace(redis.client(1));
  const json = ['data', 'returnvalue', 'stacktrace'];
  let checked = 0;
  for (const [key, { type, value }] of Object.entries(before)) {
    if (key in after || type !== 'hash' || value.timestamp === undefined) continue;
    const copy = copies.get(key);
    assert.ok(copy, `${key} went without a copy`);
    assert.deepEqual(Object.keys(copy.fields).sort(), Object.keys(value).sort(), key);
    for (const [field, text] of Object.entries(value)) {
      const stored = copy.fields[field];
      if (json.includes(field) && !(copy.textFields || []).includes(field)) {
        assert.deepEqual(stored, JSON.parse(text), `${key} ${field}`);
      } else {
        assert.equal(stored, text, `${key} ${field}`);
      }
    }
    checked += 1;
  }
  assert.ok(checked > 150, `${checked} copies checked`);
  assert.ok(records.some((r) => r.role === 'parentRemoved' && r.state === 'waiting-children'), 'a parent taken along is archived with its role');
  await assertConsistent(redis, 1, QUEUES);
});

test('maxCount keeps the newest N exactly like Queue.clean(0, total - N)', async () => {
  const admin = redis.client(0);
  await admin.flushall();
  await build(redis.connection(0));
  await copyDatabase(admin, 0, 1);
  await sleep(20);
  const keep = 7;
  await cleanWithBullMQ(0, 0, async (q, state) => Math.max(0, (await q.getJobCountByTypes(state)) - keep) || -1);
  const run = await bullsweep(['--redis', redis.url(1), '--config', writePolicy(policy(`{ completed: { maxCount: ${keep} }, failed: { maxCount: ${keep} } }`)), 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(await dumpKeyspace(redis.client(1)), await dumpKeyspace(redis.client(0)));
  for (const { prefix, name } of QUEUES) {
    const q = new Queue(name, { connection: redis.connection(1), prefix });
    const counts = await q.getJobCounts('completed', 'failed');
    assert.ok(counts.completed <= keep && counts.failed <= keep, `${prefix}:${name} ${JSON.stringify(counts)}`);
    await q.close();
  }
  await assertConsistent(redis, 1, QUEUES);
});
