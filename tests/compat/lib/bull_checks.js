// What a legacy Bull queue's keyspace must hold, judged by Bull's own API and the keys: every
// id in a state is readable by Bull, ids in `priority` wait in `wait` or `paused`, and no job
// hash, log list or lock outlives its job or sits in no state. No `events` stream exists
// (Bull sends its events over pub/sub) and no `meta` hash holds BullMQ's fields.
'use strict';
const assert = require('node:assert/strict');
const { bullQueue } = require('./bull_dataset');
const { keysUnder } = require('./consistency');

const LISTS = ['wait', 'paused', 'active'];
const SETS = ['delayed', 'completed', 'failed'];
const QUEUE_KEYS = new Set([...LISTS, ...SETS, 'priority', 'id', 'meta', 'meta-paused', 'stalled',
  'stalled-check', 'repeat', 'limiter']);

// Asserts a Bull queue is whole; returns the ids per state. `bullmqMeta`: a BullMQ Queue was
// opened on the queue's name, so its meta hash holds BullMQ's fields (written by BullMQ).
async function assertBullWhole(redis, db, spec, { bullmqMeta = false } = {}) {
  const client = redis.client(db);
  const base = `${spec.prefix}:${spec.name}`;
  const where = new Map();
  const byState = {};
  for (const s of LISTS) byState[s] = await client.lrange(`${base}:${s}`, 0, -1);
  for (const s of SETS) byState[s] = await client.zrange(`${base}:${s}`, 0, -1);
  for (const [s, ids] of Object.entries(byState)) for (const id of ids) where.set(id, [...(where.get(id) || []), s]);
  const q = bullQueue(redis.connection(db), spec);
  try {
    for (const [id, states] of where) {
      assert.equal(states.length, 1, `${base}: job ${id} is in ${states.join(' and ')}`);
      const job = await q.getJob(id);
      assert.ok(job, `${base}: id ${id} in ${states[0]} has no job Bull can read`);
    }
    for (const id of await client.zrange(`${base}:priority`, 0, -1)) {
      assert.ok(['wait', 'paused'].includes((where.get(id) || [])[0]), `${base}: ${id} is ranked in priority but does not wait`);
    }
    for (const key of await keysUnder(client, base)) {
      const rest = key.slice(base.length + 1);
      if (QUEUE_KEYS.has(rest) || rest.startsWith('de:') || rest.startsWith('limiter:')) continue;
      const owner = rest.replace(/:(logs|lock)$/, '');
      assert.ok(where.has(owner), `${base}: ${key} belongs to no job in a state`);
    }
    assert.notEqual(await client.type(`${base}:events`), 'stream', `${base}: Bull has no events stream`);
    if (!bullmqMeta) {
      assert.deepEqual(await client.hmget(`${base}:meta`, 'opts.maxLenEvents', 'version'), [null, null], `${base}: no BullMQ meta`);
    }
  } finally {
    await q.close();
  }
  return byState;
}

module.exports = { assertBullWhole };
