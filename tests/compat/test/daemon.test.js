// The daemon, judged by real BullMQ: scheduled sweeps whose lastRunAt survives restarts,
// event-driven removal that survives SIGKILL and trimmed streams, replicas that never run one
// queue twice, SIGTERM, SIGHUP, metrics, and a Redis restarted underneath.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker } = require('bullmq');
const {
  startRedis, writePolicy, sleep, waitFor, startDaemon, stopDaemons, httpGet, freePort, bullsweep,
} = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');
const { finishJobs } = require('../lib/dataset');

let redis;
before(async () => { redis = await startRedis(); });
after(() => {
  stopDaemons();
  redis.stop();
});

const range = (n) => Array.from({ length: n }, (_, i) => i);

// Compares stream ids (`<ms>-<seq>`) as numbers: -1, 0 or 1.
function compareIds(a, b) {
  const [am, as] = a.split('-').map(BigInt);
  const [bm, bs] = b.split('-').map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  if (as !== bs) return as < bs ? -1 : 1;
  return 0;
}

// waitFor, with the daemon's log in the failure message.
const waitLogged = (d, what, check, ms) => waitFor(what, check, ms).catch((e) => {
  throw new Error(`${e.message}\n--- daemon log ---\n${d.log()}`);
});

// The sum of the samples of `name` whose labels include `labels` (a counter's series by every
// other label, such as `reason`); undefined when there is none.
function metric(body, name, labels) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const lines = body.split('\n').filter((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return lines.length === 0 ? undefined : lines.reduce((t, l) => t + Number(l.split(' ').pop()), 0);
}

test('scheduled sweeps keep lastRunAt in Redis, exit 0 on SIGTERM and serve metrics', async () => {
  const db = 1;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const queue = new Queue('sched', { connection });
  await finishJobs(queue, connection, 50);
  const policy = writePolicy(`version: 1
schedule: 1s
policies:
  - name: all
    queueNamePattern: "*"
    rules:
      completed: { maxCount: 0 }
`);
  const port = await freePort();
  const started = Date.now();
  const d = startDaemon(['--redis', redis.url(db), '--config', policy, '--listen', `127.0.0.1:${port}`]);
  await waitFor('readyz', async () => (await httpGet(port, '/readyz').catch(() => ({}))).status === 200);
  assert.equal((await httpGet(port, '/healthz')).status, 200);
  await waitFor('the sweep', async () => (await queue.getCompletedCount()) === 0);
  // The run is recorded once it has finished, a moment after its last removal.
  await waitFor('the run recorded', async () => (await client.hget('bullsweep:lastrun', 'bull:sched')) !== null);
  const last = Number(await client.hget('bullsweep:lastrun', 'bull:sched'));
  assert.ok(started <= last && last <= Date.now(), `lastRunAt ${last} is a time of this daemon's run, in ms`);
  await waitFor('metrics', async () => {
    const { body } = await httpGet(port, '/metrics');
    return metric(body, 'bullsweep_jobs_acted_total', { queue: 'bull:sched', action: 'remove' }) === 50
      && metric(body, 'bullsweep_jobs', { queue: 'bull:sched', state: 'completed' }) === 0
      && metric(body, 'bullsweep_last_success_timestamp_seconds', { queue: 'bull:sched' }) > 0;
  });
  const { code } = await d.kill('SIGTERM');
  assert.equal(code, 0, d.log());
  assert.match(d.log().trim().split('\n').pop(), /\bstopped$/, 'an orderly stop is its last word');
  assert.deepEqual(await client.keys('bullsweep:lock:*'), [], 'locks released');

  // A restart with a 1h schedule finds the recent lastRunAt and does not sweep again: the
  // next sweep it schedules for the queue (and logs) is an hour after the recorded run, where
  // a queue with no recorded run would be due within its jitter (5 min) of the start.
  await finishJobs(queue, connection, 10);
  const hourly = writePolicy(`version: 1
schedule: 1h
policies:
  - { name: all, queueNamePattern: "*", rules: { completed: { maxCount: 0 } } }
`);
  const again = startDaemon(['--redis', redis.url(db), '--config', hourly]);
  const scheduled = /discovery: bull:sched: policy all, every 1h, next sweep (\S+)/;
  await waitLogged(again, 'the next sweep of bull:sched', async () => scheduled.test(again.log()));
  const next = Date.parse(again.log().match(scheduled)[1]);
  const [HOUR, JITTER] = [3600000, 300000];
  assert.ok(next >= last + HOUR && next <= last + HOUR + JITTER,
    `next sweep ${new Date(next).toISOString()} is an hour after the recorded run ${new Date(last).toISOString()}`);
  assert.equal(await queue.getCompletedCount(), 10, again.log());
  assert.equal(Number(await client.hget('bullsweep:lastrun', 'bull:sched')), last);
  assert.equal((await again.kill('SIGTERM')).code, 0);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'sched' }]);
  await queue.close();
});

test('event mode removes jobs as they finish, keeps keepIf jobs, and misses none across SIGKILL', async () => {
  const db = 2;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const queue = new Queue('orders', { connection });
  const policy = writePolicy(`version: 1
schedule: 1h
policies:
  - name: orders
    queueNamePattern: orders
    mode: event
    rules:
      completed: { maxCount: 0, keepIf: { path: returnvalue.status, equals: failed } }
      failed: { maxAge: 1h }
`);
  const args = ['--redis', redis.url(db), '--config', policy];
  let d = startDaemon(args);
  await waitFor('the events reader', async () => d.log().includes('bull:orders: reading events'));
  // The first start sweeps once (everything before it is the sweep's) and records the run.
  await waitFor('the first sweep', async () => (await client.hget('bullsweep:lastrun', 'bull:orders')) !== null);
  const firstRun = await client.hget('bullsweep:lastrun', 'bull:orders');

  const status = (i) => (i % 10 === 0 ? 'failed' : 'ok');
  const worker = new Worker('orders', async (job) => {
    if (job.data.i % 50 === 1) throw new Error('boom');
    await sleep(2);
    return { status: status(job.data.i) };
  }, { connection, concurrency: 5 });
  let finished = 0;
  worker.on('completed', () => { finished += 1; });
  worker.on('failed', () => { finished += 1; });
  await queue.addBulk(range(600).map((i) => ({ name: 'order', data: { i } })));
  await waitFor('a third of the jobs', async () => finished >= 200);
  await d.kill('SIGKILL');
  await waitFor('every job', async () => finished === 600);
  await worker.close();

  d = startDaemon(args);
  const kept = range(600).filter((i) => i % 50 !== 1 && status(i) === 'failed').length;
  await waitLogged(d, 'removal of the jobs finished while the daemon was down', async () => (await queue.getCompletedCount()) === kept);
  const completed = await queue.getCompleted(0, -1);
  assert.ok(completed.every((j) => j.returnvalue.status === 'failed'), 'only keepIf jobs stay');
  assert.equal(await queue.getFailedCount(), 12, 'failed jobs are younger than maxAge');
  // No sweep ran after the restart: the events did it.
  assert.equal(await client.hget('bullsweep:lastrun', 'bull:orders'), firstRun);
  const cursor = await client.hget('bullsweep:{bullsweep}:cursor', 'bull:orders');
  const [[lastId]] = await client.xrevrange('bull:orders:events', '+', '-', 'COUNT', 1);
  assert.ok(compareIds(cursor, lastId) <= 0 && compareIds(cursor, '0-0') > 0, `cursor ${cursor}`);
  assert.equal((await d.kill('SIGTERM')).code, 0, d.log());
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'orders' }]);
  await queue.close();
});

test('a stream trimmed past the saved position gets a full sweep at once', async () => {
  const db = 3;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const queue = new Queue('gappy', { connection, streams: { events: { maxLen: 20 } } });
  const policy = writePolicy(`version: 1
schedule: 1h
policies:
  - { name: gappy, queueNamePattern: gappy, mode: both, rules: { completed: { maxCount: 0 } } }
`);
  const port = await freePort();
  const args = ['--redis', redis.url(db), '--config', policy, '--listen', `127.0.0.1:${port}`];
  let d = startDaemon(args);
  await waitFor('the events reader', async () => d.log().includes('bull:gappy: reading events'));
  await waitFor('the first sweep', async () => (await client.hget('bullsweep:lastrun', 'bull:gappy')) !== null);
  const firstRun = Number(await client.hget('bullsweep:lastrun', 'bull:gappy'));
  await finishJobs(queue, connection, 5);
  await waitFor('event removal', async () => (await queue.getCompletedCount()) === 0);
  assert.equal((await d.kill('SIGTERM')).code, 0);

  // While the daemon is down, 1,000 jobs finish and the stream keeps only the newest entries.
  await finishJobs(queue, connection, 1000);
  const cursor = await client.hget('bullsweep:{bullsweep}:cursor', 'bull:gappy');
  const [[firstId]] = await client.xrange('bull:gappy:events', '-', '+', 'COUNT', 1);
  assert.ok(compareIds(firstId, cursor) > 0, `stream starts at ${firstId}, after the cursor ${cursor}`);

  d = startDaemon(args);
  await waitLogged(d, 'the gap sweep', async () => (await queue.getCompletedCount()) === 0);
  assert.match(d.log(), /bull:gappy: the events stream was trimmed past the saved position/);
  // The sweep records its run once it has finished, a moment after the last removal.
  await waitLogged(d, 'the full sweep recorded', async () => Number(await client.hget('bullsweep:lastrun', 'bull:gappy')) > firstRun);
  const { body } = await httpGet(port, '/metrics');
  // At least the one found on takeover (a reader this far behind can meet more while it catches
  // up, since its own `removed` events trim a stream this short).
  assert.ok(metric(body, 'bullsweep_event_gaps_total', { queue: 'bull:gappy' }) >= 1, body);
  assert.equal((await d.kill('SIGTERM')).code, 0);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'gappy' }]);
  await queue.close();
});

test('three replicas sweep every queue, and no batch runs twice', async () => {
  const db = 4;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const names = range(6).map((i) => `shared${i}`);
  const queues = names.map((n) => new Queue(n, { connection }));
  for (const q of queues) await finishJobs(q, connection, 30);
  const auditDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-audit-'));
  const auditFile = path.join(auditDir, 'audit.jsonl');
  const policy = writePolicy(`version: 1
schedule: 1s
audit: { url: "file://${auditFile}" }
policies:
  - { name: all, queueNamePattern: "shared*", rules: { completed: { maxCount: 0 } } }
`);
  const replicas = range(3).map(() => startDaemon(['--redis', redis.url(db), '--config', policy]));
  await waitFor('every queue swept', async () => {
    const counts = await Promise.all(queues.map((q) => q.getCompletedCount()));
    return counts.every((c) => c === 0);
  });
  // More jobs while all three keep running, so that runs overlap in time.
  for (const q of queues) await finishJobs(q, connection, 20);
  await waitFor('the second round', async () => {
    const counts = await Promise.all(queues.map((q) => q.getCompletedCount()));
    return counts.every((c) => c === 0);
  });
  for (const r of replicas) assert.equal((await r.kill('SIGTERM')).code, 0, r.log());
  for (const n of names) assert.ok(await client.hget('bullsweep:lastrun', `bull:${n}`), n);

  const verify = await bullsweep(['audit', 'verify', '--config', policy, '--redis', redis.url(db)]);
  assert.equal(verify.code, 0, verify.stderr);
  const removed = new Map();
  for (const line of fs.readFileSync(auditFile, 'utf8').trim().split('\n')) {
    const e = JSON.parse(line);
    if (e.action !== 'remove') continue;
    for (const id of e.jobIds) {
      const key = `${e.queueKey}/${id}`;
      removed.set(key, (removed.get(key) || 0) + 1);
    }
  }
  assert.equal(removed.size, 6 * 50, 'every job removed is audited');
  assert.deepEqual([...removed.values()].filter((n) => n !== 1), [], 'no job removed twice');
  await assertConsistent(redis, db, names.map((name) => ({ prefix: 'bull', name })));
  for (const q of queues) await q.close();
});

test('SIGHUP reloads a valid policy and keeps the old one when the new one is invalid', async () => {
  const db = 5;
  const connection = redis.connection(db);
  const queue = new Queue('reload', { connection });
  await finishJobs(queue, connection, 10, { fail: (i) => i < 4 });
  const file = writePolicy(`version: 1
schedule: 1s
policies:
  - { name: all, queueNamePattern: "*", rules: { completed: { maxCount: 0 } } }
`);
  const port = await freePort();
  const d = startDaemon(['--redis', redis.url(db), '--config', file, '--listen', `127.0.0.1:${port}`]);
  await waitLogged(d, 'completed jobs swept', async () => (await queue.getCompletedCount()) === 0);
  assert.equal(await queue.getFailedCount(), 4);

  fs.writeFileSync(file, 'version: 1\nschedule: "0 3 * * *"\n');
  d.proc.kill('SIGHUP');
  await waitLogged(d, 'the refusal', async () => d.log().includes('the policy file in force is kept'));
  assert.match(d.log(), /looks like a cron expression/);
  await finishJobs(queue, connection, 3);
  await waitLogged(d, 'the old policy still in force', async () => (await queue.getCompletedCount()) === 0);

  fs.writeFileSync(file, `version: 1
schedule: 1s
policies:
  - { name: all, queueNamePattern: "*", rules: { completed: { maxCount: 0 }, failed: { maxCount: 1 } } }
`);
  d.proc.kill('SIGHUP');
  await waitLogged(d, 'the new policy', async () => (await queue.getFailedCount()) === 1);
  const { body } = await httpGet(port, '/metrics');
  assert.equal(metric(body, 'bullsweep_config_reloads_total', { result: 'invalid' }), 1, body);
  assert.equal(metric(body, 'bullsweep_config_reloads_total', { result: 'ok' }), 1, body);
  assert.equal((await d.kill('SIGTERM')).code, 0);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'reload' }]);
  await queue.close();
});

test('a Redis restarted under the daemon: it reconnects with backoff and misses nothing', async () => {
  const own = await startRedis({ persist: true });
  try {
    const connection = own.connection(0);
    const queue = new Queue('steady', { connection });
    const policy = writePolicy(`version: 1
schedule: 1h
policies:
  - { name: all, queueNamePattern: "*", mode: both, rules: { completed: { maxCount: 0 } } }
`);
    const port = await freePort();
    const d = startDaemon(['--redis', own.url(0), '--config', policy, '--listen', `127.0.0.1:${port}`]);
    await waitLogged(d, 'the events reader', async () => d.log().includes('bull:steady: reading events'));
    await finishJobs(queue, connection, 20);
    await waitLogged(d, 'event removal', async () => (await queue.getCompletedCount()) === 0);
    await queue.close();

    await own.restart(1500);
    const q2 = new Queue('steady', { connection });
    await finishJobs(q2, connection, 20);
    await waitLogged(d, 'removal after the restart', async () => (await q2.getCompletedCount()) === 0);
    assert.match(d.log(), /Redis is unreachable; reconnecting with backoff/);
    assert.equal((await httpGet(port, '/readyz')).status, 200);
    assert.equal((await d.kill('SIGTERM')).code, 0, d.log());
    await assertConsistent(own, 0, [{ prefix: 'bull', name: 'steady' }]);
    await q2.close();
  } finally {
    own.stop();
  }
});

test('SIGKILL in the middle of an archiving sweep: nothing is lost, the next run finishes', async () => {
  const db = 6;
  const connection = redis.connection(db);
  const queue = new Queue('bulky', { connection });
  const jobs = await finishJobs(queue, connection, 4000);
  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-archive-'));
  const policy = writePolicy(`version: 1
schedule: 1s
archive: { url: "file://${archiveDir}" }
policies:
  - { name: all, queueNamePattern: "*", rules: { completed: { maxCount: 0, action: archive } } }
`);
  const args = ['--redis', redis.url(db), '--config', policy];
  const segments = () => fs.readdirSync(archiveDir, { recursive: true }).filter((f) => String(f).endsWith('.manifest.json'));
  let d = startDaemon(args);
  await waitLogged(d, 'the first segment', async () => segments().length > 0);
  await d.kill('SIGKILL');
  const left = await queue.getCompletedCount();
  assert.ok(left > 0, `the sweep had ${left} jobs left when it was killed`);

  // The killed run's lock expires; the next daemon takes the queue over and finishes.
  d = startDaemon(args);
  await waitLogged(d, 'the rest of the sweep', async () => (await queue.getCompletedCount()) === 0, 40000);
  assert.equal((await d.kill('SIGTERM')).code, 0);
  const archived = new Set();
  const ls = await bullsweep(['--json', 'archive', 'ls', '--config', policy]);
  assert.equal(ls.code, 0, ls.stderr);
  for (const line of ls.stdout.trim().split('\n')) {
    const cat = await bullsweep(['archive', 'cat', JSON.parse(line).segment, '--config', policy]);
    assert.equal(cat.code, 0, cat.stderr);
    for (const rec of cat.stdout.trim().split('\n')) archived.add(JSON.parse(rec).id);
  }
  const missing = jobs.map((j) => j.id).filter((id) => !archived.has(id));
  assert.deepEqual(missing, [], 'every removed job has its archived copy');
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'bulky' }]);
  await queue.close();
});

test('a failing queue gets a retry record with backoff, and others go on', async () => {
  const db = 7;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const audited = new Queue('audited', { connection });
  const plain = new Queue('plain', { connection });
  await finishJobs(audited, connection, 5);
  await finishJobs(plain, connection, 5);
  // The audit store cannot be reached, and the audited queue's policy requires it.
  const policy = writePolicy(`version: 1
schedule: 1s
audit: { url: "postgres://nobody@127.0.0.1:1/none?connect_timeout=1" }
policies:
  - name: audited
    queueNamePattern: audited
    rules: { completed: { maxCount: 0 } }
    sla: { auditRequired: true }
  - { name: plain, queueNamePattern: plain, rules: { completed: { maxCount: 0 } } }
`);
  const port = await freePort();
  const d = startDaemon(['--redis', redis.url(db), '--config', policy, '--listen', `127.0.0.1:${port}`]);
  await waitLogged(d, 'two failures in a row', async () => Number(await client.hget('bullsweep:retry:bull:audited', 'failures')) >= 2);
  const record = await client.hgetall('bullsweep:retry:bull:audited');
  assert.match(record.lastError, /auditRequired/);
  // The wait the failure set, as the daemon logs it: 2^failures s (a tenth more at most).
  const failed = new RegExp(`bull:audited: run failed \\(${record.failures} in a row\\).*next attempt in (\\d+) ms`);
  await waitLogged(d, 'the failure logged', async () => failed.test(d.log()));
  const waits = Number(d.log().match(failed)[1]);
  const backoff = 1000 * 2 ** Number(record.failures);
  assert.ok(waits >= backoff && waits <= backoff * 1.1, `the next attempt waits ${waits} ms`);
  assert.equal(await audited.getCompletedCount(), 5, 'nothing removed without its audit record');
  await waitLogged(d, 'the other queue swept', async () => (await plain.getCompletedCount()) === 0);
  const { body } = await httpGet(port, '/metrics');
  assert.ok(metric(body, 'bullsweep_failed_batches_total', { queue: 'bull:audited' }) >= 2, body);
  assert.equal(metric(body, 'bullsweep_alert', { queue: 'bull:audited' }), 0, body);
  assert.match(d.log(), /bull:audited: run failed \(2 in a row\)/);
  assert.equal((await d.kill('SIGTERM')).code, 0);
  await audited.close();
  await plain.close();
});
