// Benchmark contender: BullMQ's own Queue.clean(0, 0, 'completed') on one queue.
// Usage: node clean.js <host> <port> <db> <queue> (password in BULLSWEEP_BENCH_REDIS_PASSWORD). Prints "ready", waits for a line on stdin, cleans,
// then prints {"ms": <time spent in clean>, "removed": <jobs>} as JSON.
'use strict';
const { Queue } = require('bullmq');

async function main() {
  const [host, port, db, name] = process.argv.slice(2);
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const queue = new Queue(name, { connection: { host, port: Number(port), db: Number(db), password } });
  await queue.waitUntilReady();
  process.stdout.write('ready\n');
  process.stdin.once('data', async () => {
    const started = process.hrtime.bigint();
    const ids = await queue.clean(0, 0, 'completed');
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    process.stdout.write(JSON.stringify({ ms, removed: ids.length }) + '\n');
    await queue.close();
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
