// A byte-level snapshot of a whole database, for "changed nothing": every key (streams and
// bullsweep's own keys included) with its type, its DUMP serialization and its expiry.
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

async function rawDump(client) {
  const out = {};
  for (const key of await allKeys(client)) {
    const dump = await client.dumpBuffer(key);
    if (dump === null) continue; // expired between SCAN and DUMP
    out[key] = { type: await client.type(key), dump: dump.toString('hex'), expires: await expiry(client, key) };
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
