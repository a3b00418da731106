// Builds legacy Bull (OptimalBits/bull 4.16) data with real Bull: completed and failed jobs
// with logs and stack traces, custom ids holding ':', debounced jobs, jobs finished under
// `removeOnComplete: { count }` (Bull trims the set as they finish), a repeatable job's
// finished iterations and its next one (delayed), prioritized, plain and delayed waiting jobs
// (one named like a BullMQ sub-key of a finished job),
// a paused queue (Bull writes `meta-paused`, and `paused` into a `meta` hash), and a job held
// active under a worker's lock.
'use strict';
// The Bull build under test: `bull` (4.16) by default, or the package named by BULLSWEEP_BULL
// (`bull3`, an alias of Bull 3.29 in package.json).
const Bull = require(process.env.BULLSWEEP_BULL || 'bull');
const { sleep, waitFor } = require('./harness');

// The Bull queues; the key bases are `${prefix}:${name}`. `paused` is paused after it is built.
const BULL_QUEUES = [
  { prefix: 'bull', name: 'legacy-mail' },
  { prefix: 'legacy', name: 'reports' },
  { prefix: 'bull', name: 'legacy-paused', paused: true },
];
const BULL_LAYOUTS = ['bull:{queue}', 'legacy:{queue}'];

// A Bull queue on `connection`: ioredis options, or a function making a client of each kind
// (Bull's `createClient`, as for a Redis Cluster).
function bullQueue(connection, { prefix, name }, opts = {}) {
  if (typeof connection === 'function') return new Bull(name, { createClient: connection, prefix, ...opts });
  return new Bull(name, { redis: { ...connection }, prefix, ...opts });
}

async function processor(job) {
  await job.log(`started ${job.id}`);
  if (job.name === 'fail') throw new Error(`boom ${job.id}`);
  if (job.name === 'hang') return new Promise(() => {});
  return { ok: true, id: job.id };
}

// Adds and processes the finished jobs of one queue; returns once none is left to run but
// the repeatable job's next iteration.
async function finishJobs(q, { repeat }) {
  // First: Bull trims the whole completed set to 3 whenever one of these finishes.
  for (let i = 0; i < 6; i++) await q.add('trimmed', { i }, { removeOnComplete: { count: 3 } });
  for (let i = 0; i < 12; i++) await q.add('send', { i, email: `user${i}@example.com` });
  for (let i = 0; i < 4; i++) await q.add('fail', { i }, { attempts: 1 });
  for (let i = 0; i < 3; i++) await q.add('send', { i }, { jobId: `order:2024:${i}` });
  await q.add('send', { d: 1 }, { debounce: { id: 'digest' } });
  if (repeat) await q.add('tick', {}, { repeat: { every: 150 } });
  q.process('*', 4, processor);
  await waitFor('Bull finishes the jobs', async () => {
    const c = await q.getJobCounts();
    return c.waiting === 0 && c.active === 0 && c.delayed === (repeat ? 1 : 0) && (!repeat || c.completed >= 6);
  }, 30000);
  if (repeat) await sleep(500); // a few iterations of the repeatable job finish
  await q.close();
}

// Builds every Bull queue on `connection`; returns a function that stops the worker holding
// the locked job (call it when the test is done).
async function buildBull(connection, { queues = BULL_QUEUES } = {}) {
  let release = async () => {};
  for (const [n, spec] of queues.entries()) {
    const q = bullQueue(connection, spec);
    await finishJobs(q, { repeat: !spec.paused });
    const adder = bullQueue(connection, spec);
    if (n === 0) {
      // The held job: the only one in wait when a worker of concurrency 1 takes it, and kept
      // under its lock until the test ends.
      await adder.add('hang', { held: true }, { jobId: 'held-by-worker' });
      const holder = bullQueue(connection, spec, { settings: { lockDuration: 60000 } });
      holder.process('*', 1, processor);
      await waitFor('the held job is active', async () => (await holder.getActiveCount()) === 1, 15000);
      release = () => holder.close(true);
    }
    for (let i = 0; i < 3; i++) await adder.add('later', { i }, { priority: 5 + i });
    for (let i = 0; i < 3; i++) await adder.add('later', { i, plain: true });
    for (let i = 0; i < 2; i++) await adder.add('later', { i }, { delay: 3600 * 1000 });
    await adder.add('later', { d: 2 }, { debounce: { id: 'pending-digest' } });
    // A waiting job whose id is a finished job's plus `:processed`: BullMQ's name for a
    // parent's copies, only another job's hash in Bull, which has no flows.
    await adder.add('later', { tricky: true }, { jobId: 'order:2024:1:processed' });
    if (spec.paused) await adder.pause();
    await adder.close();
  }
  return release;
}

module.exports = { BULL_QUEUES, BULL_LAYOUTS, bullQueue, buildBull };
