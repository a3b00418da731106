// BullMQ's side of the pending-state differential tests: its own `Job.remove()` of the old
// jobs of one state, the events of every queue as a multiset, and a read of every pending job
// through the API of the BullMQ build that wrote them. The module of that build is passed in,
// so one file judges BullMQ 6.7 and 5.81 alike.
'use strict';
const assert = require('node:assert/strict');

// The keys that hold each pending state, as policy files name the states: a paused queue's
// jobs are `waiting` too (BullMQ 5 keeps them in `paused`).
const STATE_KEYS = {
  waiting: ['wait', 'paused'],
  delayed: ['delayed'],
  prioritized: ['prioritized'],
  'waiting-children': ['waiting-children'],
};

// Ids in a state key of the queue at `base`, of whichever type the key has.
async function idsIn(client, key) {
  const type = await client.type(key);
  if (type === 'list') return client.lrange(key, 0, -1);
  if (type === 'zset') return client.zrange(key, 0, -1);
  return [];
}

// Every job of `state` in `queues` ({prefix, name}): {queue, id, timestamp}, and per queue how
// many jobs the state holds.
async function jobsInState(client, queues, state) {
  const jobs = [];
  const counts = {};
  for (const { prefix, name } of queues) {
    counts[name] = 0;
    for (const suffix of STATE_KEYS[state]) {
      for (const id of await idsIn(client, `${prefix}:${name}:${suffix}`)) {
        counts[name] += 1;
        const timestamp = Number(await client.hget(`${prefix}:${name}:${id}`, 'timestamp'));
        jobs.push({ queue: name, prefix, id, timestamp });
      }
    }
  }
  return { jobs, counts };
}

// BullMQ removes the jobs of `state` whose `timestamp` is before `cutoff`, oldest first, each
// with `Job.remove()` (children removed, BullMQ's default). A job an earlier removal took along
// is gone and skipped; a job that left the state is skipped; a job BullMQ refuses (locked, a
// job scheduler's next job) is kept and listed with BullMQ's error.
// Resolves {selected, done, gone, refused: [{id, queue, error}], counts, countsAfter} (the
// jobs of the state per queue before and after: a removal may release a parent into `wait`).
async function removeOldJobs(mq, connection, client, queues, state, cutoff) {
  const { jobs, counts } = await jobsInState(client, queues, state);
  const selected = jobs.filter((j) => j.timestamp < cutoff)
    .sort((a, b) => a.timestamp - b.timestamp || a.id.localeCompare(b.id));
  const open = new Map();
  const queueFor = ({ prefix, queue }) => {
    const key = `${prefix}:${queue}`;
    if (!open.has(key)) open.set(key, new mq.Queue(queue, { connection, prefix }));
    return open.get(key);
  };
  const done = [];
  const gone = [];
  const refused = [];
  try {
    for (const j of selected) {
      const job = await mq.Job.fromId(queueFor(j), j.id);
      const still = job && (await Promise.all(STATE_KEYS[state].map(async (suffix) => {
        const key = `${j.prefix}:${j.queue}:${suffix}`;
        return (await idsIn(client, key)).includes(j.id);
      }))).some(Boolean);
      if (!still) {
        gone.push(j);
        continue;
      }
      try {
        await job.remove();
        done.push(j);
      } catch (err) {
        refused.push({ ...j, error: err.message });
      }
    }
  } finally {
    for (const q of open.values()) await q.close();
  }
  return { selected, done, gone, refused, counts, countsAfter: (await jobsInState(client, queues, state)).counts };
}

// Every queue events stream of the database (bullsweep's own keys excluded): per key, its
// entries' field lists as JSON, sorted, so that two copies compare by content, not stream id.
async function queueEvents(client) {
  const out = {};
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', '*:events', 'COUNT', 1000);
    for (const key of batch) {
      if (key.startsWith('bullsweep:') || (await client.type(key)) !== 'stream') continue;
      out[key] = (await client.xrange(key, '-', '+')).map(([, fields]) => JSON.stringify(fields)).sort();
    }
    cursor = next;
  } while (cursor !== '0');
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

// BullMQ (the build `mq`) reads database `db` whole: every pending job is readable and in the
// state it is listed in, the counts of the sorted sets match, every flow link points at a job
// that exists (a child's parent; a waiting parent's dependencies), and every deduplication key
// names a job that exists.
async function assertReadable(mq, redis, db, queues) {
  const client = redis.client(db);
  for (const { prefix, name } of queues) {
    const base = `${prefix}:${name}`;
    const queue = new mq.Queue(name, { connection: redis.connection(db), prefix });
    try {
      const counts = await queue.getJobCounts('delayed', 'prioritized', 'waiting-children');
      for (const [state, suffixes] of Object.entries(STATE_KEYS)) {
        for (const suffix of suffixes) {
          const ids = await idsIn(client, `${base}:${suffix}`);
          if (state !== 'waiting') assert.equal(counts[state], ids.length, `${base}: ${state} count`);
          for (const id of ids) {
            const job = await queue.getJob(id);
            assert.ok(job, `${base}: ${id} in ${suffix} is not readable`);
            assert.notEqual(await job.getState(), 'unknown', `${base}: ${id}`);
            if (job.parentKey) {
              assert.equal(await client.exists(job.parentKey), 1, `${base}: ${id}'s parent ${job.parentKey} is gone`);
            }
            if (state === 'waiting-children') {
              for (const child of await client.smembers(`${base}:${id}:dependencies`)) {
                assert.equal(await client.exists(child), 1, `${base}: ${id} waits for ${child}, which is gone`);
              }
            }
          }
        }
      }
      for (const key of await client.keys(`${base}:de:*`)) {
        const id = await client.get(key);
        assert.equal(await client.exists(`${base}:${id}`), 1, `${key} names ${id}, which is gone`);
      }
    } finally {
      await queue.close();
    }
  }
  client.disconnect();
}

module.exports = { STATE_KEYS, removeOldJobs, queueEvents, assertReadable };
