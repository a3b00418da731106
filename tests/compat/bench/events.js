// Load and contender for `bench --strategy event`.
//   node events.js load <host> <port> <db> <queue> <rate> <seconds>
//     adds jobs at <rate> per second for <seconds> and lets real BullMQ workers complete them;
//     prints "ready", waits for a line on stdin, runs, then prints
//     {"completed": <n>, "ms": <time>} as JSON.
//   node events.js listen <host> <port> <db> <queue>
//     the event-driven cleanup of the seed article: a QueueEvents listener that removes each
//     job on its `completed` event with job.remove(); prints "ready" and runs until killed.
// The password, if any, comes in BULLSWEEP_BENCH_REDIS_PASSWORD.
'use strict';
const { Queue, Worker, QueueEvents, Job } = require('bullmq');
const { addAtRate } = require('./pace');

const MAX_EVENTS = 5_000_000;

async function load(connection, name, rate, seconds) {
  const queue = new Queue(name, { connection, streams: { events: { maxLen: MAX_EVENTS } } });
  await queue.waitUntilReady();
  const workers = [];
  for (let i = 0; i < 4; i++) {
    workers.push(new Worker(name, async () => 'ok', { connection, concurrency: 100, autorun: false }));
  }
  process.stdout.write('ready\n');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  let completed = 0;
  for (const w of workers) {
    w.on('completed', () => { completed += 1; });
    w.run();
  }
  const add = (ns) => queue.addBulk(ns.map((n) => ({ name: 'e', data: { n } })));
  const { ms } = await addAtRate(add, rate, seconds, () => completed);
  await Promise.all(workers.map((w) => w.close()));
  await queue.close();
  process.stdout.write(`${JSON.stringify({ completed, ms })}\n`);
}

async function listen(connection, name) {
  const queue = new Queue(name, { connection });
  const events = new QueueEvents(name, { connection, lastEventId: '$' });
  await events.waitUntilReady();
  events.on('completed', async ({ jobId }) => {
    try {
      const job = await Job.fromId(queue, jobId);
      if (job) await job.remove();
    } catch (err) {
      process.stderr.write(`remove ${jobId}: ${err.message}\n`);
    }
  });
  process.stdout.write('ready\n');
}

async function main() {
  const [mode, host, port, db, name, ...rest] = process.argv.slice(2);
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const connection = { host, port: Number(port), db: Number(db), password };
  if (mode === 'load') await load(connection, name, Number(rest[0]), Number(rest[1]));
  else if (mode === 'listen') await listen(connection, name);
  else throw new Error(`unknown mode ${mode}`);
}

main().then(() => { if (process.argv[2] === 'load') process.exit(0); }, (err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
