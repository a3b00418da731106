// Benchmark contender: legacy Bull's own Queue.clean(0, 'completed') on one queue, or with a
// limit L, Queue.clean(0, 'completed', L) called again until it removes nothing (a stall of
// one call per L jobs).
// Usage: node bull_clean.js <host> <port> <db> <queue> [<limit>] (password in
// BULLSWEEP_BENCH_REDIS_PASSWORD). Prints "ready", waits for a line on stdin, cleans, then
// prints {"ms": <time spent in clean>, "removed": <jobs>, "calls": <clean calls>} as JSON.
'use strict';
const Bull = require('bull');

async function main() {
  const [host, port, db, name, limitArg] = process.argv.slice(2);
  const limit = Number(limitArg || 0);
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const queue = new Bull(name, { redis: { host, port: Number(port), db: Number(db), password } });
  await queue.isReady();
  process.stdout.write('ready\n');
  process.stdin.once('data', async () => {
    const started = process.hrtime.bigint();
    let removed = 0;
    let calls = 0;
    for (;;) {
      const ids = await queue.clean(0, 'completed', limit);
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
