// The routine operations of BullMQ and Bull the soak draws from: adds (custom ids reused as
// idempotency keys, deduplication, delays, priorities, attempts with backoff), flows, retries
// (one job, and `retryJobs` as bull-board's "Retry all"), promotes, pause and resume,
// `Job.remove`, `Queue.clean`, schedulers, a retry storm on a Bull queue, a worker that dies.
// Each takes the traffic and a PRNG and resolves a line for the op log.
'use strict';
const { QUEUES, byId, jobData } = require('./world');
const { sleep } = require('./traffic');

const NAMES = ['send', 'send', 'send', 'slow', 'export'];

// Job options a producer might give: attempts with backoff, a delay, a priority.
function jobOpts(rng, q, { delayed = 0.2 } = {}) {
  const opts = {};
  if (rng.chance(0.35)) opts.attempts = rng.int(1, 3);
  if (opts.attempts > 1 && rng.chance(0.7)) opts.backoff = { type: 'fixed', delay: rng.int(300, 2000) };
  if (rng.chance(delayed)) opts.delay = rng.int(300, 8000);
  if (rng.chance(0.15)) opts.priority = rng.int(1, 10);
  if (rng.chance(0.04)) opts.removeOnComplete = rng.chance(0.5) ? true : { count: 5 };
  return opts;
}

function describe(opts) {
  return Object.entries(opts).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' ');
}

const routable = () => QUEUES.filter((q) => !q.neverCovered);

async function add(t, rng) {
  const q = rng.pick(routable());
  const name = rng.pick(NAMES);
  const opts = jobOpts(rng, q);
  // Orders carry their own id (an idempotency key) most of the time.
  if (q.ids && rng.chance(0.6)) opts.jobId = t.newOrderId(q);
  const data = jobData(rng, q, t.nextSerial(), name === 'slow' ? { ms: rng.int(400, 1500) } : {});
  const job = await t.producers[q.id].add(name, data, opts);
  t.stats.added += 1;
  return `${q.base} ${name} id=${job.id} ${data.k} ${describe(opts)}`;
}

async function addBulk(t, rng) {
  const q = rng.pick(routable().filter((x) => x.lib !== 'bull'));
  const n = rng.int(2, 8);
  const jobs = Array.from({ length: n }, () => ({ name: 'send', data: jobData(rng, q, t.nextSerial()), opts: jobOpts(rng, q) }));
  await t.producers[q.id].addBulk(jobs);
  t.stats.added += n;
  return `${q.base} ${n} jobs`;
}

// New orders: 2-6 jobs with fresh custom ids (idempotency keys) on a queue whose producers
// give them, added to run at once.
async function orders(t, rng) {
  const q = rng.pick(QUEUES.filter((x) => x.ids));
  const ids = [];
  for (let n = rng.int(2, 6); n > 0; n--) {
    const jobId = t.newOrderId(q);
    await t.producers[q.id].add('send', jobData(rng, q, t.nextSerial()), { jobId });
    ids.push(jobId);
  }
  t.stats.added += ids.length;
  return `${q.base} ${ids.join(' ')}`;
}

// Adds orders whose ids were used before; says for each what the id held.
async function readd(t, rng, q, ids, delayed) {
  const lines = [];
  for (const jobId of ids) {
    const opts = { ...jobOpts(rng, q, { delayed }), jobId };
    const data = jobData(rng, q, t.nextSerial());
    const [exists, pttl, completed, failed] = await Promise.all([t.client.exists(`${q.base}:${jobId}`),
      t.client.pttl(`${q.base}:${jobId}`), t.client.zscore(`${q.base}:completed`, jobId),
      t.client.zscore(`${q.base}:failed`, jobId)]);
    // The library ignores an id whose job exists: only an add that may make a new job (none
    // exists, or its expiry may fire before the add) is an add again.
    if (!exists || (pttl >= 0 && pttl < 2000)) t.noteReadd(q, jobId, !exists && (completed !== null || failed !== null));
    await t.producers[q.id].add('send', data, opts);
    t.stats.added += 1;
    const dangling = completed !== null ? 'completed' : failed !== null ? 'failed' : null;
    const was = exists ? 'the job exists' : dangling ? `its job expired, its id still in ${dangling}` : 'no job';
    lines.push(`${jobId} ${data.k} ${describe(opts)} (${was})`);
  }
  return `${q.base} ${lines.join('; ')}`;
}

// Custom ids added again (idempotency keys): a client submitting 1-4 of its recent orders
// again, ignored while the job exists, a new job once it is gone; often delayed, so that the
// new job is still pending at the next sweep.
async function addReused(t, rng) {
  const q = rng.pick(QUEUES.filter((x) => x.ids && t.recentOrderIds(x, 1).length));
  if (!q) return 'no order yet';
  return readd(t, rng, q, rng.sample(t.recentOrderIds(q, 10), rng.int(1, 4)), 0.6);
}

// A client that submitted a batch of orders submits it again a few seconds later (its retry
// after a timeout): its 3-8 most recent orders and 3-8 older ones, re-added after 2-7 s.
async function resubmit(t, rng) {
  const q = rng.pick(QUEUES.filter((x) => x.ids && t.recentOrderIds(x, 1).length));
  if (!q) return 'no order yet';
  const recent = t.recentOrderIds(q, 40);
  const ids = [...new Set([...recent.slice(0, rng.int(3, 8)), ...rng.sample(recent.slice(8), rng.int(3, 8))])];
  const wait = rng.int(2000, 7000);
  await sleep(wait);
  return `after ${wait}ms: ${await readd(t, rng, q, ids, 0.6)}`;
}

async function addDeduplicated(t, rng) {
  const q = rng.pick(routable());
  const id = `dd-${rng.int(0, 5)}`;
  const dedup = rng.chance(0.3) ? { id, ttl: rng.int(500, 5000) } : { id };
  const opts = { ...jobOpts(rng, q), [q.lib === 'bull' ? 'debounce' : 'deduplication']: dedup };
  const data = jobData(rng, q, t.nextSerial());
  await t.producers[q.id].add('send', data, opts);
  t.stats.added += 1;
  return `${q.base} ${data.k} ${describe(opts)}`;
}

// A flow: a parent and 1-4 children (in the parent's `children` queue), some delayed, some
// failing for good (the parent then waits in waiting-children), sometimes a grandchild.
async function flow(t, rng) {
  const q = rng.pick(QUEUES.filter((x) => x.children));
  const cq = byId.get(q.children);
  const child = () => {
    const data = jobData(rng, cq, t.nextSerial(), { fail: rng.chance(0.25) ? 9 : 0 });
    const opts = {};
    if (rng.chance(0.3)) opts.delay = rng.int(500, 10000);
    if (rng.chance(0.1)) opts.failParentOnFailure = true;
    else if (rng.chance(0.1)) opts.ignoreDependencyOnFailure = true;
    const node = { name: 'part', queueName: cq.name, prefix: cq.prefix, data, opts };
    if (rng.chance(0.1)) node.children = [{ name: 'part', queueName: cq.name, prefix: cq.prefix, data: jobData(rng, cq, t.nextSerial()) }];
    return node;
  };
  const children = Array.from({ length: rng.int(1, 4) }, child);
  const data = jobData(rng, q, t.nextSerial(), { fail: 0 });
  const tree = await t.flows[q.pkg].add({ name: 'export', queueName: q.name, prefix: q.prefix, data, children });
  t.stats.added += 1 + children.length;
  return `${q.base} parent=${tree.job.id} children=${children.length} in ${cq.base}`;
}

// bull-board's "Retry all": every failed (sometimes completed) job back to wait, mostly on a
// queue that has failed jobs (where someone would press it).
async function retryJobs(t, rng) {
  const failing = [];
  for (const x of routable()) if (await t.client.zcard(`${x.base}:failed`)) failing.push(x);
  const q = failing.length && rng.chance(0.8) ? rng.pick(failing) : rng.pick(routable());
  t.noteRetry(q);
  if (q.lib === 'bull') {
    await t.producers[q.id].retryJobs({ count: 100 });
    return `${q.base} failed`;
  }
  const state = rng.chance(0.8) ? 'failed' : 'completed';
  await t.producers[q.id].retryJobs({ state, count: 100 });
  return `${q.base} ${state}`;
}

async function retryOne(t, rng) {
  const q = rng.pick(routable());
  const failed = await t.producers[q.id].getFailed(0, 30);
  if (!failed.length) return `${q.base}: no failed job`;
  const job = rng.pick(failed.filter(Boolean).length ? failed.filter(Boolean) : failed);
  if (!job) return `${q.base}: gone`;
  t.noteRetry(q);
  await (q.lib === 'bull' ? job.retry() : job.retry('failed'));
  return `${q.base} ${job.id}`;
}

async function promote(t, rng) {
  const q = rng.pick(routable());
  if (q.lib !== 'bull' && rng.chance(0.25)) {
    await t.producers[q.id].promoteJobs({ count: 50 });
    return `${q.base} all delayed`;
  }
  const delayed = (await t.producers[q.id].getDelayed(0, 30)).filter(Boolean);
  if (!delayed.length) return `${q.base}: no delayed job`;
  const job = rng.pick(delayed);
  await job.promote();
  return `${q.base} ${job.id}`;
}

async function pauseResume(t, rng) {
  const q = rng.pick(routable());
  const p = t.producers[q.id];
  if (await p.isPaused()) {
    if (!rng.chance(0.6)) return `${q.base} left paused`;
    await p.resume();
    return `${q.base} resumed`;
  }
  if (!rng.chance(0.5)) return `${q.base} left running`;
  await p.pause();
  return `${q.base} paused`;
}

// `Job.remove()` of a job that is not active (Bull's repeat iterations are left: removing one
// ends its chain by Bull's own design).
async function removeJob(t, rng) {
  const q = rng.pick(routable());
  const states = q.lib === 'bull' ? ['waiting', 'delayed', 'completed', 'failed']
    : ['waiting', 'delayed', 'completed', 'failed', 'prioritized', 'waiting-children'];
  const state = rng.pick(states);
  const jobs = (await t.producers[q.id].getJobs([state], 0, 30)).filter((j) => j && !String(j.id).startsWith('repeat:'));
  if (!jobs.length) return `${q.base}: no ${state} job`;
  const job = rng.pick(jobs);
  try {
    await job.remove();
  } catch (err) {
    return `${q.base} ${state} ${job.id}: refused (${err.message})`;
  }
  return `${q.base} ${state} ${job.id}`;
}

async function clean(t, rng) {
  const q = rng.pick(routable());
  const state = rng.pick(['completed', 'failed']);
  const grace = rng.int(0, 5000);
  const limit = rng.int(0, 20);
  const n = q.lib === 'bull' ? await t.producers[q.id].clean(grace, state, limit)
    : await t.producers[q.id].clean(grace, limit, state);
  return `${q.base} ${state} grace=${grace} limit=${limit}: ${n.length} jobs`;
}

async function schedule(t, rng) {
  const q = rng.pick(QUEUES.filter((x) => x.repeat));
  return `${q.base} ${await t.schedule(rng, q)}`;
}

// A burst of Bull jobs that fail their first attempt and come back after a short backoff one
// by one, so Bull's workers fetch each from a drained queue (BRPOPLPUSH, then the lock). They
// go when they complete, as a busy producer's jobs do, so storms do not fill the keyspace.
async function retryStorm(t, rng, queue = null) {
  const q = queue ? byId.get(queue) : rng.pick(QUEUES.filter((x) => x.lib === 'bull' && !x.repeat));
  const n = rng.int(120, 250);
  const backoff = rng.int(700, 2000);
  for (let i = 0; i < n; i++) {
    const data = jobData(rng, q, t.nextSerial(), { ms: 0, fail: rng.int(1, 2) });
    await t.producers[q.id].add('send', data, { attempts: 3, backoff: { type: 'fixed', delay: backoff }, removeOnComplete: true });
    await sleep(rng.int(3, 15));
  }
  t.stats.added += n;
  return `${q.base} ${n} jobs, backoff ${backoff}ms`;
}

async function idle(t, rng) {
  const ms = rng.int(100, 1200);
  await sleep(ms);
  return `${ms}ms`;
}

const LIBRARY_OPS = {
  add, addBulk, orders, addReused, resubmit, addDeduplicated, flow, retryJobs, retryOne, promote, pauseResume, removeJob, clean,
  schedule, retryStorm, idle, crashWorker: (t, rng) => t.crashWorker(rng),
};

module.exports = { LIBRARY_OPS };
