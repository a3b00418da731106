// A full snapshot of a whole database, for "changed nothing": every key (streams and
// bullsweep's own keys included) with its type, its whole content, its encoding and its expiry.
// Content, not DUMP bytes: a hash or set in a hashtable that is being rehashed serializes
// differently after mere reads (each lookup moves the rehash a step), so DUMP would call a
// read a change.
'use strict';

async function allKeys(client) {
  const keys = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys.sort();
}

// The absolute expiry in ms (PEXPIRETIME, Redis 7), or for older servers whether one is set.
async function expiry(client, key) {
  try {
    return await client.call('PEXPIRETIME', key);
  } catch {
    return (await client.pttl(key)) >= 0 ? 'set' : -1;
  }
}

async function content(client, key, type) {
  switch (type) {
    case 'string': return client.get(key);
    case 'hash': return Object.entries(await client.hgetall(key)).sort();
    case 'list': return client.lrange(key, 0, -1);
    case 'set': return (await client.smembers(key)).sort();
    case 'zset': return client.zrange(key, 0, -1, 'WITHSCORES');
    case 'stream': {
      // Entries with their ids, and what a trim changes besides them.
      const info = await client.call('XINFO', 'STREAM', key);
      const meta = {};
      for (let i = 0; i < info.length; i += 2) {
        if (['length', 'last-generated-id', 'max-deleted-entry-id', 'entries-added'].includes(info[i])) meta[info[i]] = info[i + 1];
      }
      return { meta, entries: await client.xrange(key, '-', '+') };
    }
    default: return (await client.dumpBuffer(key)).toString('hex');
  }
}

async function rawDump(client) {
  const out = {};
  for (const key of await allKeys(client)) {
    const type = await client.type(key);
    if (type === 'none') continue; // expired between SCAN and TYPE
    out[key] = { type, encoding: await client.object('ENCODING', key), value: await content(client, key, type), expires: await expiry(client, key) };
  }
  return out;
}

// The keys whose snapshots differ: {added, removed, changed}.
function diff(before, after) {
  return {
    added: Object.keys(after).filter((k) => !(k in before)),
    removed: Object.keys(before).filter((k) => !(k in after)),
    changed: Object.keys(before).filter((k) => k in after && JSON.stringify(before[k]) !== JSON.stringify(after[k])),
  };
}

module.exports = { rawDump, diff, allKeys };
