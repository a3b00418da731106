// Per kind of damage: `prove` shows, through BullMQ's own API on a copy of the damaged data,
// that the damage is real (what users see: an id that cannot be added, a parent never
// processed); `after` shows on the repaired data that BullMQ works again (the id is added, the
// parent is processed by a Worker). Both get ({mq, connection, client, v5}) of their database
// (v5: the build is BullMQ 5).
'use strict';
const assert = require('node:assert/strict');
const { withQueue, HOUR } = require('./damage');
const { waitFor } = require('./harness');

// Adds a job and tells where it went: {id, state}.
async function addAndLocate(q, opts) {
  const job = await q.add('again', { again: true }, opts);
  return { id: job.id, state: await q.getJobState(job.id) };
}

// Runs a Worker on `name` until `id` completed; resolves the value it saw as children values.
async function processOne(mq, connection, name, id) {
  let values = null;
  const errors = [];
  const worker = new mq.Worker(name, async (job) => {
    if (job.id === id) values = await job.getChildrenValues();
    return 'ok';
  }, { connection });
  worker.on('error', (err) => errors.push(err.message));
  worker.on('failed', (job, err) => errors.push(`${job && job.id}: ${err.message}`));
  await withQueue(mq, connection, name, async (q) => {
    await waitFor(`${name}: ${id} completed`, async () => (await q.getJobState(id)) === 'completed');
  });
  await worker.close();
  assert.deepEqual(errors, [], `${name}: the worker saw no error`);
  return values;
}

const CHECKS = {
  orphanHashes: {
    async prove({ mq, connection }) {
      await withQueue(mq, connection, 'orph', async (q) => {
        assert.deepEqual(await addAndLocate(q, { jobId: 'order:2024:0007' }), { id: 'order:2024:0007', state: 'unknown' },
          'BullMQ answers the add of an orphan\'s custom id with the orphan, in no state');
        assert.equal((await addAndLocate(q, { deduplication: { id: 'signup-42' } })).id, 'o-dedup', 'the orphan\'s dedup id blocks the add');
      });
      await withQueue(mq, connection, 'orph-parents', async (q) => {
        assert.equal(await q.getJobState('o-parent'), 'waiting-children', 'the parent waits for an orphan');
      });
    },
    async after({ mq, connection }) {
      await withQueue(mq, connection, 'orph', async (q) => {
        assert.deepEqual(await addAndLocate(q, { jobId: 'order:2024:0007' }), { id: 'order:2024:0007', state: 'waiting' });
        const added = await addAndLocate(q, { deduplication: { id: 'signup-42' } });
        assert.notEqual(added.id, 'o-dedup', 'the dedup id adds a new job');
        assert.equal(added.state, 'waiting');
      });
      await withQueue(mq, connection, 'orph-parents', async (q) => {
        assert.equal(await q.getJobState('o-parent'), 'waiting', 'the parent was released as BullMQ\'s removal releases it');
      });
      assert.deepEqual(await processOne(mq, connection, 'orph-parents', 'o-parent'), {});
    },
  },
  danglingIds: {
    async prove({ mq, connection }) {
      await withQueue(mq, connection, 'dang', async (q) => {
        const counts = await q.getJobCounts('completed', 'failed', 'wait', 'delayed');
        assert.deepEqual(counts, { completed: 2, failed: 2, wait: 2, delayed: 2 });
        for (const id of ['d-done', 'd-failed', 'd-wait', 'd-later']) assert.equal(await q.getJob(id), undefined, `${id} is listed, not readable`);
      });
    },
    async after({ mq, connection }) {
      await withQueue(mq, connection, 'dang', async (q) => {
        assert.deepEqual(await q.getJobCounts('completed', 'failed', 'wait', 'delayed', 'prioritized'),
          { completed: 1, failed: 1, wait: 1, delayed: 1, prioritized: 1 });
      });
      await processOne(mq, connection, 'dang', 'd-urgent');
      await withQueue(mq, connection, 'dang', async (q) => {
        await waitFor('d-wait-2 done', async () => (await q.getJobState('d-wait-2')) === 'completed');
      });
      await withQueue(mq, connection, 'dang-held', async (q) => {
        assert.equal(await q.count(), 1, 'the paused queue holds its one readable job');
        await q.resume();
      });
      await processOne(mq, connection, 'dang-held', 'h-2');
    },
  },
  staleDedup: {
    async prove({ mq, connection, v5 }) {
      await withQueue(mq, connection, 'dedup', async (q) => {
        assert.equal((await addAndLocate(q, { deduplication: { id: 'fin' } })).id, 'fin-job', 'a key naming a finished job blocks the add');
        const gone = await addAndLocate(q, { deduplication: { id: 'gone' } });
        if (v5) assert.equal(gone.id, 'gone-job', 'BullMQ 5 is blocked by a key naming a gone job (bullmq#4311)');
        else assert.notEqual(gone.id, 'gone-job', 'BullMQ 6 recovers a key naming a gone job at the next add');
      });
    },
    async after({ mq, connection, client }) {
      await withQueue(mq, connection, 'dedup', async (q) => {
        for (const [id, was] of [['fin', 'fin-job'], ['gone', 'gone-job']]) {
          const added = await addAndLocate(q, { deduplication: { id } });
          assert.notEqual(added.id, was, `the dedup id ${id} adds a new job`);
          assert.equal(added.state, 'waiting');
        }
        assert.equal((await addAndLocate(q, { deduplication: { id: 'throttle', ttl: HOUR } })).id, 'ttl-job', 'the throttle key is kept');
      });
      assert.ok(await client.exists('bull:dedup:de:throttle'));
    },
  },
  orphanSubkeys: {
    async prove({ client }) {
      for (const key of ['bull:subs:sp:processed', 'bull:subs:sw:dependencies']) assert.equal(await client.exists(key), 1);
    },
    async after({ mq, connection }) {
      await withQueue(mq, connection, 'subs', async (q) => {
        await q.add('again', {}, { jobId: 'sp' });
        assert.deepEqual(await (await q.getJob('sp')).getChildrenValues(), {}, 'a new job with the id inherits no results');
        assert.equal((await q.getJobLogs('sp')).count, 0, 'nor logs');
      });
    },
  },
  stuckParents: {
    async prove({ mq, connection, client }) {
      await withQueue(mq, connection, 'parents', async (q) => {
        assert.equal(await q.getJobState('sp-1'), 'waiting-children');
      });
      assert.deepEqual(await client.smembers('bull:parents:sp-1:dependencies'), ['bull:kids:k-gone']);
    },
    async after({ mq, connection }) {
      assert.deepEqual(await processOne(mq, connection, 'parents', 'sp-1'), { 'bull:kids-done:k-done': { done: 'done' } });
      await withQueue(mq, connection, 'held-parents', (q) => q.resume());
      assert.deepEqual(await processOne(mq, connection, 'held-parents', 'hp-1'), {});
      await withQueue(mq, connection, 'parents', async (q) => {
        assert.equal(await q.getJobState('sp-2'), 'waiting-children', 'the healthy parent still waits');
      });
    },
  },
  orphanChildren: {
    async prove({ mq, connection, client }) {
      await withQueue(mq, connection, 'ochildren', async (q) => {
        const job = await q.getJob('oc-1');
        assert.equal(job.parentKey, 'bull:oparents:op-1');
        assert.equal(await client.exists(job.parentKey), 0);
      });
    },
    async after({ mq, connection }) {
      await withQueue(mq, connection, 'ochildren', async (q) => {
        for (const id of ['oc-1', 'oc-mid', 'oc-leaf']) assert.equal(await q.getJob(id), undefined, `${id} went with its parent`);
        assert.equal(await q.getJobState('ok-parent'), 'waiting');
      });
      await processOne(mq, connection, 'ochildren', 'ok-parent');
    },
  },
  orphanSchedulers: {
    async prove({ mq, connection, client }) {
      await withQueue(mq, connection, 'sched', async (q) => {
        assert.equal(await q.removeJobScheduler('nightly'), false, 'BullMQ cannot remove the scheduler');
      });
      assert.equal(await client.exists('bull:sched:repeat:nightly'), 1, 'its template stays');
    },
    async after({ mq, connection }) {
      await withQueue(mq, connection, 'sched', async (q) => {
        assert.deepEqual((await q.getJobSchedulers()).map((s) => s.key), ['hourly']);
        await q.upsertJobScheduler('nightly', { every: 2 * HOUR }, { name: 'nightly' });
        assert.ok(await q.getJobScheduler('nightly'));
      });
    },
  },
  eventsOverLimit: {
    async prove({ client }) {
      assert.ok((await client.xlen('bull:noisy:events')) > 300);
      assert.equal(await client.hget('bull:noisy:meta', 'opts.maxLenEvents'), '100');
    },
    async after({ mq, connection, client }) {
      await withQueue(mq, connection, 'noisy', async (q) => {
        await q.add('n', {}, { jobId: 'n-new' });
      }, { streams: { events: { maxLen: 100 } } });
      assert.ok((await client.xlen('bull:noisy:events')) <= 200);
    },
  },
};

module.exports = { CHECKS };
