// Benchmark contender: the queue library's own clean on one queue. BullMQ's
// Queue.clean(0, 0, 'completed'), or with a limit L, Queue.clean(0, L, 'completed') called
// again until it removes nothing (a stall of one call per L jobs); with `bull` after the
// limit, legacy Bull's Queue.clean(0, 'completed'[, L]) the same way.
// Usage: node clean.js <host> <port> <db> <queue> [<limit> [bull]] (password in
// BULLSWEEP_BENCH_REDIS_PASSWORD). Prints "ready", waits for a line on stdin, cleans, then
// prints {"ms": <time spent in clean>, "removed": <jobs>, "calls": <clean calls>} as JSON.
'use strict';

// The queue and its clean of `limit` completed jobs, per library.
async function open(library, name, connection) {
  if (library === 'bull') {
    const Bull = require('bull');
    const queue = new Bull(name, { redis: connection });
    await queue.isReady();
    return { queue, clean: (limit) => queue.clean(0, 'completed', limit) };
  }
  const { Queue } = require('bullmq');
  const queue = new Queue(name, { connection });
  await queue.waitUntilReady();
  return { queue, clean: (limit) => queue.clean(0, limit, 'completed') };
}

async function main() {
  const [host, port, db, name, limitArg, library] = process.argv.slice(2);
  const limit = Number(limitArg || 0);
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const { queue, clean } = await open(library, name, { host, port: Number(port), db: Number(db), password });
  process.stdout.write('ready\n');
  process.stdin.once('data', async () => {
    const started = process.hrtime.bigint();
    let removed = 0;
    let calls = 0;
    for (;;) {
      const ids = await clean(limit);
      removed += ids.length;
      calls += 1;
      if (limit === 0 || ids.length === 0) break;
    }
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    process.stdout.write(JSON.stringify({ ms, removed, calls }) + '\n');
    await queue.close();
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
