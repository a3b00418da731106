// A BullMQ-on-PostgreSQL dataset made by BullMQ 6.7's own API: finished jobs with logs in two
// queues, flows whose parents wait in the same queue and in another, a deduplicated job, a
// job scheduler, delayed and prioritized jobs, and jobs still waiting.
'use strict';
const { Queue, Worker, FlowProducer } = require('bullmq');

const QUEUES = ['orders', 'mail', 'reports'];

async function until(check, what, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// Builds the dataset in the database at `url` (its schema already migrated).
async function build(url) {
  const connection = url;
  const orders = new Queue('orders', { connection });
  const mail = new Queue('mail', { connection });
  const reports = new Queue('reports', { connection });
  for (let i = 0; i < 40; i++) {
    await orders.add(i % 4 === 0 ? 'refund' : 'charge', { i, customer: `c${i % 5}` });
  }
  await orders.add('charge', { dedup: true }, { deduplication: { id: 'charge-once' } });
  for (let i = 0; i < 10; i++) await mail.add('welcome', { i });
  const flows = new FlowProducer({ connection });
  // A parent in another queue, whose children fail and complete in `orders`.
  await flows.add({
    name: 'summary', queueName: 'reports', data: {},
    children: [
      { name: 'charge', queueName: 'orders', data: { fail: true } },
      { name: 'charge', queueName: 'orders', data: { child: 'ok' } },
    ],
  });
  // A parent in the same queue as its failing child.
  await flows.add({
    name: 'batch', queueName: 'mail', data: {},
    children: [{ name: 'welcome', queueName: 'mail', data: { fail: true } }],
  });
  await flows.close();
  const work = async (job) => {
    await job.log(`processing ${job.id}`);
    if (job.data.fail || (job.data.i !== undefined && job.data.i % 3 === 0)) throw new Error(`declined ${job.id}`);
    return { ok: job.id };
  };
  const workers = [new Worker('orders', work, { connection }), new Worker('mail', work, { connection })];
  await until(async () => {
    const [o, m] = await Promise.all([orders.getJobCounts(), mail.getJobCounts()]);
    return o.waiting + o.active === 0 && m.waiting + m.active === 0;
  }, 'the workers to finish');
  await Promise.all(workers.map((w) => w.close()));
  // Jobs that must stay whatever a rule for finished jobs does.
  await orders.add('charge', { later: true }, { delay: 3_600_000 });
  await orders.add('charge', { urgent: true }, { priority: 3 });
  await mail.add('welcome', { waiting: true });
  await orders.upsertJobScheduler('tick', { every: 3_600_000 }, { name: 'tick', data: {} });
  await Promise.all([orders.close(), mail.close(), reports.close()]);
}

// A dataset of pending jobs only, made by BullMQ 6.7's own API, in queue `inbox` and its
// neighbour `outbox`: waiting jobs (one deduplicated), delayed and prioritized jobs, a job
// scheduler's next iteration, a parent waiting for children in its own queue and in `outbox`,
// a parent in `outbox` waiting for a child in `inbox`, and a three-level flow in `inbox`.
async function buildPending(url) {
  const connection = url;
  const inbox = new Queue('inbox', { connection });
  for (let i = 0; i < 6; i++) await inbox.add('note', { i });
  await inbox.add('note', { once: true }, { deduplication: { id: 'note-once' } });
  for (let i = 0; i < 3; i++) await inbox.add('later', { i }, { delay: 3_600_000 + i });
  for (let i = 0; i < 2; i++) await inbox.add('urgent', { i }, { priority: 2 + i });
  await inbox.upsertJobScheduler('tick', { every: 3_600_000 }, { name: 'tick', data: {} });
  const flows = new FlowProducer({ connection });
  await flows.add({
    name: 'bundle', queueName: 'inbox', data: {},
    children: [
      { name: 'part', queueName: 'inbox', data: { n: 1 } },
      { name: 'part', queueName: 'inbox', data: { n: 2 } },
      { name: 'part', queueName: 'outbox', data: { n: 3 } },
    ],
  });
  await flows.add({
    name: 'digest', queueName: 'outbox', data: {},
    children: [{ name: 'part', queueName: 'inbox', data: { n: 4 } }],
  });
  await flows.add({
    name: 'tree', queueName: 'inbox', data: {},
    children: [{ name: 'branch', queueName: 'inbox', data: {}, children: [{ name: 'leaf', queueName: 'inbox', data: {} }] }],
  });
  await flows.close();
  const outbox = new Queue('outbox', { connection });
  await outbox.add('mail', { kept: true });
  await Promise.all([inbox.close(), outbox.close()]);
}

module.exports = { build, buildPending, QUEUES, until };
