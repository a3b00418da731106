// Load and contender for `bench --strategy bull-event`, on legacy Bull.
//   node bull_events.js load <host> <port> <db> <queue> <rate> <seconds>
//     adds jobs at <rate> per second for <seconds> and lets real Bull workers complete them;
//     prints "ready", waits for a line on stdin, runs, then prints
//     {"completed": <n>, "ms": <time>} as JSON.
//   node bull_events.js listen <host> <port> <db> <queue>
//     the event-driven cleanup users write for Bull: a `global:completed` listener that
//     removes each job with job.remove(); prints "ready" and runs until killed.
// The password, if any, comes in BULLSWEEP_BENCH_REDIS_PASSWORD.
'use strict';
const Bull = require('bull');
const { addAtRate } = require('./pace');

async function load(redis, name, rate, seconds) {
  const queue = new Bull(name, { redis });
  const workers = [0, 1].map(() => new Bull(name, { redis }));
  await Promise.all([queue, ...workers].map((q) => q.isReady()));
  process.stdout.write('ready\n');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  let completed = 0;
  for (const w of workers) {
    w.on('completed', () => { completed += 1; });
    w.process(100, async () => 'ok');
  }
  const add = (ns) => queue.addBulk(ns.map((n) => ({ name: '__default__', data: { n } })));
  const { ms } = await addAtRate(add, rate, seconds, () => completed);
  await Promise.all(workers.map((w) => w.close()));
  await queue.close();
  process.stdout.write(`${JSON.stringify({ completed, ms })}\n`);
}

async function listen(redis, name) {
  const queue = new Bull(name, { redis });
  queue.on('global:completed', async (jobId) => {
    try {
      const job = await queue.getJob(jobId);
      if (job) await job.remove();
    } catch (err) {
      process.stderr.write(`remove ${jobId}: ${err.message}\n`);
    }
  });
  await queue.isReady();
  // The subscription is made when the listener is registered; give it its round trip.
  await new Promise((r) => setTimeout(r, 200));
  process.stdout.write('ready\n');
}

async function main() {
  const [mode, host, port, db, name, ...rest] = process.argv.slice(2);
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const redis = { host, port: Number(port), db: Number(db), password };
  if (mode === 'load') await load(redis, name, Number(rest[0]), Number(rest[1]));
  else if (mode === 'listen') await listen(redis, name);
  else throw new Error(`unknown mode ${mode}`);
}

main().then(() => { if (process.argv[2] === 'load') process.exit(0); }, (err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
