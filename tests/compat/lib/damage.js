// The damage `bullsweep doctor` finds, made the way it happens: real BullMQ (the build `mq`,
// 6.7 or 5.81) builds healthy queues, then a fault breaks them (a key deleted, a state entry
// removed, a hash expired, a queue obliterated without its children's parents, a key restored
// from an older copy, a bound lowered by a new deploy). For each kind, `oracle` is what BullMQ
// itself would have left: the same operation done right by BullMQ's API (Job.remove(), the
// finalization that deletes a dedup key), or where BullMQ has no such operation, the damaged
// keyspace minus exactly the keys the repair must delete (named in the kind's comment).
'use strict';
const { waitFor } = require('./harness');

const HOUR = 3600000;
const DAY = 24 * HOUR;

// Runs a Worker on `queueName` until every id in `ids` is completed or failed: jobs named
// `fail*` throw, the others log a line and return their name.
async function finish(mq, connection, queueName, ids, opts = {}) {
  const want = new Set(ids);
  const done = new Set();
  const worker = new mq.Worker(queueName, async (job) => {
    await job.log(`handled ${job.id}`);
    if (job.name.startsWith('fail')) throw new Error(`boom ${job.id}`);
    return { done: job.name };
  }, { connection, ...opts });
  worker.on('completed', (job) => done.add(job.id));
  worker.on('failed', (job) => done.add(job.id));
  await waitFor(`${queueName}: ${ids.join(', ')} finished`, async () => [...want].every((id) => done.has(id)));
  await worker.close();
}

async function withQueue(mq, connection, name, fn, opts = {}) {
  const q = new mq.Queue(name, { connection, ...opts });
  try {
    return await fn(q);
  } finally {
    await q.close();
  }
}

// Removes jobs with BullMQ's own Job.remove() (children too, its default).
async function removeJobs(mq, connection, name, ids) {
  await withQueue(mq, connection, name, async (q) => {
    for (const id of ids) {
      const job = await mq.Job.fromId(q, id);
      if (!job) throw new Error(`${name}: ${id} is not readable for Job.remove()`);
      await job.remove();
    }
  });
}

// Queues no fault touches: finished, waiting, delayed, prioritized jobs, a deduplicated job
// with a TTL, a completed flow: their keys must come out of every repair byte for byte.
const BYSTANDERS = ['steady', 'steady-kids'];
async function buildBystanders(mq, connection) {
  await withQueue(mq, connection, 'steady', async (q) => {
    for (let i = 0; i < 3; i++) await q.add('ok', { i }, { jobId: `s-ok-${i}` });
    await q.add('fail-once', { i: 9 }, { jobId: 's-failed', attempts: 1 });
    const flows = new mq.FlowProducer({ connection });
    await flows.add({ name: 'steady-parent', queueName: 'steady', opts: { jobId: 's-parent' },
      children: [{ name: 'kid', queueName: 'steady-kids', opts: { jobId: 's-kid' } }] });
    await flows.close();
    await finish(mq, connection, 'steady-kids', ['s-kid']);
    await finish(mq, connection, 'steady', ['s-ok-0', 's-ok-1', 's-ok-2', 's-failed', 's-parent']);
    await q.add('later', { i: 1 }, { jobId: 's-later', delay: DAY });
    await q.add('urgent', { i: 2 }, { jobId: 's-urgent', priority: 3 });
    await q.add('wait', { i: 3 }, { jobId: 's-wait', deduplication: { id: 's-throttle', ttl: HOUR } });
  });
}

// Each kind: `queues` it builds (prefix `bull`), `build(mq, connection, client)` → context,
// `fault(ctx, mq, connection, client)` on the copy doctor sees, `oracle(ctx, mq, connection,
// client)` on the copy BullMQ repairs, `found` (the count doctor must report) and `samples`
// (keys of which doctor's samples must name at least one).
const KINDS = {
  // Job hashes whose state entry went (the removal-by-max-age bug of 5.66.6 removed entries
  // and kept data; a partial failure does the same): a completed job with logs, a waiting
  // job with a custom id with colons, a deduplicated waiting job, and a flow child, the only
  // pending child of a parent. BullMQ's Job.remove() of each orphan is the oracle: hash and
  // sub-keys gone, the dedup key gone, the parent released to wait.
  orphanHashes: {
    queues: ['orph', 'orph-parents'],
    found: 4,
    samples: ['bull:orph:o-done', 'bull:orph:order:2024:0007', 'bull:orph:o-dedup', 'bull:orph:o-child'],
    async build(mq, connection) {
      await withQueue(mq, connection, 'orph', async (q) => {
        await q.add('ok', { n: 1 }, { jobId: 'o-done' });
        await q.add('ok', { n: 2 }, { jobId: 'o-done-2' });
        await finish(mq, connection, 'orph', ['o-done', 'o-done-2']);
        await q.add('send', { n: 3 }, { jobId: 'order:2024:0007' });
        await q.add('send', { n: 4 }, { jobId: 'o-dedup', deduplication: { id: 'signup-42' } });
        await q.add('send', { n: 5 }, { jobId: 'o-wait' });
      });
      const flows = new mq.FlowProducer({ connection });
      await flows.add({ name: 'p', queueName: 'orph-parents', opts: { jobId: 'o-parent' },
        children: [{ name: 'c', queueName: 'orph', opts: { jobId: 'o-child' } }] });
      await flows.close();
      return {};
    },
    async fault(ctx, mq, connection, client) {
      await client.zrem('bull:orph:completed', 'o-done');
      for (const id of ['order:2024:0007', 'o-dedup', 'o-child']) await client.lrem('bull:orph:wait', 1, id);
    },
    async oracle(ctx, mq, connection, client) {
      await this.fault(ctx, mq, connection, client);
      await removeJobs(mq, connection, 'orph', ['o-done', 'order:2024:0007', 'o-dedup', 'o-child']);
    },
  },

  // Ids in a state whose job hash is gone: a completed job's hash deleted (its logs stay), a
  // waiting job's hash expired (the EXPIRE layer without the repair), a failed and a delayed
  // job's hash deleted, and a paused queue's waiting job's hash expired (BullMQ 5 keeps it in
  // `paused`, 6 in `wait`). Oracle: BullMQ's Job.remove() of the same jobs before the fault
  // (they have no parent and no dedup id, so nothing a missing hash hides is lost).
  danglingIds: {
    queues: ['dang', 'dang-held'],
    found: 5,
    samples: ['bull:dang:d-done', 'bull:dang:d-wait', 'bull:dang:d-failed', 'bull:dang:d-later', 'bull:dang-held:h-1'],
    async build(mq, connection) {
      await withQueue(mq, connection, 'dang', async (q) => {
        for (const id of ['d-done', 'd-done-2']) await q.add('ok', {}, { jobId: id });
        for (const id of ['d-failed', 'd-failed-2']) await q.add('fail', {}, { jobId: id, attempts: 1 });
        await finish(mq, connection, 'dang', ['d-done', 'd-done-2', 'd-failed', 'd-failed-2']);
        for (const id of ['d-wait', 'd-wait-2']) await q.add('send', {}, { jobId: id });
        for (const id of ['d-later', 'd-later-2']) await q.add('later', {}, { jobId: id, delay: DAY });
        await q.add('urgent', {}, { jobId: 'd-urgent', priority: 2 });
      });
      await withQueue(mq, connection, 'dang-held', async (q) => {
        await q.add('send', {}, { jobId: 'h-1' });
        await q.pause();
        await q.add('send', {}, { jobId: 'h-2' });
      });
      return {};
    },
    async fault(ctx, mq, connection, client) {
      await client.del('bull:dang:d-done', 'bull:dang:d-failed', 'bull:dang:d-later');
      await client.pexpire('bull:dang:d-wait', 1);
      await client.pexpire('bull:dang-held:h-1', 1);
      await waitFor('the expired hashes to go', async () => (await client.exists('bull:dang:d-wait', 'bull:dang-held:h-1')) === 0);
    },
    async oracle(ctx, mq, connection) {
      await removeJobs(mq, connection, 'dang', ['d-done', 'd-wait', 'd-failed', 'd-later']);
      await removeJobs(mq, connection, 'dang-held', ['h-1']);
    },
  },

  // Dedup keys with no TTL naming a job that is gone (its hash and state entry removed by a
  // tool that knows nothing of dedup, bullmq#4311's outage) or finished (the key restored from
  // a copy taken while the job waited, after BullMQ deleted it at finalization). A key with a
  // TTL naming a finished job is BullMQ's throttle mode: not a finding. Oracle: Job.remove()
  // of the gone job (it deletes its de: key); the finished job's key as BullMQ left it (gone).
  staleDedup: {
    queues: ['dedup'],
    found: 2,
    samples: ['bull:dedup:de:gone', 'bull:dedup:de:fin'],
    async build(mq, connection, client) {
      let dump;
      await withQueue(mq, connection, 'dedup', async (q) => {
        await q.add('ok', {}, { jobId: 'fin-job', deduplication: { id: 'fin' } });
        await q.add('ok', {}, { jobId: 'ttl-job', deduplication: { id: 'throttle', ttl: HOUR } });
        dump = await client.dumpBuffer('bull:dedup:de:fin');
        await finish(mq, connection, 'dedup', ['fin-job', 'ttl-job']);
        await q.add('send', {}, { jobId: 'gone-job', deduplication: { id: 'gone' } });
        await q.add('send', {}, { jobId: 'live-job', deduplication: { id: 'live' } });
      });
      if (!dump) throw new Error('no de:fin to copy');
      return { dump: dump.toString('base64') };
    },
    async fault(ctx, mq, connection, client) {
      await client.restore('bull:dedup:de:fin', 0, Buffer.from(ctx.dump, 'base64'));
      await client.del('bull:dedup:gone-job');
      await client.lrem('bull:dedup:wait', 1, 'gone-job');
    },
    async oracle(ctx, mq, connection) {
      await removeJobs(mq, connection, 'dedup', ['gone-job']);
    },
  },

  // Sub-keys of jobs that are gone, left by a script that deleted job hashes and state
  // entries only: a completed parent's :processed and :logs (its child was removed on
  // completion), a completed job's :logs, a waiting parent's :dependencies (it and its only
  // child deleted). Oracle: Job.remove() of the same jobs (the parent takes its child).
  orphanSubkeys: {
    queues: ['subs'],
    found: 4,
    samples: ['bull:subs:sp:processed', 'bull:subs:sp:logs', 'bull:subs:s-1:logs', 'bull:subs:sw:dependencies'],
    async build(mq, connection) {
      await withQueue(mq, connection, 'subs', async (q) => {
        await q.add('ok', {}, { jobId: 's-1' });
        await q.add('ok', {}, { jobId: 's-2' });
      });
      const flows = new mq.FlowProducer({ connection });
      await flows.add({ name: 'parent', queueName: 'subs', opts: { jobId: 'sp' },
        children: [{ name: 'kid', queueName: 'subs', opts: { jobId: 'sc', removeOnComplete: true } }] });
      await finish(mq, connection, 'subs', ['s-1', 's-2', 'sc', 'sp']);
      await flows.add({ name: 'parent', queueName: 'subs', opts: { jobId: 'sw' },
        children: [{ name: 'kid', queueName: 'subs', opts: { jobId: 'swc' } }] });
      await flows.close();
      return {};
    },
    async fault(ctx, mq, connection, client) {
      await client.del('bull:subs:sp', 'bull:subs:s-1', 'bull:subs:sw', 'bull:subs:swc');
      await client.zrem('bull:subs:completed', 'sp', 's-1');
      await client.zrem('bull:subs:waiting-children', 'sw');
      await client.lrem('bull:subs:wait', 1, 'swc');
    },
    async oracle(ctx, mq, connection) {
      await removeJobs(mq, connection, 'subs', ['sp', 's-1', 'sw']);
    },
  },

  // A parent whose pending child vanished (hash and state entry deleted) while the child's
  // key stays in the parent's :dependencies: BullMQ never moves it. Its other child completed.
  // A second parent in a paused queue (BullMQ 5 keeps its ready jobs in `paused`). Oracle:
  // BullMQ's Job.remove() of the children: the parents go to wait (or paused), marker set.
  stuckParents: {
    queues: ['parents', 'held-parents', 'kids', 'kids-done'],
    found: 2,
    samples: ['bull:parents:sp-1', 'bull:held-parents:hp-1'],
    async build(mq, connection) {
      const flows = new mq.FlowProducer({ connection });
      await flows.add({ name: 'p', queueName: 'parents', opts: { jobId: 'sp-1' }, children: [
        { name: 'done', queueName: 'kids-done', opts: { jobId: 'k-done' } },
        { name: 'gone', queueName: 'kids', opts: { jobId: 'k-gone' } },
      ] });
      await flows.add({ name: 'p', queueName: 'parents', opts: { jobId: 'sp-2' }, children: [
        { name: 'wait', queueName: 'kids', opts: { jobId: 'k-wait' } },
      ] });
      await withQueue(mq, connection, 'held-parents', (q) => q.pause());
      await flows.add({ name: 'p', queueName: 'held-parents', opts: { jobId: 'hp-1' }, children: [
        { name: 'gone', queueName: 'kids', opts: { jobId: 'k-gone-2' } },
      ] });
      await flows.close();
      await finish(mq, connection, 'kids-done', ['k-done']);
      return {};
    },
    async fault(ctx, mq, connection, client) {
      await client.del('bull:kids:k-gone', 'bull:kids:k-gone-2');
      await client.lrem('bull:kids:wait', 1, 'k-gone');
      await client.lrem('bull:kids:wait', 1, 'k-gone-2');
    },
    async oracle(ctx, mq, connection) {
      await removeJobs(mq, connection, 'kids', ['k-gone', 'k-gone-2']);
    },
  },

  // Children whose parent is gone: the parent removed without them, by BullMQ's own
  // `Job.remove({ removeChildren: false })` (a waiting child, a completed one, and a child that
  // is itself a parent waiting for a grandchild stay, naming a parent that does not exist).
  // Oracle: BullMQ's Job.remove() of the parent with its children (its default).
  orphanChildren: {
    queues: ['oparents', 'ochildren', 'odone'],
    found: 3,
    samples: ['bull:ochildren:oc-1', 'bull:ochildren:oc-mid', 'bull:odone:oc-done'],
    async build(mq, connection) {
      const flows = new mq.FlowProducer({ connection });
      // oc-done, in another queue, is delayed: a child that is still to run is the damage a
      // parent gone without its children leaves (a finished one is what BullMQ's own removal
      // of a finished parent leaves too, Queue.clean and removeOnComplete: no damage).
      await flows.add({ name: 'p', queueName: 'oparents', opts: { jobId: 'op-1' }, children: [
        { name: 'done', queueName: 'odone', opts: { jobId: 'oc-done', delay: HOUR } },
        { name: 'wait', queueName: 'ochildren', opts: { jobId: 'oc-1' } },
        { name: 'mid', queueName: 'ochildren', opts: { jobId: 'oc-mid' }, children: [
          { name: 'leaf', queueName: 'ochildren', opts: { jobId: 'oc-leaf' } },
        ] },
      ] });
      // Healthy flows beside it, in the same queues.
      await flows.add({ name: 'p', queueName: 'oparents', opts: { jobId: 'op-ok' }, children: [
        { name: 'kid', queueName: 'ochildren', opts: { jobId: 'op-ok-kid' } },
      ] });
      await flows.add({ name: 'p', queueName: 'ochildren', opts: { jobId: 'ok-parent' }, children: [
        { name: 'kid', queueName: 'odone', opts: { jobId: 'ok-kid' } },
      ] });
      await flows.close();
      await finish(mq, connection, 'odone', ['ok-kid']);
      return {};
    },
    async fault(ctx, mq, connection) {
      await withQueue(mq, connection, 'oparents', async (q) => {
        await (await mq.Job.fromId(q, 'op-1')).remove({ removeChildren: false });
      });
    },
    async oracle(ctx, mq, connection, client) {
      // BullMQ's removal bounces the parent through `wait` when its last child goes, which
      // sets the queue's marker (a wake-up hint for workers); doctor has no parent to bounce.
      const marker = await client.exists('bull:oparents:marker');
      await removeJobs(mq, connection, 'oparents', ['op-1']);
      if (!marker) await client.del('bull:oparents:marker');
    },
  },

  // A scheduler template whose entry in `repeat` went: BullMQ's removeJobScheduler can no
  // longer find it (it deletes the template only when it removed the entry). Oracle: the
  // damaged keyspace minus the template `repeat:nightly`; its last iteration job stays.
  orphanSchedulers: {
    queues: ['sched'],
    found: 1,
    samples: ['bull:sched:repeat:nightly'],
    async build(mq, connection) {
      await withQueue(mq, connection, 'sched', async (q) => {
        await q.upsertJobScheduler('nightly', { every: DAY, startDate: Date.now() + HOUR }, { name: 'nightly', data: { s: 1 } });
        await q.upsertJobScheduler('hourly', { every: HOUR, startDate: Date.now() + HOUR }, { name: 'hourly', data: { s: 2 } });
      });
      return {};
    },
    async fault(ctx, mq, connection, client) {
      await client.zrem('bull:sched:repeat', 'nightly');
    },
    async oracle(ctx, mq, connection, client) {
      await this.fault(ctx, mq, connection, client);
      await client.del('bull:sched:repeat:nightly');
    },
  },

  // An events stream over its bound: 400 jobs' events under the default 10,000, then a new
  // deploy constructs the Queue with `streams.events.maxLen: 100` (BullMQ writes it to meta
  // and trims only at the next event). Oracle: the keyspace unchanged (streams are compared
  // apart: the stream must hold exactly its newest 100 entries).
  eventsOverLimit: {
    queues: ['noisy'],
    found: 1,
    samples: ['bull:noisy:events'],
    bound: 100,
    async build(mq, connection) {
      await withQueue(mq, connection, 'noisy', async (q) => {
        await q.addBulk(Array.from({ length: 400 }, (_, i) => ({ name: 'n', data: { i }, opts: { jobId: `n-${i}` } })));
      });
      return {};
    },
    async fault(ctx, mq, connection) {
      await withQueue(mq, connection, 'noisy', async (q) => { await q.waitUntilReady(); }, { streams: { events: { maxLen: 100 } } });
    },
    async oracle(ctx, mq, connection) {
      await this.fault(ctx, mq, connection);
    },
  },
};

// Opens a Queue on each of `names` once, as an application does: BullMQ's Queue writes its
// version into `meta`, which queues made only by a FlowProducer lack (so that a Queue opened
// later by an oracle changes nothing but what it does).
async function openQueues(mq, connection, names) {
  for (const name of names) await withQueue(mq, connection, name, (q) => q.waitUntilReady());
}

module.exports = { openQueues, KINDS, BYSTANDERS, buildBystanders, finish, removeJobs, withQueue, HOUR, DAY };
