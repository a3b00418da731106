// The soak's routine traffic: a producer (`Queue`) per queue, flow producers, and workers of the
// queue's own library (BullMQ 6.7, BullMQ 5.81, Bull 4) that check every job's payload and
// report what invariant 1 forbids them to see: a missing job, a job not in the active state,
// a payload no producer made.
'use strict';
const Bull = require('bull');
const { QUEUES, payload, validPayload } = require('./world');

const mq = { bullmq: require('bullmq'), bullmq5: require('bullmq5') };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// What a worker must never see (BullMQ's and Bull's finishing errors).
const FORBIDDEN = /Missing key for job|Missing lock for job|is not in the active state|Lock mismatch for job/;
// How long after a Redis restart a worker's error is not held against bullsweep: a command
// sent before the server stopped may be sent again once it is back.
const RESTART_GRACE_MS = 5000;
const LOCK_MS = 10000;
const CLOSE_WAIT_MS = 20000;

class Traffic {
  constructor({ redis, journal, audit, losses }) {
    this.redis = redis;
    this.journal = journal;
    this.audit = audit;
    this.losses = losses;
    this.retries = {};
    this.readds = new Map();
    // Ids added again while their expired job's id still sat in a finished set, with when.
    this.readdsOverDangling = new Map();
    this.connection = redis.connection();
    this.client = redis.client();
    this.producers = {};
    this.flows = {};
    this.workers = {};
    this.serial = 0;
    this.orders = {};
    this.lastRestartAt = 0;
    this.stats = { added: 0, processed: 0, failedAttempts: 0, opErrors: 0 };
  }

  // Opens every producer and flow producer, registers the repeatable job and the job scheduler,
  // opens a BullMQ `Queue` on each Bull queue marked `bullmqMeta`, and starts the workers.
  async start(rng) {
    for (const q of QUEUES) {
      this.producers[q.id] = q.lib === 'bull'
        ? new Bull(q.name, { redis: { ...this.connection }, prefix: q.prefix })
        : new mq[q.pkg].Queue(q.name, { connection: this.connection, prefix: q.prefix });
    }
    for (const pkg of Object.keys(mq)) this.flows[pkg] = new mq[pkg].FlowProducer({ connection: this.connection });
    // A connection error (Redis restarting) is the clients' to retry; unheard, it would throw.
    for (const p of [...Object.values(this.producers), ...Object.values(this.flows)]) p.on('error', () => {});
    for (const q of QUEUES.filter((x) => x.repeat)) await this.schedule(rng, q);
    for (const q of QUEUES.filter((x) => x.bullmqMeta)) {
      // A migration script (or a misconfigured bull-board adapter) opens BullMQ on Bull's queue.
      const opened = new mq.bullmq.Queue(q.name, { connection: this.connection, prefix: q.prefix });
      await opened.waitUntilReady();
      await opened.close();
    }
    await this.startWorkers();
  }

  // A fresh serial number for a job's data.
  nextSerial() { this.serial += 1; return this.serial; }

  // A new order id (an idempotency key) of queue `q`.
  newOrderId(q) {
    this.orders[q.id] = (this.orders[q.id] || 0) + 1;
    return `${q.ids}-${this.orders[q.id]}`;
  }

  // A retry (one job or all) on queue `q` starts now.
  noteRetry(q) { (this.retries[q.id] = this.retries[q.id] || []).push(Date.now()); }

  // When the last retry on queue `q` at or after `since` started, or null.
  retriedAfter(q, since) {
    const after = (this.retries[q.id] || []).filter((t) => t >= since);
    return after.length ? after[after.length - 1] : null;
  }

  // An id of queue `q` is added again now; `dangling` when its expired job's id was still in a
  // finished set.
  noteReadd(q, id, dangling = false) {
    const now = Date.now();
    this.readds.set(`${q.base}:${id}`, now);
    if (dangling) this.readdsOverDangling.set(`${q.base}:${id}`, now);
  }

  // Whether id `id` of queue `q` (by its `base`) was added again at or after `since`.
  readdedAfter(q, id, since) { return (this.readds.get(`${q.base}:${id}`) || 0) >= since; }

  // The `n` most recent order ids of queue `q`.
  recentOrderIds(q, n) {
    const last = this.orders[q.id] || 0;
    return Array.from({ length: Math.min(n, last) }, (_, i) => `${q.ids}-${last - i}`);
  }

  // Registers (or updates) the queue's repeatable job (Bull) or job scheduler (BullMQ): its
  // data names no person, so no erasure ends its chain.
  async schedule(rng, q) {
    const every = rng.int(1500, 4000);
    const data = payload(`${q.id}#tick`);
    if (q.lib === 'bull') {
      for (const r of await this.producers[q.id].getRepeatableJobs()) {
        await this.producers[q.id].removeRepeatableByKey(r.key);
      }
      await this.producers[q.id].add('tick', data, { repeat: { every } });
    } else {
      await this.producers[q.id].upsertJobScheduler('tick', { every }, { name: 'tick', data });
    }
    return `every ${every}ms`;
  }

  // Starts the workers of every queue (two Bull workers on each Bull queue, so fetches race).
  async startWorkers() {
    for (const q of QUEUES) {
      const n = q.lib === 'bull' ? 2 : 1;
      this.workers[q.id] = [];
      for (let i = 0; i < n; i++) this.workers[q.id].push(this.worker(q));
    }
    await Promise.all(Object.values(this.workers).flat().map((w) => w.ready));
  }

  worker(q) {
    const processor = (job) => this.process(q, job);
    if (q.lib === 'bull') {
      const w = new Bull(q.name, { redis: { ...this.connection }, prefix: q.prefix,
        settings: { lockDuration: LOCK_MS, stalledInterval: 5000 } });
      w.process('*', 2, processor);
      w.on('error', (err) => this.workerError(q, null, err));
      w.on('failed', (job, err) => this.workerError(q, job && job.id, err));
      return { lib: 'bull', handle: w, ready: w.isReady(), close: (force) => w.close(force) };
    }
    const w = new mq[q.pkg].Worker(q.name, processor, { connection: this.connection, prefix: q.prefix,
      concurrency: 3, lockDuration: LOCK_MS, stalledInterval: 5000 });
    w.on('error', (err) => this.workerError(q, null, err));
    w.on('failed', (job, err) => this.workerError(q, job && job.id, err));
    return { lib: 'bullmq', handle: w, ready: w.waitUntilReady(), close: (force) => w.close(force) };
  }

  // The one processor: checks the payload, works for `ms`, fails the first `fail` attempts.
  async process(q, job) {
    const data = job.data;
    if (!validPayload(data)) {
      this.losses.report(q, job.id, `payload:${q.base}:${job.id}`,
        `a ${q.lib} worker of ${q.base} got job ${job.id} with a payload no producer made`,
        { queue: q.base, jobId: job.id, data, attemptsMade: job.attemptsMade, processedOn: job.processedOn,
          auditEventsNamingIt: this.audit.mentioning(q.base, String(job.id)) });
      return { foreign: true };
    }
    if (data.ms) await sleep(data.ms);
    if ((job.attemptsMade || 0) < (data.fail || 0)) {
      this.stats.failedAttempts += 1;
      throw new Error(`card of ${data.user ? data.user.email : 'nobody'} declined (${data.k})`);
    }
    this.stats.processed += 1;
    return { k: data.k };
  }

  workerError(q, failedJobId, err) {
    const message = String(err && err.message);
    if (!FORBIDDEN.test(message)) return;
    // BullMQ's `error` event names the job only in its message.
    const named = message.match(/for job (\S+?)\.? |^Job (\S+) is not/);
    const jobId = failedJobId || (named && (named[1] || named[2])) || null;
    const evidence = { queue: q.base, jobId, error: message, msSinceRedisRestart: Date.now() - this.lastRestartAt,
      auditEventsNamingIt: jobId ? this.audit.mentioning(q.base, String(jobId)) : [] };
    if (Date.now() - this.lastRestartAt < RESTART_GRACE_MS) {
      this.journal.note(`worker error right after a Redis restart (not judged): ${q.base} ${message}`);
      return;
    }
    this.losses.report(q, jobId, `worker:${q.base}:${jobId || message}`,
      `a ${q.lib} worker of ${q.base} saw "${message}"`, evidence);
  }

  // Closes every worker, waiting for the jobs they hold to finish (a quiescent checkpoint). A
  // BullMQ 6.7 worker blocked for jobs was seen never to finish closing after a Redis restart
  // (seed 2, `close()` pending with no job held): after 20 s it is noted and closed by force.
  async stopWorkers() {
    const all = Object.values(this.workers).flat();
    this.workers = {};
    await Promise.all(all.map((w) => this.closeWorker(w)));
  }

  async closeWorker(w) {
    const closed = w.close(false).then(() => true, () => true);
    if (await Promise.race([closed, sleep(CLOSE_WAIT_MS).then(() => false)])) return;
    this.journal.note(`a ${w.lib} worker of ${w.handle.name} did not close within ${CLOSE_WAIT_MS / 1000} s; closed by force`);
    await Promise.race([w.close(true).catch(() => {}), sleep(5000)]);
  }

  // A worker that dies: closed without waiting, its active jobs left under locks that expire.
  async crashWorker(rng) {
    const ids = Object.keys(this.workers);
    if (!ids.length) return 'no workers';
    const id = rng.pick(ids);
    const q = QUEUES.find((x) => x.id === id);
    const [w] = this.workers[id].splice(0, 1);
    w.handle.removeAllListeners('error');
    w.handle.removeAllListeners('failed');
    w.handle.on('error', () => {});
    await w.close(true).catch(() => {});
    const fresh = this.worker(q);
    this.workers[id].push(fresh);
    await fresh.ready;
    return `${q.base}`;
  }

  async close() {
    await this.stopWorkers();
    await Promise.all([...Object.values(this.producers), ...Object.values(this.flows)].map((p) => p.close().catch(() => {})));
  }
}

module.exports = { Traffic, sleep, mq };
