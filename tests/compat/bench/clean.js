// Benchmark contender: BullMQ's own Queue.clean(0, 0, 'completed') on one queue.
// Usage: node clean.js <port> <db> <queue>. Prints "ready", waits for a line on stdin, cleans,
// then prints {"ms": <time spent in clean>, "removed": <jobs>} as JSON.
'use strict';
const { Queue } = require('bullmq');

async function main() {
  const [port, db, name] = process.argv.slice(2);
  const queue = new Queue(name, { connection: { host: '127.0.0.1', port: Number(port), db: Number(db) } });
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
