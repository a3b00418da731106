// Source-linked cleanup against a real PostgreSQL, judged by real BullMQ 6.7: a source whose
// answer names keys it was not asked about (a `char(n)` column's blanks) acts on nothing and
// says why; one job whose key PostgreSQL refuses (a NUL byte, a value the query cannot cast)
// is left alone and counted, and the rest of its batch is governed.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue } = require('../lib/bullmq');
const { startRedis, bullsweep, writePolicy } = require('../lib/harness');
const { startPostgres } = require('../lib/postgres');
const { assertConsistent } = require('../lib/consistency');

let redis;
let pg;
before(async () => {
  redis = await startRedis();
  pg = await startPostgres();
});
after(async () => {
  await pg.stop();
  redis.stop();
});

// A policy removing `remind` jobs of queue `reminders` once source `orders` (`query`, keys
// at data.key) says their record is gone.
function policy(query) {
  return writePolicy([
    'version: 1',
    'sources:',
    `  orders: { postgres: { url: "${pg.url}", query: "${query}", timeout: 5s } }`,
    'policies:',
    '  - name: reminders',
    '    queueNamePattern: reminders',
    '    jobs: [{ name: remind, source: { name: orders, key: data.key }, keepFor: 1ms }]',
    '',
  ].join('\n'));
}

// Adds one waiting `remind` job per key; resolves the jobs.
async function remind(queue, keys) {
  return queue.addBulk(keys.map((key) => ({ name: 'remind', data: { key } })));
}

// `bullsweep --json <command>` on database `db`: the exit code, stderr and the report.
async function sweep(db, file, command) {
  const out = await bullsweep(['--redis', redis.url(db), '--config', file, '--json', command]);
  return { ...out, report: out.stdout ? JSON.parse(out.stdout) : null };
}

const waiting = (report) => report.queues.find((q) => q.key === 'bull:reminders').states['waiting:source'];
const ids = async (queue) => (await queue.getWaiting(0, -1)).map((j) => j.id).sort();

test('a char(n) key column whose answers name keys not asked acts on nothing and names the source and a key', async () => {
  const db = 1;
  const queue = new Queue('reminders', { connection: redis.connection(db) });
  // Codes c1…c200, every one of them still in the table, as char(6): PostgreSQL pads them.
  const keys = Array.from({ length: 200 }, (_, i) => `c${i + 1}`);
  await pg.sql('CREATE TABLE codes (code char(6) PRIMARY KEY)');
  await pg.sql('INSERT INTO codes SELECT unnest($1::text[])', [keys]);
  const jobs = await remind(queue, keys);
  const before = await ids(queue);
  const file = policy('SELECT code AS key FROM codes WHERE code = ANY($1)');

  for (const command of ['plan', 'run']) {
    const out = await sweep(db, file, command);
    assert.equal(out.code, 1, `${command}: ${out.stderr}`);
    assert.ok(out.stderr.includes('a source could not be asked: 200 jobs'), out.stderr);
    const state = waiting(out.report);
    assert.equal(state.matched, 0, `${command}: ${JSON.stringify(state)}`);
    assert.equal(state.skipped.sourceUnavailable, 200, JSON.stringify(state));
    const reason = state.skipped.reasons.find((r) => r.includes('source orders'));
    assert.ok(reason, JSON.stringify(state.skipped));
    assert.ok(reason.includes('not asked about') && reason.includes('padded with blanks'), reason);
    assert.match(reason, /e\.g\. "c\d+ +"/, 'an example key, its blanks shown');
    assert.ok(reason.includes('rtrim(code)'), reason);
  }
  assert.deepEqual(await ids(queue), before, 'every job stays');
  for (const j of jobs.slice(0, 3)) assert.deepEqual((await queue.getJob(j.id)).data, j.data);

  // As the hint says: the key without its blanks. Every record exists, so nothing goes;
  // once 50 are deleted, exactly their jobs go.
  const fixed = policy('SELECT rtrim(code) AS key FROM codes WHERE rtrim(code) = ANY($1)');
  const none = await sweep(db, fixed, 'run');
  assert.equal(none.code, 0, none.stderr);
  assert.equal(waiting(none.report).done, 0);
  await pg.sql('DELETE FROM codes WHERE code = ANY($1)', [keys.slice(0, 50)]);
  const plan = await sweep(db, fixed, 'plan');
  assert.equal(waiting(plan.report).matched, 50);
  const run = await sweep(db, fixed, 'run');
  assert.equal(run.code, 0, run.stderr);
  assert.equal(waiting(run.report).done, 50);
  const gone = new Set(jobs.slice(0, 50).map((j) => j.id));
  assert.deepEqual(await ids(queue), before.filter((id) => !gone.has(id)));
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'reminders' }]);
  await queue.close();
});

test('a NUL byte in one job\'s key leaves that job alone, counted, and the rest of its batch is governed', async () => {
  const db = 2;
  const queue = new Queue('reminders', { connection: redis.connection(db) });
  // Orders o1…o199: o1…o100 exist, o101…o199 are gone; one job's key holds a NUL byte.
  const keys = Array.from({ length: 199 }, (_, i) => `o${i + 1}`);
  await pg.sql('CREATE TABLE orders (id text PRIMARY KEY)');
  await pg.sql('INSERT INTO orders SELECT unnest($1::text[])', [keys.slice(0, 100)]);
  const jobs = await remind(queue, [...keys, 'o\u0000200']);
  const nul = jobs[199];
  assert.ok((await redis.client(db).hget(`bull:reminders:${nul.id}`, 'data')).includes('\\u0000'));
  const file = policy('SELECT id AS key FROM orders WHERE id = ANY($1)');

  const plan = await sweep(db, file, 'plan');
  assert.equal(plan.code, 0, plan.stderr);
  assert.equal(waiting(plan.report).matched, 99);
  for (let i = 0; i < 2; i++) {
    const run = await sweep(db, file, 'run');
    assert.equal(run.code, 0, run.stderr);
    const state = waiting(run.report);
    assert.equal(state.done, i === 0 ? 99 : 0, JSON.stringify(state));
    assert.equal(state.skipped.refusedSourceKey, 1, JSON.stringify(state));
    assert.equal(state.skipped.sourceUnavailable, undefined, JSON.stringify(state));
    assert.ok(state.skipped.reasons.some((r) => r.includes('source orders whose key it refuses')
      && r.includes('"o\\0200"') && r.includes('NUL byte')), JSON.stringify(state.skipped));
  }
  const left = new Set(await ids(queue));
  assert.deepEqual([...left].sort(), [...jobs.slice(0, 100), nul].map((j) => j.id).sort());
  assert.deepEqual((await queue.getJob(nul.id)).data, { key: 'o\u0000200' }, 'the NUL job is untouched');

  // The table names the reason too.
  const table = await bullsweep(['--redis', redis.url(db), '--config', file, 'plan']);
  assert.ok(table.stdout.includes('whose key it refuses, e.g. "o\\0200"'), table.stdout);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'reminders' }]);
  await queue.close();
});

test('a key the query cannot cast is found by asking in halves, refused alone, and the batch is governed', async () => {
  const db = 3;
  const queue = new Queue('reminders', { connection: redis.connection(db) });
  // Numeric order ids 1…100 (1…50 exist) and one key that is no number.
  const keys = Array.from({ length: 100 }, (_, i) => String(i + 1));
  await pg.sql('CREATE TABLE numbered (id bigint PRIMARY KEY)');
  await pg.sql('INSERT INTO numbered SELECT generate_series(1, 50)');
  const jobs = await remind(queue, [...keys.slice(0, 60), 'abc', ...keys.slice(60)]);
  const file = policy('SELECT id::text AS key FROM numbered WHERE id = ANY($1::bigint[])');
  const run = await sweep(db, file, 'run');
  assert.equal(run.code, 0, run.stderr);
  const state = waiting(run.report);
  assert.equal(state.done, 50, JSON.stringify(state));
  assert.equal(state.skipped.refusedSourceKey, 1, JSON.stringify(state));
  assert.ok(state.skipped.reasons.some((r) => r.includes('"abc"') && r.includes('invalid input syntax')), JSON.stringify(state.skipped));
  const bad = jobs.find((j) => j.data.key === 'abc');
  assert.deepEqual(await ids(queue), [...jobs.filter((j) => Number(j.data.key) <= 50), bad].map((j) => j.id).sort());

  // A query that fails whatever it is asked blames no key: the batch acts on nothing.
  const broken = policy('SELECT id::text AS key FROM numbered WHERE id = ANY($1::bigint[]) AND 1 / 0 = 1');
  const out = await sweep(db, broken, 'run');
  assert.equal(out.code, 1, out.stderr);
  const failed = waiting(out.report);
  assert.equal(failed.skipped.sourceUnavailable, 51, JSON.stringify(failed));
  assert.equal(failed.skipped.refusedSourceKey, undefined, JSON.stringify(failed));
  assert.ok(failed.skipped.reasons.some((r) => r.includes('division by zero')), JSON.stringify(failed));
  assert.equal((await ids(queue)).length, 51);
  await queue.close();
});
