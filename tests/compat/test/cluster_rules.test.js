// The rules beyond finished sets on a Redis Cluster, judged by real BullMQ: a stalled active
// job retried (`{bull}:retryq`), exhausted jobs moved into a dead-letter queue of the same tag
// (`{orders}:payments` → `{orders}:payments-dlq`, on another primary), and those turned into
// cold markers with their archived copies. BullMQ's API must read every queue as consistent.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker } = require('bullmq');
const { bullsweep, writePolicy, sleep, waitFor } = require('../lib/harness');
const { startCluster } = require('../lib/cluster');
const { assertConsistent } = require('../lib/consistency');

let cluster;
before(async () => { cluster = await startCluster(); });
after(() => cluster.stop());

test('stalled jobs, moveExhaustedTo and dead letters work on a cluster', async () => {
  const connection = cluster.connection();
  const archiveDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-cluster-dlq-'));
  const policy = writePolicy(`version: 1
archive: { url: "file://${archiveDir}" }
discovery: { layouts: ["{{bull}}:{queue}", "{{orders}}:{queue}"] }
policies:
  - { name: retried, queueNamePattern: retryq, rules: { stalled: { maxAge: 1s, action: retry } } }
  - { name: payments, queueNamePattern: payments, moveExhaustedTo: payments-dlq }
  - name: dead-letters
    queueNamePattern: "*-dlq"
    deadLetter: { warm: 3s, cold: 60s, purgeAfter: 120s }
`);
  const run = async () => {
    const r = await bullsweep(['--json', 'run', '--redis', cluster.url(), '--config', policy]);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    for (const q of report.queues) assert.equal(q.error, undefined, JSON.stringify(q));
    return report;
  };

  // A job taken by a worker that then vanished: its lock expires, nobody recovers it.
  const retryq = new Queue('retryq', { connection, prefix: '{bull}' });
  await retryq.add('abandoned', { n: 1 });
  const vanishing = new Worker('retryq', null, { connection, prefix: '{bull}', lockDuration: 300 });
  const abandoned = await vanishing.getNextJob('vanished');
  await vanishing.close();

  const payments = new Queue('payments', { connection, prefix: '{orders}' });
  const dlq = new Queue('payments-dlq', { connection, prefix: '{orders}' });
  await payments.addBulk([0, 1, 2].map((i) => ({ name: 'charge', data: { card: `c${i}` } })));
  const worker = new Worker('payments', async (job) => {
    await job.log(`trying ${job.data.card}`);
    throw new Error(`declined ${job.data.card}`);
  }, { connection, prefix: '{orders}' });
  await waitFor('three failures', async () => (await payments.getFailedCount()) === 3);
  await worker.close();
  await sleep(1200);

  await run();
  const retried = await retryq.getJob(abandoned.id);
  assert.equal(await retried.getState(), 'waiting');
  assert.equal(retried.stalledCounter, 1);
  assert.equal(await payments.getFailedCount(), 0);
  const moved = await dlq.getFailed(0, -1);
  assert.deepEqual(moved.map((j) => j.data.card).sort(), ['c0', 'c1', 'c2']);
  assert.deepEqual((await dlq.getJobLogs(moved[0].id)).logs, [`trying ${moved[0].data.card}`]);

  // Past `warm`: archived, then a marker BullMQ still lists.
  await sleep(3000);
  const cold = await run();
  const dlqReport = cold.queues.find((q) => q.key === '{orders}:payments-dlq');
  assert.equal(dlqReport.states['failed:deadLetter-cold'].done, 3, JSON.stringify(dlqReport));
  const markers = await dlq.getFailed(0, -1);
  assert.equal(markers.length, 3);
  assert.ok(markers.every((j) => j.name === 'charge' && Object.keys(j.data).length === 0));
  const grep = await bullsweep(['archive', 'grep', 'fields.data.card=c1', '--config', policy]);
  assert.equal(grep.code, 0, grep.stderr);

  const handle = { client: () => cluster.client(), connection: () => cluster.connection() };
  await assertConsistent(handle, 0, [
    { prefix: '{bull}', name: 'retryq' },
    { prefix: '{orders}', name: 'payments' },
    { prefix: '{orders}', name: 'payments-dlq' },
  ]);
  for (const q of [retryq, payments, dlq]) await q.close();
});
