// `bullsweep report` judged against the keyspace itself: for a queue real BullMQ filled (3,000
// completed jobs of varied sizes, some with logs, 300 failed, some waiting with dedup ids, one
// delayed), the report's bytes are within 5% of the sum of `MEMORY USAGE … SAMPLES 0` over
// every key of the queue, and within the error bound it states; what it calls reclaimable is
// what `run` then frees.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue, Worker } = require('bullmq');
const { startRedis, bullsweep, writePolicy, waitFor } = require('../lib/harness');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

// Every key of the queue with its exact size.
async function exactBytes(client, base) {
  let total = 0;
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${base}:*`, 'COUNT', 1000);
    for (const key of keys) total += Number(await client.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
    cursor = next;
  } while (cursor !== '0');
  return total;
}

test('report measures a real queue within 5% and within its stated bound', async (t) => {
  const connection = redis.connection(0);
  const client = redis.client(0);
  const queue = new Queue('mail', { connection });
  // Closed however the test ends, so that a failed assertion ends the run instead of hanging it.
  t.after(() => queue.close());
  const jobs = Array.from({ length: 3300 }, (_, i) => ({
    name: i % 3 === 0 ? 'digest' : 'send',
    data: { to: `user${i}@example.com`, body: 'x'.repeat(50 + (i * 37) % 900), fail: i % 11 === 0 },
  }));
  await queue.addBulk(jobs);
  const worker = new Worker('mail', async (job) => {
    if (job.id % 4 === 0) await job.log(`sending ${job.data.to}`);
    if (job.data.fail) throw new Error(`bounced ${job.data.to}`);
    return { ok: true, id: job.id };
  }, { connection, concurrency: 50 });
  await waitFor('every job to finish', async () =>
    (await queue.getCompletedCount()) + (await queue.getFailedCount()) === jobs.length);
  await worker.close();
  // Waiting jobs hold their dedup keys (BullMQ drops a job's key when it finishes).
  await queue.addBulk(Array.from({ length: 40 }, (_, i) => ({
    name: 'later', data: { i }, opts: { deduplication: { id: `d${i}` } },
  })));
  await queue.add('scheduled', { at: 'tomorrow' }, { delay: 86_400_000 });
  const failed = await queue.getFailedCount();
  assert.ok(failed > 250 && failed < 350, `${failed} failed`);

  const policy = writePolicy(`version: 1
cost: { perGbMonth: 10, replicas: 1 }
policies:
  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 1ms }, failed: { maxCount: 100 } } }
`);
  const out = await bullsweep(['--json', 'report', '--redis', redis.url(0), '--config', policy]);
  assert.equal(out.code, 0, out.stderr);
  const report = JSON.parse(out.stdout);
  assert.equal(report.queues.length, 1);
  const q = report.queues[0];
  assert.equal(q.key, 'bull:mail');
  const exact = await exactBytes(client, 'bull:mail');
  const off = Math.abs(q.bytes - exact);
  assert.ok(off <= 0.05 * exact, `report ${q.bytes} against ${exact} (${(100 * off / exact).toFixed(2)}%)`);
  assert.ok(off <= q.errorBytes, `off by ${off}, stated bound ${q.errorBytes}`);
  assert.ok(q.errorBytes > 0, 'the completed jobs were sampled, not all read');
  assert.equal(q.states.completed.jobs, jobs.length - failed);
  assert.equal(q.states.completed.sampled, 1000);
  assert.ok(q.classes.logs.bytes > 0 && q.classes.dedup.bytes > 0, JSON.stringify(q.classes));
  // Each of the two copies (the primary and its replica) is priced.
  assert.ok(Math.abs(q.monthlyCost - q.bytes / 2 ** 30 * 10 * 2) < 1e-9, `${q.monthlyCost}`);
  assert.deepEqual(report.price, { perGbMonth: 10, replicas: 1 });
  assert.deepEqual(report.totals.bytes, q.bytes);

  // The CSV holds the same figures, one row per queue under a header.
  const csv = await bullsweep(['report', '--csv', '--redis', redis.url(0), '--config', policy]);
  assert.equal(csv.code, 0, csv.stderr);
  const [header, row, ...rest] = csv.stdout.trimEnd().split('\n').map((l) => l.split(','));
  assert.equal(rest.length, 0, csv.stdout);
  const cell = (name) => row[header.indexOf(name)];
  assert.equal(cell('key'), 'bull:mail');
  assert.equal(cell('rank'), '1');
  // A row's bytes are its classes' sum, and within 5% of the exact size measured now.
  const classes = header.filter((h) => h.endsWith('Bytes') && !['errorBytes', 'reclaimableBytes'].includes(h));
  const sum = classes.reduce((t, h) => t + Number(cell(h)), 0);
  assert.ok(Math.abs(sum - Number(cell('bytes'))) <= classes.length, csv.stdout);
  const exactNow = await exactBytes(client, 'bull:mail');
  assert.ok(Math.abs(Number(cell('bytes')) - exactNow) <= 0.05 * exactNow, `${csv.stdout} against ${exactNow}`);
  assert.ok(Number(cell('logsBytes')) > 0, csv.stdout);

  // What it calls reclaimable is what a run frees.
  const run = await bullsweep(['--json', 'run', '--redis', redis.url(0), '--config', policy]);
  assert.equal(run.code, 0, run.stderr);
  const freed = exact - (await exactBytes(client, 'bull:mail'));
  const offFreed = Math.abs(q.reclaimableBytes - freed);
  assert.ok(offFreed <= 0.05 * freed, `reclaimable ${q.reclaimableBytes}, freed ${freed}`);
});
