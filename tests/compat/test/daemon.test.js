// The daemon, judged by real BullMQ: scheduled sweeps whose lastRunAt survives restarts,
// event-driven removal that survives SIGKILL and trimmed streams, replicas that never run one
// queue twice, SIGTERM, SIGHUP, metrics, and a Redis restarted underneath.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue, Worker } = require('bullmq');
const {
  startRedis, writePolicy, sleep, waitFor, startDaemon, httpGet, freePort,
} = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

const range = (n) => Array.from({ length: n }, (_, i) => i);

// Adds `n` jobs and lets a real worker finish them; `fail(i)` makes job i fail.
async function finishJobs(queue, connection, n, { name = 'job', fail = () => false, result = () => 'ok' } = {}) {
  const jobs = await queue.addBulk(range(n).map((i) => ({ name, data: { i }, opts: { attempts: 1 } })));
  const ids = new Set(jobs.map((j) => j.id));
  let finished = 0;
  const worker = new Worker(queue.name, async (job) => {
    if (fail(job.data.i)) throw new Error(`boom ${job.data.i}`);
    return result(job.data.i);
  }, { connection, prefix: queue.opts.prefix, concurrency: 20 });
  worker.on('completed', (job) => { if (ids.has(job.id)) finished += 1; });
  worker.on('failed', (job) => { if (ids.has(job.id)) finished += 1; });
  await waitFor(`${n} jobs finished`, async () => finished === n);
  await worker.close();
  return jobs;
}

function metric(body, name, labels) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = body.split('\n').find((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return line === undefined ? undefined : Number(line.split(' ').pop());
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
  const d = startDaemon(['--redis', redis.url(db), '--config', policy, '--listen', `127.0.0.1:${port}`]);
  await waitFor('readyz', async () => (await httpGet(port, '/readyz').catch(() => ({}))).status === 200);
  assert.equal((await httpGet(port, '/healthz')).status, 200);
  await waitFor('the sweep', async () => (await queue.getCompletedCount()) === 0);
  const last = Number(await client.hget('bullsweep:lastrun', 'bull:sched'));
  assert.ok(last > Date.now() - 60000, `lastRunAt ${last}`);
  await waitFor('metrics', async () => {
    const { body } = await httpGet(port, '/metrics');
    return metric(body, 'bullsweep_jobs_acted_total', { queue: 'bull:sched', action: 'remove' }) === 50
      && metric(body, 'bullsweep_jobs', { queue: 'bull:sched', state: 'completed' }) === 0
      && metric(body, 'bullsweep_last_success_timestamp_seconds', { queue: 'bull:sched' }) > 0;
  });
  const stopping = Date.now();
  const { code } = await d.kill('SIGTERM');
  assert.equal(code, 0, d.log());
  assert.ok(Date.now() - stopping < 10000);
  assert.deepEqual(await client.keys('bullsweep:lock:*'), [], 'locks released');

  // A restart with a 1h schedule finds the recent lastRunAt and does not sweep again.
  await finishJobs(queue, connection, 10);
  const hourly = writePolicy(`version: 1
schedule: 1h
policies:
  - { name: all, queueNamePattern: "*", rules: { completed: { maxCount: 0 } } }
`);
  const again = startDaemon(['--redis', redis.url(db), '--config', hourly]);
  await waitFor('the daemon to start', async () => again.log().includes('daemon started'));
  await sleep(1500);
  assert.equal(await queue.getCompletedCount(), 10, again.log());
  assert.equal(Number(await client.hget('bullsweep:lastrun', 'bull:sched')), last);
  assert.equal((await again.kill('SIGTERM')).code, 0);
  await assertConsistent(redis, db, [{ prefix: 'bull', name: 'sched' }]);
  await queue.close();
});
