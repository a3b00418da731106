// Snapshots of the whole keyspace (every key's type, value and remaining time to live;
// streams by length only) and the per-queue view a checkpoint judges: which ids each state
// holds and which job hashes exist.
'use strict';

async function scanAll(client, match = '*') {
  const keys = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return [...new Set(keys)].sort();
}

// Every key (matching `match`): {type, value, pttl}. Values are read in pipelines of 500 keys;
// a stream's value is its length (BullMQ's events streams change as jobs move, and are judged
// elsewhere).
async function snapshot(client, match = '*') {
  const keys = await scanAll(client, match);
  const out = new Map();
  for (let i = 0; i < keys.length; i += 500) {
    const chunk = keys.slice(i, i + 500);
    const types = (await client.pipeline(chunk.map((k) => ['type', k])).exec()).map(([, t]) => t);
    const reads = chunk.map((k, j) => {
      switch (types[j]) {
        case 'string': return ['get', k];
        case 'hash': return ['hgetall', k];
        case 'list': return ['lrange', k, 0, -1];
        case 'set': return ['smembers', k];
        case 'zset': return ['zrange', k, 0, -1, 'WITHSCORES'];
        case 'stream': return ['xlen', k];
        default: return ['exists', k];
      }
    });
    const values = await client.pipeline(reads).exec();
    const ttls = await client.pipeline(chunk.map((k) => ['pttl', k])).exec();
    chunk.forEach((k, j) => {
      // A key that expired while it was read (PTTL -2) is left out, as if read a moment later.
      if (types[j] === 'none' || ttls[j][1] === -2) return;
      let value = values[j][1];
      if (types[j] === 'set') value = [...value].sort();
      if (types[j] === 'hash') value = Object.fromEntries(Object.entries(value).sort());
      out.set(k, { type: types[j], value, pttl: ttls[j][1] });
    });
  }
  return out;
}

const same = (a, b) => a.type === b.type && JSON.stringify(a.value) === JSON.stringify(b.value) && (a.pttl >= 0) === (b.pttl >= 0);

// The keys that differ between two snapshots: added, removed, changed (value, type or whether
// it expires). Keys that carried a time to live in `before` and are gone in `after` are
// `expired`, not removed; streams are left out unless `streams`.
function diff(before, after, { streams = false } = {}) {
  const out = { added: [], removed: [], changed: [], expired: [] };
  for (const [k, a] of before) {
    if (!streams && a.type === 'stream') continue;
    const b = after.get(k);
    if (!b) (a.pttl >= 0 ? out.expired : out.removed).push(k);
    else if (!same(a, b)) out.changed.push(k);
  }
  for (const [k, b] of after) {
    if (!before.has(k) && (streams || b.type !== 'stream')) out.added.push(k);
  }
  return out;
}

// The ids each state key of queue `base` holds, and for each id its states.
function queueView(snap, base, stateKeys) {
  const states = {};
  const where = new Map();
  for (const s of stateKeys) {
    const e = snap.get(`${base}:${s}`);
    if (!e) { states[s] = []; continue; }
    const ids = e.type === 'zset' ? e.value.filter((_, i) => i % 2 === 0) : e.type === 'list' ? e.value : [];
    states[s] = ids;
    for (const id of ids) where.set(id, [...(where.get(id) || []), s]);
  }
  return { states, where };
}

module.exports = { scanAll, snapshot, diff, queueView };
