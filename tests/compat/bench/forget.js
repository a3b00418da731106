// Benchmark contender for `bench --strategy forget`: erasure written the way a BullMQ user
// would write it, with Queue.getJobs pages over every state, filtered in JS, then job.remove().
// Usage: node forget.js <host> <port> <db> <subject id> <queue>... (password in
// BULLSWEEP_BENCH_REDIS_PASSWORD). Prints "ready", waits for a line on stdin, erases, then
// prints {"ms": <time>, "scanned": <jobs read>, "removed": <jobs removed>} as JSON.
'use strict';
const { Queue } = require('bullmq');
const { eraseByScan } = require('../lib/erase_by_scan');

const STATES = ['wait', 'paused', 'delayed', 'prioritized', 'waiting-children', 'active', 'completed', 'failed'];

async function main() {
  const [host, port, db, subject, ...names] = process.argv.slice(2);
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const connection = { host, port: Number(port), db: Number(db), password };
  const queues = names.map((name) => new Queue(name, { connection }));
  await Promise.all(queues.map((q) => q.waitUntilReady()));
  process.stdout.write('ready\n');
  process.stdin.once('data', async () => {
    const started = process.hrtime.bigint();
    let scanned = 0;
    let removed = 0;
    for (const queue of queues) {
      const done = await eraseByScan(queue, STATES, subject);
      scanned += done.scanned;
      removed += done.removed;
    }
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    process.stdout.write(JSON.stringify({ ms, scanned, removed }) + '\n');
    await Promise.all(queues.map((q) => q.close()));
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
