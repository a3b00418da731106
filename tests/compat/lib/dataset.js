// Builds a realistic dataset with real BullMQ: several prefixes and tenants, flows across two
// queues (with failed children whose parents wait), deduplicated jobs with and without TTL,
// custom ids containing ':', a job scheduler, job logs, failed jobs with stack traces, and a
// job held active under a worker's lock.
'use strict';
const { Queue, Worker, FlowProducer } = require('./bullmq');
const { sleep, waitFor } = require('./harness');

// prefix → queue names; the key bases are `${prefix}:${queue}`.
const QUEUES = [
  { prefix: 'bull', name: 'emails' },
  { prefix: 'bull:acme:prod', name: 'billing' },
  { prefix: 'bull:acme:prod', name: 'ledger' },
  { prefix: 'bull:globex:prod', name: 'billing' },
  { prefix: '{app}', name: 'reports' },
];

// The layouts that identify every queue above.
const LAYOUTS = ['bull:{queue}', 'bull:{tenant}:{env}:{queue}', '{{app}}:{queue}'];

// Where the dataset puts what: its queues, the queue with custom ids, dedup keys and the
// scheduler, and the prefix and queues of its flows (parents in `parent`, children there and
// in `other`).
const SHAPE = {
  queues: QUEUES,
  emails: 'bull:emails',
  flows: { prefix: 'bull:acme:prod', parent: 'billing', other: 'ledger' },
};

// The same dataset for a Redis Cluster: hash-tagged prefixes only, queues sharing the `{bull}`
// tag (flows within it) and one with its own, `{orders}`.
const CLUSTER_QUEUES = [
  { prefix: '{bull}', name: 'emails' },
  { prefix: '{bull}', name: 'billing' },
  { prefix: '{bull}', name: 'ledger' },
  { prefix: '{orders}', name: 'orders' },
];
const CLUSTER_LAYOUTS = ['{{bull}}:{queue}', '{{orders}}:{queue}'];
const CLUSTER_SHAPE = {
  queues: CLUSTER_QUEUES,
  emails: '{bull}:emails',
  flows: { prefix: '{bull}', parent: 'billing', other: 'ledger' },
};

async function processor(job) {
  await job.log(`started ${job.id}`);
  if (job.name.startsWith('fail')) {
    throw new Error(`boom ${job.id}`);
  }
  if (job.name === 'hang') {
    return new Promise(() => {}); // held active, under its lock, until the test ends
  }
  return { ok: true, id: job.id, n: job.data.n };
}

async function waitUntilSettled(queues, { activeAllowed }) {
  const deadline = Date.now() + 30000;
  for (;;) {
    let busy = 0;
    let active = 0;
    for (const q of queues) {
      const c = await q.getJobCounts('wait', 'prioritized', 'active');
      busy += c.wait + c.prioritized;
      active += c.active;
    }
    if (busy === 0 && active <= activeAllowed) return;
    if (Date.now() > deadline) throw new Error(`dataset did not settle: ${busy} waiting, ${active} active`);
    await sleep(50);
  }
}

async function build(connection, { jobsPerQueue = 40, shape = SHAPE } = {}) {
  const specs = shape.queues;
  const queues = specs.map(({ prefix, name }) => new Queue(name, { connection, prefix }));
  const byBase = Object.fromEntries(queues.map((q, i) => [`${specs[i].prefix}:${specs[i].name}`, q]));
  const emails = byBase[shape.emails];
  const { prefix: flowPrefix, parent, other } = shape.flows;
  const billing = byBase[`${flowPrefix}:${parent}`];

  // Plain jobs everywhere: most complete, every fifth fails.
  for (const q of queues) {
    for (let n = 0; n < jobsPerQueue; n++) {
      await q.add(n % 5 === 4 ? 'fail-charge' : 'send-email', { n, user: { email: `u${n}@example.com` } });
    }
  }
  // Custom ids with ':' (exactly three parts), deduplication with and without TTL.
  await emails.add('send-email', { n: 1 }, { jobId: 'order:2024:0001' });
  await emails.add('fail-charge', { n: 2 }, { jobId: 'order:2024:0002' });
  await emails.add('send-email', { n: 3 }, { deduplication: { id: 'dedup-forever' } });
  await emails.add('send-email', { n: 4 }, { deduplication: { id: 'dedup-ttl', ttl: 600000 } });
  await emails.add('fail-charge', { n: 5 }, { deduplication: { id: 'dedup-failed', ttl: 600000 } });

  // Flows: parents in billing, children in billing and ledger.
  const flows = new FlowProducer({ connection });
  const acme = { prefix: flowPrefix };
  // A failed child in the parent's own queue: the parent waits for it forever.
  await flows.add({ name: 'parent-same', queueName: parent, ...acme, data: {}, children: [
    { name: 'fail-child', queueName: parent, ...acme, data: { n: 1 } },
    { name: 'child-ok', queueName: other, ...acme, data: { n: 2 } },
  ] });
  // A failed child in another queue.
  await flows.add({ name: 'parent-cross', queueName: parent, ...acme, data: {}, children: [
    { name: 'fail-child', queueName: other, ...acme, data: { n: 3 } },
  ] });
  // A flow that completes: the parent keeps its children's results in :processed.
  await flows.add({ name: 'parent-done', queueName: parent, ...acme, data: {}, children: [
    { name: 'child-ok', queueName: other, ...acme, data: { n: 4 } },
    { name: 'child-ok', queueName: parent, ...acme, data: { n: 5 } },
  ] });
  await flows.close();

  // A job scheduler whose iterations complete.
  await emails.upsertJobScheduler('tick', { every: 150 }, { name: 'tick', data: { n: 0 } });

  const workers = queues.map((q, i) => new Worker(specs[i].name, processor, {
    connection, prefix: specs[i].prefix, lockDuration: 600000, concurrency: 4,
  }));
  await waitUntilSettled(queues, { activeAllowed: 0 });
  await sleep(500); // a few scheduler iterations
  await emails.removeJobScheduler('tick');
  await waitUntilSettled(queues, { activeAllowed: 0 });

  // One job held active under a lock.
  await billing.add('hang', { n: 99 }, { jobId: 'held-by-worker' });
  await waitUntilSettled(queues, { activeAllowed: 1 });
  await Promise.all(workers.map((w) => w.close(true)));
  await Promise.all(queues.map((q) => q.close()));
  return { bases: Object.keys(byBase).sort() };
}

// Adds `n` jobs named `name` with `data(i)` and lets a real worker finish them: job i fails
// when `fail(i)`, else returns `result(i)`. Resolves the jobs added.
async function finishJobs(queue, connection, n, {
  name = 'job', data = (i) => ({ i }), fail = () => false, result = () => 'ok',
} = {}) {
  const jobs = await queue.addBulk(Array.from({ length: n }, (_, i) => ({ name, data: data(i), opts: { attempts: 1 } })));
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

module.exports = { build, finishJobs, QUEUES, LAYOUTS, CLUSTER_QUEUES, CLUSTER_LAYOUTS, CLUSTER_SHAPE };
