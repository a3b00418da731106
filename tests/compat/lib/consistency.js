// The oracle: BullMQ's own API and the full keyspace must agree that a queue is consistent.
// Every id in a state has a readable job; every job hash is in exactly one state; no sub-key
// outlives its job; job counts match the hashes present.
'use strict';
const assert = require('node:assert/strict');
const { Queue } = require('./bullmq');

const LIST_STATES = ['wait', 'paused', 'active'];
const ZSET_STATES = ['prioritized', 'delayed', 'completed', 'failed', 'waiting-children'];
const SUB_KEYS = ['logs', 'dependencies', 'processed', 'failed', 'unsuccessful', 'lock'];
const QUEUE_KEYS = new Set(['meta', 'id', 'events', 'stalled', 'stalled-check', 'limiter', 'marker', 'pc', 'repeat',
  ...LIST_STATES, ...ZSET_STATES]);

// Every key under `base`: on a Redis Cluster (an ioredis Cluster client), on every primary.
async function keysUnder(client, base) {
  const keys = [];
  const pattern = `${base.replace(/[*?[\]\\]/g, '\\$&')}:*`;
  const nodes = typeof client.nodes === 'function' ? client.nodes('master') : [client];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      keys.push(...batch);
      cursor = next;
    } while (cursor !== '0');
  }
  return keys;
}

async function assertConsistent(redis, db, queues) {
  const client = redis.client(db);
  for (const { prefix, name } of queues) {
    const base = `${prefix}:${name}`;
    const queue = new Queue(name, { connection: redis.connection(db), prefix });
    const where = new Map(); // job id → states holding it
    for (const state of LIST_STATES) {
      for (const id of await client.lrange(`${base}:${state}`, 0, -1)) where.set(id, [...(where.get(id) || []), state]);
    }
    for (const state of ZSET_STATES) {
      for (const id of await client.zrange(`${base}:${state}`, 0, -1)) where.set(id, [...(where.get(id) || []), state]);
    }
    for (const [id, states] of where) {
      assert.equal(states.length, 1, `${base}: job ${id} is in ${states.join(' and ')}`);
      const job = await queue.getJob(id);
      assert.ok(job, `${base}: id ${id} in ${states[0]} has no readable job`);
      assert.equal(job.id, id);
    }
    const rest = (await keysUnder(client, base)).map((k) => k.slice(base.length + 1)).filter((k) => !QUEUE_KEYS.has(k));
    const jobIds = [];
    for (const suffix of rest) {
      if (suffix.startsWith('de:') || suffix.startsWith('dn:') || suffix.startsWith('metrics:') || suffix.startsWith('repeat:') && !suffix.match(/^repeat:[^:]+:\d+$/)) continue;
      const sub = SUB_KEYS.find((s) => suffix.endsWith(`:${s}`) && where.has(suffix.slice(0, -s.length - 1)));
      const owner = SUB_KEYS.map((s) => suffix.endsWith(`:${s}`) ? suffix.slice(0, -s.length - 1) : null).find((o) => o !== null);
      if (!sub && owner !== undefined && (await client.type(`${base}:${owner}`)) === 'hash' && !where.has(suffix)) {
        assert.fail(`${base}: sub-key ${suffix} belongs to job ${owner}, which is in no state`);
      }
      if (sub) continue;
      if ((await client.type(`${base}:${suffix}`)) === 'hash') jobIds.push(suffix);
      else if (owner !== undefined) assert.fail(`${base}: sub-key ${suffix} outlives its job`);
    }
    for (const id of jobIds) {
      assert.ok(where.has(id), `${base}: job hash ${id} is in no state (orphan)`);
    }
    const counts = await queue.getJobCounts(...LIST_STATES, ...ZSET_STATES);
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    assert.equal(total, where.size, `${base}: counts ${JSON.stringify(counts)} vs ${where.size} ids`);
    assert.equal(jobIds.length, where.size, `${base}: ${jobIds.length} job hashes vs ${where.size} ids in states`);
    await queue.close();
  }
  client.disconnect();
}

module.exports = { assertConsistent, keysUnder };
