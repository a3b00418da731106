// BullMQ on PostgreSQL (BullMQ 6.7's own backend, on a private PostgreSQL): bullsweep's run
// on one copy of a database leaves every BullMQ table as Queue.clean leaves the other copy,
// its plan changes nothing and says what the run does, a job a worker holds is never touched,
// and a schema it does not know is refused with exit 2.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Client } = require('pg');
const { startPostgres } = require('../lib/postgres');
const { migrate, dump } = require('../lib/bullmq_pg');
const { build, buildPending, QUEUES, until } = require('../lib/bullmq_pg_dataset');
const { Queue, Worker } = require('bullmq');
const { bullsweep, writePolicy, sleep, startDaemon, stopDaemons, waitFor } = require('../lib/harness');

let pg;
before(async () => { pg = await startPostgres(); });
after(async () => { stopDaemons(); await pg.stop(); });

const urlOf = (db) => pg.url.replace(/\/[^/?]*(\?|$)/, `/${db}$1`);

async function withDb(db, f) {
  const client = new Client({ connectionString: urlOf(db) });
  await client.connect();
  try { return await f((text, params) => client.query(text, params)); } finally { await client.end(); }
}

// A migrated database holding the dataset, and `copies` identical copies of it.
async function dataset(name, copies) {
  await pg.sql(`CREATE DATABASE ${name}`);
  await migrate(urlOf(name));
  await build(urlOf(name));
  for (const c of copies) await pg.sql(`CREATE DATABASE ${c} TEMPLATE ${name}`);
}

const POLICY = writePolicy([
  'version: 1',
  'policies:',
  '  - { name: everything, queueNamePattern: "*", rules: { completed: { maxAge: 1ms }, failed: { maxAge: 1ms } } }',
  '',
].join('\n'));

test('bullsweep run leaves every BullMQ table as Queue.clean(0, 0) leaves it', async () => {
  await dataset('d1', ['d1_clean', 'd1_sweep']);
  await sleep(20);
  const before = await withDb('d1_sweep', (sql) => dump(sql));

  const plan = await bullsweep(['--postgres', urlOf('d1_sweep'), '--config', POLICY, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  assert.deepEqual(await withDb('d1_sweep', (sql) => dump(sql)), before, 'a plan changes nothing');

  for (const name of QUEUES) {
    const q = new Queue(name, { connection: urlOf('d1_clean') });
    for (const state of ['completed', 'failed']) await q.clean(0, 0, state);
    await q.close();
  }
  const run = await bullsweep(['--postgres', urlOf('d1_sweep'), '--config', POLICY, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);

  const expected = await withDb('d1_clean', (sql) => dump(sql));
  const actual = await withDb('d1_sweep', (sql) => dump(sql));
  assert.deepEqual(actual, expected);

  // Not vacuous: finished jobs, their logs and dependency rows went; a parent in the same
  // queue was removed and one in another queue released; the live jobs stayed.
  assert.ok(before.job.length - actual.job.length > 40, `${before.job.length} → ${actual.job.length} jobs`);
  assert.ok(actual.job_log.length < before.job_log.length, 'logs removed');
  assert.ok(actual.job_dependency.length < before.job_dependency.length, 'dependency rows removed');
  assert.ok(!actual.job.some((j) => j.queue === 'mail' && j.name === 'batch'), 'the same-queue parent removed');
  const summary = actual.job.find((j) => j.queue === 'reports' && j.name === 'summary');
  assert.equal(summary && summary.state, 'waiting', 'the other queue\'s parent released');
  for (const live of ['delayed', 'waiting']) {
    assert.ok(actual.job.some((j) => j.state === live), `${live} jobs kept`);
  }
  assert.ok(!actual.job.some((j) => j.state === 'completed' || j.state === 'failed'));

  // The plan said what the run did, and every removal is in the audit trail.
  const planned = JSON.parse(plan.stdout).queues;
  const done = JSON.parse(run.stdout).queues;
  for (const q of planned) {
    const d = done.find((x) => x.key === q.key);
    assert.equal(q.backend, 'bullmq-postgres');
    for (const [state, s] of Object.entries(q.states)) assert.equal(d.states[state].done, s.toActOn, `${q.key} ${state}`);
  }
  const counts = await withDb('d1_clean', async () => {
    const q = new Queue('orders', { connection: urlOf('d1_sweep') });
    const c = await q.getJobCounts();
    await q.close();
    return c;
  });
  assert.equal(counts.completed + counts.failed, 0, 'BullMQ counts no finished job');
  assert.ok(counts.delayed >= 1 && counts.prioritized === 1, JSON.stringify(counts));
});

test('a finished job a worker still holds is never removed, and the plan counts what the run removes', async () => {
  await dataset('d2', []);
  await sleep(20);
  const held = await withDb('d2', async (sql) => {
    const { rows } = await sql("UPDATE bullmq.job SET lock_token = 'w1', locked_until_ms = (extract(epoch from now()) * 1000)::bigint + 600000 WHERE id = (SELECT id FROM bullmq.job WHERE queue = 'orders' AND state = 'completed' ORDER BY id LIMIT 1) RETURNING id");
    return rows[0].id;
  });
  const plan = await bullsweep(['--postgres', urlOf('d2'), '--config', POLICY, '--json', 'plan', '--queue', 'orders']);
  assert.equal(plan.code, 0, plan.stderr);
  const run = await bullsweep(['--postgres', urlOf('d2'), '--config', POLICY, '--json', 'run', '--queue', 'orders']);
  assert.equal(run.code, 0, run.stderr);
  const left = await withDb('d2', (sql) => sql("SELECT id, state FROM bullmq.job WHERE queue = 'orders' AND state IN ('completed', 'failed')"));
  assert.deepEqual(left.rows, [{ id: held, state: 'completed' }]);
  const p = JSON.parse(plan.stdout).queues[0].states;
  const r = JSON.parse(run.stdout).queues[0].states;
  assert.equal(r.completed.done, p.completed.toActOn);
  assert.ok(r.completed.done > 0);
});

test('maxCount keeps the newest jobs in BullMQ\'s own retention order', async () => {
  await dataset('d3', []);
  const keep = writePolicy('version: 1\npolicies:\n  - { name: keep, queueNamePattern: "*", rules: { completed: { maxCount: 3 } } }\n');
  const expected = await withDb('d3', (sql) => sql("SELECT id FROM bullmq.job WHERE queue = 'orders' AND state = 'completed' ORDER BY finished_at_ms DESC, seq DESC LIMIT 3"));
  const run = await bullsweep(['--postgres', urlOf('d3'), '--config', keep, 'run', '--queue', 'orders']);
  assert.equal(run.code, 0, run.stderr);
  const left = await withDb('d3', (sql) => sql("SELECT id FROM bullmq.job WHERE queue = 'orders' AND state = 'completed' ORDER BY finished_at_ms DESC, seq DESC"));
  assert.deepEqual(left.rows, expected.rows);
  assert.equal(left.rows.length, 3);
});

test('a schema bullsweep does not know, or none, is refused with exit 2 and nothing is read', async () => {
  await pg.sql('CREATE DATABASE d4');
  const none = await bullsweep(['--postgres', urlOf('d4'), '--config', POLICY, 'plan']);
  assert.equal(none.code, 2, none.stderr);
  assert.match(none.stderr, /database `d4` has no schema `bullmq`/);
  // A run on a database that is not BullMQ's writes nothing there (not even its outbox).
  const run = await bullsweep(['--postgres', urlOf('d4'), '--config', POLICY, 'run']);
  assert.equal(run.code, 2, run.stderr);
  const made = await withDb('d4', (sql) => sql("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'bullsweep'"));
  assert.equal(made.rows[0].n, 0);
  await migrate(urlOf('d4'));
  await withDb('d4', (sql) => sql("INSERT INTO bullmq.migration (version, name, min_client_version) VALUES (99, 'future', 6)"));
  const future = await bullsweep(['--postgres', urlOf('d4'), '--config', POLICY, 'plan']);
  assert.equal(future.code, 2, future.stderr);
  assert.match(future.stderr, /schema version 99/);
  const other = await bullsweep(['--postgres', `${urlOf('d4')}?schema=elsewhere`, '--config', POLICY, 'plan']);
  assert.equal(other.code, 2, other.stderr);
});

test('maxCount over more jobs than one bounded step keeps exactly the newest, ties broken as BullMQ breaks them', async () => {
  await pg.sql('CREATE DATABASE d5');
  await migrate(urlOf('d5'));
  // 25,000 completed jobs, five to a millisecond, as a worker leaves them.
  await withDb('d5', (sql) => sql(`INSERT INTO bullmq.job (queue, id, seq, name, state, data, opts, added_at_ms, finished_at_ms, return_value)
    SELECT 'big', 'j' || g, nextval('bullmq.job_seq'), 'send', 'completed', '{}', '{}', 1700000000000, 1700000000000 + g / 5, '{"ok":true}'
    FROM generate_series(1, 25000) g`));
  const keep = writePolicy('version: 1\npolicies:\n  - { name: keep, queueNamePattern: "*", rules: { completed: { maxCount: 15001 } } }\n');
  const plan = await bullsweep(['--postgres', urlOf('d5'), '--config', keep, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  assert.equal(JSON.parse(plan.stdout).queues[0].states.completed.toActOn, 9999);
  const expected = await withDb('d5', (sql) => sql("SELECT id FROM bullmq.job WHERE queue = 'big' ORDER BY finished_at_ms DESC, seq DESC LIMIT 15001"));
  const run = await bullsweep(['--postgres', urlOf('d5'), '--config', keep, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(JSON.parse(run.stdout).queues[0].states.completed.done, 9999);
  const left = await withDb('d5', (sql) => sql("SELECT id FROM bullmq.job WHERE queue = 'big' ORDER BY finished_at_ms DESC, seq DESC"));
  assert.deepEqual(left.rows, expected.rows);
});

test('the daemon keeps maxCount as a worker completes jobs (LISTEN bullmq_events), and never fails a job', async () => {
  await pg.sql('CREATE DATABASE d6');
  await migrate(urlOf('d6'));
  const policy = writePolicy('version: 1\npolicies:\n  - { name: keep, queueNamePattern: "orders", mode: both, schedule: 1h, rules: { completed: { maxCount: 10 } } }\n');
  const { freePort, httpGet } = require('../lib/harness');
  const port = await freePort();
  const daemon = startDaemon(['--postgres', urlOf('d6'), '--config', policy, '--metrics-listen', `127.0.0.1:${port}`]);
  const q = new Queue('orders', { connection: urlOf('d6') });
  let failed = 0;
  const worker = new Worker('orders', async (job) => ({ ok: job.id }), { connection: urlOf('d6'), concurrency: 8 });
  worker.on('failed', () => { failed += 1; });
  for (let i = 0; i < 300; i += 50) {
    await q.addBulk(Array.from({ length: 50 }, (_, k) => ({ name: 'charge', data: { i: i + k } })));
  }
  await waitFor('the jobs to complete and the queue to be trimmed', async () => {
    const c = await q.getJobCounts();
    return c.waiting + c.active === 0 && c.completed === 10;
  }, 30000);
  await worker.close();
  const left = await withDb('d6', (sql) => sql("SELECT id FROM bullmq.job WHERE queue = 'orders' AND state = 'completed' ORDER BY finished_at_ms DESC, seq DESC"));
  const newest = await withDb('d6', (sql) => sql("SELECT count(*)::int AS n FROM bullmq.job WHERE queue = 'orders'"));
  assert.equal(left.rows.length, 10);
  assert.equal(newest.rows[0].n, 10, 'nothing but the newest ten is left');
  assert.equal(failed, 0);
  await q.close();
  // The queue's series say what the sweeps did, under its key base.
  const metrics = (await httpGet(port, '/metrics')).body;
  const acted = metrics.match(/^bullsweep_jobs_acted_total\{[^}]*queue="bullmq:orders"[^}]*action="remove"[^}]*\} (\d+)/m);
  assert.ok(acted && Number(acted[1]) === 290, metrics.split('\n').filter((l) => l.includes('orders')).join('\n'));
  assert.match(metrics, /^bullsweep_last_success_timestamp_seconds\{[^}]*queue="bullmq:orders"[^}]*\} \d/m);
  assert.match(metrics, /^bullsweep_alert\{[^}]*queue="bullmq:orders"[^}]*\} 0$/m);
  assert.match(metrics, /^bullsweep_schedule_interval_seconds\{[^}]*queue="bullmq:orders"[^}]*\} 3600(\.0)?$/m, 'the schedule BullsweepSweepStale compares with');
  await daemon.kill();
  // Every removal is in the audit trail the daemon shipped.
  const trail = require('node:fs').readFileSync(require('node:path').join(daemon.dir, 'bullsweep-audit.jsonl'), 'utf8')
    .trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(trail.reduce((n, e) => n + e.jobCount, 0), 290);
});

test('a schema named with capitals is the one governed, never its lower-case namesake', async () => {
  await pg.sql('CREATE DATABASE d7');
  await migrate(urlOf('d7'), 'MySchema');
  await migrate(urlOf('d7'), 'myschema');
  for (const schema of ['"MySchema"', 'myschema']) {
    await withDb('d7', (sql) => sql(`INSERT INTO ${schema}.job (queue, id, seq, name, state, added_at_ms, finished_at_ms)
      SELECT 'q', 'j' || g, g, 'n', 'completed', 1, 2 FROM generate_series(1, 3) g`));
  }
  const run = await bullsweep(['--postgres', `${urlOf('d7')}?schema=MySchema`, '--config', POLICY, 'run']);
  assert.equal(run.code, 0, run.stderr);
  const left = await withDb('d7', (sql) => sql('SELECT (SELECT count(*)::int FROM "MySchema".job) AS upper, (SELECT count(*)::int FROM myschema.job) AS lower'));
  assert.deepEqual(left.rows[0], { upper: 0, lower: 3 });
});

test('protectWaitingParents leaves the finished children of a waiting parent, as plan says', async () => {
  await dataset('d8', []);
  await sleep(20);
  const protect = writePolicy('version: 1\npolicies:\n  - { name: p, queueNamePattern: "*", protectWaitingParents: true, rules: { failed: { maxAge: 1ms } } }\n');
  const waitingChildren = "SELECT c.queue, c.id FROM bullmq.job c JOIN bullmq.job p ON p.queue = c.parent_queue AND p.id = c.parent_id WHERE p.state = 'waiting-children' AND c.state = 'failed' ORDER BY 1, 2";
  const before = await withDb('d8', (sql) => sql(waitingChildren));
  assert.ok(before.rows.length >= 2, 'the dataset has failed children of waiting parents');
  const plan = await bullsweep(['--postgres', urlOf('d8'), '--config', protect, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const run = await bullsweep(['--postgres', urlOf('d8'), '--config', protect, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual((await withDb('d8', (sql) => sql(waitingChildren))).rows, before.rows);
  const parents = await withDb('d8', (sql) => sql("SELECT count(*)::int AS n FROM bullmq.job WHERE state = 'waiting-children'"));
  assert.equal(parents.rows[0].n, 2, 'no parent taken along');
  for (const q of JSON.parse(plan.stdout).queues) {
    const d = JSON.parse(run.stdout).queues.find((x) => x.key === q.key);
    for (const [state, st] of Object.entries(q.states)) {
      assert.equal(d.states[state].done, st.toActOn);
      assert.equal(st.takenAlong, undefined, `${q.key} ${state}: nothing taken along`);
    }
  }
});

test('a policy asking what PostgreSQL queues do not do yet fails the queue before anything is touched', async () => {
  await dataset('d9', []);
  await sleep(20);
  const before = await withDb('d9', (sql) => dump(sql));
  const cases = [
    'moveExhaustedTo: dlq, rules: { failed: { maxAge: 1ms } }',
    'rules: { failed: { maxAge: 1ms }, completed: { maxAge: 1h, ttl: 2h } }',
    'rules: { failed: { maxAge: 1ms }, delayed: { maxAge: 1ms } }, events: { maxLen: 10 }',
  ];
  for (const extra of cases) {
    const policy = writePolicy(`version: 1\npolicies:\n  - { name: p, queueNamePattern: "*", ${extra} }\n`);
    const run = await bullsweep(['--postgres', urlOf('d9'), '--config', policy, '--json', 'run']);
    assert.equal(run.code, 1, `${extra}: ${run.stderr}`);
    assert.match(run.stdout, /not (done|governed) on PostgreSQL/);
  }
  assert.deepEqual(await withDb('d9', (sql) => dump(sql)), before);
});

test('a mixed fleet under one policy file: BullMQ and Bull on Redis and BullMQ on PostgreSQL, planned and run together', async () => {
  const { startRedis, dumpKeyspace } = require('../lib/harness');
  const { setDefaultBackendFactory, createRedisBackend } = require('bullmq/dist/cjs/utils/create-backend');
  const { createPostgresBackend } = require('bullmq/dist/cjs/postgres');
  const redis = await startRedis();
  try {
    // BullMQ's own Redis backend for the Redis dataset, then PostgreSQL's again.
    setDefaultBackendFactory(createRedisBackend);
    try {
      await require('../lib/dataset').build(redis.connection(0));
    } finally {
      setDefaultBackendFactory(createPostgresBackend);
    }
    await require('../lib/bull_dataset').buildBull(redis.connection(0));
    await dataset('d11', []);
    await sleep(20);
    const { LAYOUTS } = require('../lib/dataset');
    const { BULL_LAYOUTS } = require('../lib/bull_dataset');
    const layouts = [...new Set([...LAYOUTS, ...BULL_LAYOUTS])];
    const fleet = writePolicy([
      'version: 1', 'discovery:', '  layouts:', ...layouts.map((l) => `    - "${l}"`),
      `audit: { url: "file://${require('node:fs').mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'bullsweep-fleet-'))}/audit.jsonl" }`,
      'subjects: [{ name: user, paths: [user.id] }]', 'policies:',
      '  - { name: everything, queueNamePattern: "*", rules: { completed: { maxAge: 1ms }, failed: { maxAge: 1ms } } }',
      '  - { name: pg-mail, backend: bullmq-postgres, queueNamePattern: mail, rules: { completed: { maxAge: 1ms }, failed: { maxAge: 1ms } } }', '',
    ].join('\n'));
    const args = ['--redis', redis.url(0), '--postgres', urlOf('d11'), '--config', fleet, '--json'];
    const plan = await bullsweep([...args, 'plan']);
    assert.equal(plan.code, 0, plan.stderr);
    const planned = JSON.parse(plan.stdout).queues;
    assert.doesNotMatch(plan.stderr, /matches no queue/, 'a policy governing PostgreSQL queues is not said to match none');
    assert.equal(planned.find((q) => q.backend === 'bullmq-postgres' && q.queue === 'mail').policy, 'pg-mail');
    assert.deepEqual([...new Set(planned.map((q) => q.backend))].sort(), ['bull', 'bullmq', 'bullmq-postgres']);
    const run = await bullsweep([...args, 'run']);
    assert.equal(run.code, 0, run.stderr);
    const done = JSON.parse(run.stdout).queues;
    for (const q of planned) {
      const d = done.find((x) => x.key === q.key && x.backend === q.backend);
      for (const [state, st] of Object.entries(q.states)) assert.equal(d.states[state].done, st.toActOn, `${q.backend} ${q.key} ${state}`);
    }
    assert.ok(done.filter((q) => q.backend === 'bullmq-postgres').every((q) => q.states.completed.done > 0 || q.states.completed.jobs === 0));
    // Nothing finished is left in any store.
    const keys = await dumpKeyspace(redis.client(0));
    const finished = Object.entries(keys).filter(([k, v]) => /:(completed|failed)$/.test(k) && Array.isArray(v) && v.length > 0);
    assert.deepEqual(finished, []);
    const pgLeft = await withDb('d11', (sql) => sql("SELECT count(*)::int AS n FROM bullmq.job WHERE state IN ('completed', 'failed')"));
    assert.equal(pgLeft.rows[0].n, 0);

    // One person's jobs in all three, erased by one `forget`, found nowhere after it by a
    // full search of every key and every table.
    const person = { user: { id: 'u-fleet-9' } };
    setDefaultBackendFactory(createRedisBackend);
    try {
      const onRedis = new Queue('emails', { connection: redis.connection(0), prefix: 'bull' });
      await onRedis.add('send-email', person);
      await onRedis.add('send-email', person, { delay: 60_000 });
      await onRedis.close();
    } finally {
      setDefaultBackendFactory(createPostgresBackend);
    }
    const { bullQueue } = require('../lib/bull_dataset');
    const legacy = bullQueue(redis.connection(0), { prefix: 'bull', name: 'legacy-mail' });
    await legacy.add(person);
    await legacy.close();
    const onPg = new Queue('mail', { connection: urlOf('d11') });
    await onPg.add('welcome', person);
    await onPg.close();
    const named = async () => {
      const keys = JSON.stringify(await dumpKeyspace(redis.client(0)));
      const rows = (await everyRow('d11')).filter((r) => r.includes('u-fleet-9'));
      return { redis: keys.includes('u-fleet-9'), rows };
    };
    const seeded = await named();
    assert.ok(seeded.redis && seeded.rows.length > 0, 'the person is in both stores');
    const forget = await bullsweep([...args, 'forget', '--subject', 'user=u-fleet-9', '--request-id', 'FLEET-1']);
    assert.equal(forget.code, 0, forget.stderr);
    const receipt = JSON.parse(forget.stdout);
    assert.equal(receipt.status, 'erased', forget.stdout);
    const where = receipt.queues.map((q) => q.queue).sort();
    assert.ok(where.includes('bullmq:mail') && where.includes('bull:emails') && where.includes('bull:legacy-mail'), where.join(', '));
    assert.deepEqual(await named(), { redis: false, rows: [] });

    // One `doctor` examines the queues of both stores.
    const doctor = await bullsweep([...args, 'doctor']);
    assert.ok([0, 1].includes(doctor.code), doctor.stderr);
    const examined = JSON.parse(doctor.stdout).queues.map((q) => q.key);
    assert.ok(examined.includes('bullmq:mail') && examined.includes('bull:emails'), examined.join(', '));
  } finally {
    await redis.stop();
  }
});

// The pending jobs of `inbox` in the order bullsweep's walk meets them: parents first, then
// waiting, delayed and prioritized jobs, each along BullMQ's index for the state.
const PENDING_ORDER = [
  "state = 'waiting-children' ORDER BY seq",
  "state = 'waiting' AND priority = 0 ORDER BY seq",
  "state = 'delayed' ORDER BY process_at_ms, seq",
  "state = 'waiting' AND priority > 0 ORDER BY priority, seq",
];

test('pending rules remove jobs as Job.remove() does: children, parents, dedup, every table alike', async () => {
  await pg.sql('CREATE DATABASE p1');
  await migrate(urlOf('p1'));
  await buildPending(urlOf('p1'));
  for (const c of ['p1_remove', 'p1_sweep', 'p1_keep']) await pg.sql(`CREATE DATABASE ${c} TEMPLATE p1`);
  await sleep(20);
  const pending = '{ maxAge: 1ms }';
  const policy = (extra) => writePolicy(`version: 1\npolicies:\n  - { name: p, queueNamePattern: inbox, ${extra}rules: { waiting: ${pending}, delayed: ${pending}, prioritized: ${pending}, waiting-children: ${pending} } }\n`);
  const everything = policy('childrenInOtherQueues: remove, ');

  // BullMQ's own removal: Queue.remove of every job the rules select, in the walk's order; a
  // job an earlier removal took along, or a parent it released, is not removed again.
  await withDb('p1_remove', async (sql) => {
    const q = new Queue('inbox', { connection: urlOf('p1_remove') });
    const released = new Set();
    for (const where of PENDING_ORDER) {
      const { rows } = await sql(`SELECT id, scheduler_id FROM bullmq.job WHERE queue = 'inbox' AND ${where}`);
      for (const { id, scheduler_id } of rows) {
        if (scheduler_id || released.has(id)) continue;
        const parents = await sql("SELECT p.queue, p.id FROM bullmq.job j JOIN bullmq.job p ON p.queue = j.parent_queue AND p.id = j.parent_id AND p.state = 'waiting-children' WHERE j.queue = 'inbox' AND j.id = $1", [id]);
        const n = await q.remove(id);
        if (n === 0) continue;
        for (const p of parents.rows) {
          const now = await sql('SELECT state FROM bullmq.job WHERE queue = $1 AND id = $2', [p.queue, p.id]);
          if (now.rows[0] && now.rows[0].state !== 'waiting-children' && p.queue === 'inbox') released.add(p.id);
        }
      }
    }
    await q.close();
  });

  const before = await withDb('p1_sweep', (sql) => dump(sql));
  const plan = await bullsweep(['--postgres', urlOf('p1_sweep'), '--config', everything, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  assert.deepEqual(await withDb('p1_sweep', (sql) => dump(sql)), before, 'a plan changes nothing');
  const run = await bullsweep(['--postgres', urlOf('p1_sweep'), '--config', everything, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const expected = await withDb('p1_remove', (sql) => dump(sql));
  const actual = await withDb('p1_sweep', (sql) => dump(sql));
  assert.deepEqual(actual, expected);

  // Not vacuous: only the scheduler's next iteration is left in inbox; the children in outbox
  // went with their parent, the parent in outbox was released, and its other job stayed.
  const inbox = actual.job.filter((j) => j.queue === 'inbox');
  assert.deepEqual(inbox.map((j) => j.name), ['tick']);
  assert.ok(before.job.filter((j) => j.queue === 'inbox').length >= 20);
  assert.deepEqual(actual.dedup, []);
  assert.ok(before.dedup.length === 1);
  const outbox = actual.job.filter((j) => j.queue === 'outbox').map((j) => [j.name, j.state]).sort();
  assert.deepEqual(outbox, [['digest', 'waiting'], ['mail', 'waiting']]);

  // The plan said what the run did, state by state, and what it took along.
  const planned = JSON.parse(plan.stdout).queues.find((q) => q.queue === 'inbox').states;
  const done = JSON.parse(run.stdout).queues.find((q) => q.queue === 'inbox').states;
  for (const [state, s] of Object.entries(planned)) {
    assert.equal(done[state].done, s.toActOn, `${state}: ${JSON.stringify(s)} vs ${JSON.stringify(done[state])}`);
    assert.deepEqual(done[state].takenAlong, s.takenAlong, state);
  }
  assert.equal(planned.waiting.skipped.scheduler, 1, 'the scheduler\'s next iteration is left');
  assert.equal(planned['waiting-children'].takenAlong.childrenRemoved, 5, JSON.stringify(planned['waiting-children']));
  assert.equal(planned['waiting-children'].matched, 2, 'the nested parent is taken along, not counted twice');

  // Under childrenInOtherQueues: keepParent (the default) the parent with a child in outbox
  // is left with that child.
  const keep = await bullsweep(['--postgres', urlOf('p1_keep'), '--config', policy(''), '--json', 'run']);
  assert.equal(keep.code, 0, keep.stderr);
  const kept = JSON.parse(keep.stdout).queues.find((q) => q.queue === 'inbox').states['waiting-children'];
  assert.equal(kept.skipped.childrenElsewhere, 1, JSON.stringify(kept));
  const left = await withDb('p1_keep', (sql) => sql("SELECT queue, name FROM bullmq.job WHERE name IN ('bundle') OR (queue = 'outbox' AND name = 'part') ORDER BY 1, 2"));
  assert.deepEqual(left.rows, [{ queue: 'inbox', name: 'bundle' }, { queue: 'outbox', name: 'part' }]);
});

// Every row of every BullMQ table as text, for a full search of what a subject left.
async function everyRow(db) {
  return withDb(db, async (sql) => {
    const tables = await sql("SELECT tablename FROM pg_tables WHERE schemaname = 'bullmq' ORDER BY 1");
    const out = [];
    for (const { tablename } of tables.rows) {
      const { rows } = await sql(`SELECT t::text AS row FROM bullmq.${tablename} t`);
      for (const r of rows) out.push(`${tablename}: ${r.row}`);
    }
    return out;
  });
}

test('forget erases one person from BullMQ on PostgreSQL: every state, flows, copies, schedulers, events; never a held job', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const { FlowProducer } = require('bullmq');
  await pg.sql('CREATE DATABASE f1');
  await migrate(urlOf('f1'));
  const connection = urlOf('f1');
  const ann = (extra = {}) => ({ user: { id: 'u42', email: 'ann@example.com' }, ...extra });
  const bob = (extra = {}) => ({ user: { id: 'u7', email: 'bob@example.com' }, ...extra });
  const people = new Queue('people', { connection });
  const flows = new FlowProducer({ connection });
  // A parent of bob's whose child of ann's completes (its value copied into the parent's row),
  // and a parent of ann's whose children are bob's.
  await flows.add({ name: 'report', queueName: 'people', data: bob(), children: [{ name: 'part', queueName: 'people', data: ann({ step: 1 }) }, { name: 'part', queueName: 'people', data: bob({ step: 2, wait: true }) }] });
  const bundle = await flows.add({ name: 'bundle', queueName: 'people', data: ann(), children: [{ name: 'piece', queueName: 'people', data: bob({ hold: true }) }] });
  for (let i = 0; i < 3; i++) { await people.add('mail', ann({ i })); await people.add('mail', bob({ i })); }
  const worker = new Worker('people', async (job) => {
    if (job.data.hold || job.data.wait) await new Promise(() => {});
    await job.updateProgress({ note: `sent to ${job.data.user.email}` });
    if (job.data.i === 1) throw new Error(`declined ${job.data.user.email}`);
    return { to: job.data.user.email };
  }, { connection, concurrency: 8 });
  await until(async () => (await people.getJobCounts()).waiting === 0 && (await people.getJobCounts()).active === 2, 'the worker to settle');
  await worker.close(true);
  await people.add('later', ann(), { delay: 3_600_000 });
  await people.add('later', bob(), { delay: 3_600_000 });
  await people.upsertJobScheduler('ann-digest', { every: 3_600_000 }, { name: 'digest', data: ann() });
  // One job of ann's a worker holds.
  const held = await people.add('mail', ann({ held: true }));
  await withDb('f1', (sql) => sql("UPDATE bullmq.job SET state = 'active', lock_token = 'w', locked_until_ms = (extract(epoch from now()) * 1000)::bigint + 600000 WHERE queue = 'people' AND id = $1", [held.id]));
  await people.close();
  await flows.close();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-pg-forget-'));
  const policy = writePolicy([
    'version: 1', `audit: { url: "file://${dir}/audit.jsonl" }`,
    'subjects: [{ name: user, paths: [user.id, user.email] }]',
    'policies: [{ name: keep, queueNamePattern: "*", rules: { completed: { maxAge: 30d } } }]', '',
  ].join('\n'));
  const args = ['--postgres', urlOf('f1'), '--config', policy, '--json', 'forget', '--subject', 'user=u42', '--wait-active', '1s'];
  const rowsBefore = await everyRow('f1');
  const bobBefore = rowsBefore.filter((r) => r.startsWith('job: ') && r.includes('u7') && !r.includes('u42'));
  assert.ok(rowsBefore.filter((r) => r.includes('u42') || r.includes('ann@example.com')).length >= 10);

  const dry = await bullsweep([...args, '--request-id', 'R-dry', '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.equal(JSON.parse(dry.stdout).status, 'wouldErase');
  assert.deepEqual(await everyRow('f1'), rowsBefore, 'a dry run changes nothing');

  const first = await bullsweep([...args, '--request-id', 'R-1']);
  assert.equal(first.code, 1, first.stderr);
  const r1 = JSON.parse(first.stdout);
  assert.equal(r1.status, 'pending', first.stdout);
  const q1 = r1.queues.find((q) => q.queue === 'bullmq:people');
  // The held job, and ann's parent whose child a worker holds (BullMQ's remove refuses a
  // subtree with a held job), wait.
  assert.deepEqual(q1.pending.map((p) => p.id).sort(), [held.id, bundle.job.id].sort());
  assert.deepEqual(q1.schedulers, ['ann-digest']);
  assert.ok(q1.copiesWithJobs >= 1 && q1.events > 0, JSON.stringify(q1));
  for (const state of ['completed', 'failed', 'delayed']) assert.ok(q1.states[state], `${state}: ${JSON.stringify(q1.states)}`);
  // Only the two waiting jobs still name ann, and bob's jobs are as they were.
  const left = (await everyRow('f1')).filter((r) => r.includes('u42') || r.includes('ann@example.com'));
  assert.equal(left.length, 2, left.join('\n'));
  assert.ok(left.every((r) => r.startsWith(`job: (people,${held.id},`) || r.startsWith(`job: (people,${bundle.job.id},`)), left.join('\n'));
  const bobAfter = (await everyRow('f1')).filter((r) => r.startsWith('job: ') && r.includes('u7') && !r.includes('u42'));
  assert.deepEqual(bobAfter.filter((r) => !r.includes('"hold": true')), bobBefore.filter((r) => !r.includes('"hold": true')));
  // Every erasure is in the audit trail, under the request id.
  const trail = fs.readFileSync(path.join(dir, 'audit.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const erased = trail.filter((e) => e.executionId === 'R-1' && e.action === 'erase').flatMap((e) => e.jobIds || []);
  for (const ids of Object.values(q1.states)) for (const id of ids) if (!id.startsWith('repeat:')) assert.ok(erased.includes(id), `${id} audited`);

  // The workers let go: the same erasure finishes (ann's parent with bob's child), and a
  // third finds nothing.
  await withDb('f1', (sql) => sql("UPDATE bullmq.job SET lock_token = NULL, locked_until_ms = NULL WHERE queue = 'people' AND state = 'active'"));
  const second = await bullsweep([...args, '--request-id', 'R-1']);
  assert.equal(second.code, 0, second.stderr);
  const r2 = JSON.parse(second.stdout);
  assert.equal(r2.status, 'erased');
  assert.equal(r2.queues[0].removedWithParent.length, 1, second.stdout);
  assert.ok(r2.queues[0].states['waiting-children'], second.stdout);
  assert.deepEqual((await everyRow('f1')).filter((r) => r.includes('u42') || r.includes('ann@example.com')), []);
  // No event about an erased job is left but BullMQ's own `removed` ones, which hold no data.
  const erasedIds = [...Object.values(q1.states).flat(), ...Object.values(r2.queues[0].states).flat()];
  const about = await withDb('f1', (sql) => sql("SELECT event, data->>'jobId' AS id FROM bullmq.event WHERE event <> 'removed' AND data->>'jobId' = ANY($1)", [erasedIds]));
  assert.deepEqual(about.rows, []);
  assert.ok(rowsBefore.filter((r) => r.startsWith('event: ') && erasedIds.some((id) => r.includes(`""jobId"": ""${id}""`))).length >= erasedIds.length, 'the erased jobs had events');
  const third = await bullsweep([...args, '--request-id', 'R-3']);
  assert.equal(JSON.parse(third.stdout).status, 'nothingFound', third.stdout);
  // BullMQ still reads the queue: bob's parent waits for his remaining child.
  const check = new Queue('people', { connection });
  const counts = await check.getJobCounts();
  await check.close();
  assert.ok(counts['waiting-children'] === 1 && counts.completed >= 2, JSON.stringify(counts));
});

test('doctor finds and repairs what BullMQ on PostgreSQL leaves broken, and nothing in a healthy schema', async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  await dataset('g0', []);
  const healthy = await bullsweep(['--postgres', urlOf('g0'), '--json', 'doctor']);
  assert.equal(healthy.code, 0, healthy.stdout + healthy.stderr);
  assert.ok(JSON.parse(healthy.stdout).queues.length >= 3);

  await pg.sql('CREATE DATABASE g1');
  await migrate(urlOf('g1'));
  await buildPending(urlOf('g1'));
  // Damage as a crash or a hand-made DELETE leaves it: a child row deleted under its parent,
  // a parent's counter off by one, a deduplicated job deleted under its dedup row.
  const damaged = await withDb('g1', async (sql) => {
    const child = await sql("DELETE FROM bullmq.job WHERE queue = 'outbox' AND name = 'part' RETURNING parent_id");
    const digest = await sql("UPDATE bullmq.job SET pending_deps = pending_deps + 1 WHERE queue = 'outbox' AND name = 'digest' RETURNING id");
    const dedup = await sql("DELETE FROM bullmq.job WHERE queue = 'inbox' AND dedup_id IS NOT NULL RETURNING id");
    return { bundle: child.rows[0].parent_id, digest: digest.rows[0].id, dedup: dedup.rows[0].id };
  });
  const before = await withDb('g1', (sql) => dump(sql));
  const found = await bullsweep(['--postgres', urlOf('g1'), '--json', 'doctor']);
  assert.equal(found.code, 1, found.stderr);
  const kinds = (r) => Object.fromEntries(JSON.parse(r.stdout).queues.flatMap((q) => q.findings.map((f) => [`${q.key} ${f.kind}`, f])));
  const f1 = kinds(found);
  assert.equal(f1['bullmq:inbox stuckParents'].found, 1, found.stdout);
  assert.equal(f1['bullmq:outbox stuckParents'].found, 1, found.stdout);
  assert.equal(f1['bullmq:inbox staleDedup'].found, 1, found.stdout);
  assert.deepEqual(await withDb('g1', (sql) => dump(sql)), before, 'finding changes nothing');

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-pg-doctor-'));
  const policy = writePolicy(`version: 1\naudit: { url: "file://${dir}/audit.jsonl" }\npolicies: []\n`);
  const repair = await bullsweep(['--postgres', urlOf('g1'), '--config', policy, '--json', 'doctor', '--repair', 'stuckParents,staleDedup']);
  assert.equal(repair.code, 1, repair.stderr);
  const f2 = kinds(repair);
  for (const k of ['bullmq:inbox stuckParents', 'bullmq:outbox stuckParents', 'bullmq:inbox staleDedup']) assert.equal(f2[k].repaired, 1, `${k}: ${repair.stdout}`);
  const after = await bullsweep(['--postgres', urlOf('g1'), '--json', 'doctor']);
  assert.equal(after.code, 0, after.stdout);
  // As BullMQ would have left them: the dangling row gone, the counters true, and the parent
  // whose last child was the deleted one released by BullMQ's own function.
  const rows = await withDb('g1', (sql) => sql("SELECT id, state, pending_deps FROM bullmq.job WHERE id = ANY($1) ORDER BY id", [[damaged.bundle, damaged.digest]]));
  const byId = Object.fromEntries(rows.rows.map((r) => [r.id, r]));
  assert.equal(byId[damaged.bundle].pending_deps, 2);
  assert.equal(byId[damaged.bundle].state, 'waiting-children');
  assert.equal(byId[damaged.digest].pending_deps, 1);
  const dedup = await withDb('g1', (sql) => sql('SELECT count(*)::int AS n FROM bullmq.dedup'));
  assert.equal(dedup.rows[0].n, 0);
  const trail = fs.readFileSync(path.join(dir, 'audit.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(trail.filter((e) => e.action === 'repair').length, 3, JSON.stringify(trail));
  // BullMQ works on: completing the inbox children releases their parent.
  const worker = new Worker('inbox', async () => 'ok', { connection: urlOf('g1') });
  await until(async () => (await withDb('g1', (sql) => sql('SELECT state FROM bullmq.job WHERE id = $1', [damaged.bundle]))).rows[0]?.state !== 'waiting-children', 'the repaired parent to be released');
  await worker.close();
});

test('a pending job whose child another transaction holds is left, and taken once it is let go', async () => {
  await pg.sql('CREATE DATABASE p2');
  await migrate(urlOf('p2'));
  await buildPending(urlOf('p2'));
  await sleep(20);
  const policy = writePolicy('version: 1\npolicies:\n  - { name: p, queueNamePattern: inbox, childrenInOtherQueues: remove, rules: { waiting-children: { maxAge: 1ms } } }\n');
  // A worker's claim in progress: the leaf's row held by an open transaction.
  const holder = new Client({ connectionString: urlOf('p2') });
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query("SELECT id FROM bullmq.job WHERE queue = 'inbox' AND name = 'leaf' FOR UPDATE");
  const held = await bullsweep(['--postgres', urlOf('p2'), '--config', policy, '--json', 'run']);
  assert.equal(held.code, 0, held.stderr);
  const st = JSON.parse(held.stdout).queues.find((q) => q.queue === 'inbox').states['waiting-children'];
  assert.equal(st.skipped.locked, 1, JSON.stringify(st));
  const names = async () => (await withDb('p2', (sql) => sql("SELECT name FROM bullmq.job WHERE queue = 'inbox' AND name IN ('tree', 'branch', 'leaf', 'bundle') ORDER BY name"))).rows.map((r) => r.name);
  assert.deepEqual(await names(), ['branch', 'leaf', 'tree'], 'the held tree is whole, the other parent went');
  await holder.query('COMMIT');
  await holder.end();
  const again = await bullsweep(['--postgres', urlOf('p2'), '--config', policy, '--json', 'run']);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(await names(), []);
});

test('pending states longer than a page are walked whole along BullMQ\'s indexes, ties included', async () => {
  await pg.sql('CREATE DATABASE p3');
  await migrate(urlOf('p3'));
  const q = new Queue('bulk', { connection: urlOf('p3') });
  const n = 2500;
  const jobs = (opts) => Array.from({ length: n }, (_, i) => ({ name: 'x', data: { i }, opts }));
  for (const opts of [{}, { priority: 1 }, { priority: 7 }, { delay: 3_600_000 }]) {
    for (let i = 0; i < n; i += 500) await q.addBulk(jobs(opts).slice(i, i + 500));
  }
  // Delayed jobs that tie on their due time, across pages.
  await withDb('p3', (sql) => sql("UPDATE bullmq.job SET process_at_ms = 42 WHERE state = 'delayed' AND (data->>'i')::int % 2 = 0"));
  await sleep(20);
  const policy = writePolicy('version: 1\npolicies:\n  - { name: p, queueNamePattern: bulk, rules: { waiting: { maxAge: 1ms }, prioritized: { maxAge: 1ms }, delayed: { maxAge: 1ms } } }\n');
  const plan = await bullsweep(['--postgres', urlOf('p3'), '--config', policy, '--json', 'plan']);
  assert.equal(plan.code, 0, plan.stderr);
  const states = JSON.parse(plan.stdout).queues[0].states;
  assert.deepEqual([states.waiting.toActOn, states.prioritized.toActOn, states.delayed.toActOn], [n, 2 * n, n], JSON.stringify(states));
  const run = await bullsweep(['--postgres', urlOf('p3'), '--config', policy, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const done = JSON.parse(run.stdout).queues[0].states;
  assert.deepEqual([done.waiting.done, done.prioritized.done, done.delayed.done], [n, 2 * n, n]);
  const counts = await q.getJobCounts();
  await q.close();
  assert.equal(counts.waiting + counts.prioritized + counts.delayed, 0, JSON.stringify(counts));
});
