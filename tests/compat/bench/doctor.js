// Benchmark contender for `bench --strategy doctor`: finding BullMQ job hashes that no state
// holds the way users do it today, with the script they post in issues (bullmq#1644, #2870,
// bull#1416) and keep in their repositories: ioredis (BullMQ's own client), SCAN over the
// queue's keys, TYPE of each key that can be a job, then ZSCORE in each sorted-set state and
// LPOS in each list, every command awaited before the next, as a loop written in plain
// async/await does. A key is a job when the text after `bull:<queue>:` has no `:` (sub-keys,
// dedup keys and scheduler keys do) and is not one of the queue's own keys (meta, events, …).
// Read-only: it counts orphans and deletes nothing.
// Usage: node doctor.js <host> <port> <db> <queue>
// (password in BULLSWEEP_BENCH_REDIS_PASSWORD). Prints "ready", waits for a line on stdin,
// scans, then prints
// {"ms": <time spent>, "keys": <keys scanned>, "jobs": <job hashes checked>,
//  "orphans": <job hashes in no state>, "commands": <commands sent>, "maxRssMb": <peak RSS>}.
'use strict';
const Redis = require('ioredis');

// The queue's own keys: never a job.
const QUEUE_KEYS = new Set([
  'wait', 'paused', 'active', 'prioritized', 'delayed', 'completed', 'failed',
  'waiting-children', 'meta', 'id', 'events', 'stalled', 'stalled-check', 'limiter',
  'marker', 'pc', 'repeat',
]);
const SORTED_SETS = ['completed', 'failed', 'delayed', 'prioritized', 'waiting-children'];
const LISTS = ['wait', 'active', 'paused'];

// Whether some state holds `id`, asking each state in turn until one does.
async function inSomeState(redis, prefix, id, count) {
  for (const state of SORTED_SETS) {
    count.commands += 1;
    if ((await redis.zscore(prefix + state, id)) !== null) return true;
  }
  for (const state of LISTS) {
    count.commands += 1;
    if ((await redis.lpos(prefix + state, id)) !== null) return true;
  }
  return false;
}

async function findOrphans(redis, queue) {
  const prefix = `bull:${queue}:`;
  const count = { keys: 0, jobs: 0, orphans: 0, commands: 0 };
  let cursor = '0';
  do {
    count.commands += 1;
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      count.keys += 1;
      const id = key.slice(prefix.length);
      if (id.includes(':') || QUEUE_KEYS.has(id)) continue;
      count.commands += 1;
      if ((await redis.type(key)) !== 'hash') continue;
      count.jobs += 1;
      if (!(await inSomeState(redis, prefix, id, count))) count.orphans += 1;
    }
  } while (cursor !== '0');
  return count;
}

async function main() {
  const [host, port, db, queue] = process.argv.slice(2);
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const redis = new Redis({ host, port: Number(port), db: Number(db), password });
  await redis.ping();
  process.stdout.write('ready\n');
  process.stdin.once('data', async () => {
    const started = process.hrtime.bigint();
    const count = await findOrphans(redis, queue);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const maxRssMb = process.resourceUsage().maxRSS / 1024;
    process.stdout.write(JSON.stringify({ ms, ...count, maxRssMb }) + '\n');
    await redis.quit();
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
