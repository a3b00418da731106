// The live traffic beside `bullsweep bench --strategy postgres`'s contenders: a producer adding
// one job at a time to queue `live` as fast as it can and a Worker (concurrency 8) completing
// them, until its standard input closes. Usage: node pg_load.js URL.
// Prints {"completed": …, "ms": …, "jobsPerSec": …, "addP99Ms": …, "addMaxMs": …, "failed": …}.
'use strict';
require('../lib/bullmq_pg');
const { Queue, Worker } = require('bullmq');

(async () => {
  const url = process.argv[2];
  const q = new Queue('live', { connection: url });
  await q.getJobCounts();
  let completed = 0;
  let failed = 0;
  const worker = new Worker('live', async () => ({ ok: true }), { connection: url, concurrency: 8 });
  worker.on('completed', () => { completed += 1; });
  worker.on('failed', () => { failed += 1; });
  let done = false;
  process.stdin.on('end', () => { done = true; });
  process.stdin.resume();
  console.error('ready');
  const adds = [];
  const started = Date.now();
  while (!done) {
    // Keep a short backlog: the worker, not the producer, sets the pace.
    const c = await q.getJobCounts('waiting');
    if (c.waiting > 200) { await new Promise((r) => setTimeout(r, 5)); continue; }
    const t = process.hrtime.bigint();
    await q.add('tick', { at: Date.now() });
    adds.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  const ms = Date.now() - started;
  const done0 = completed;
  await worker.close(true);
  await q.close();
  adds.sort((a, b) => a - b);
  const p99 = adds.length ? adds[Math.min(adds.length - 1, Math.floor(adds.length * 0.99))] : 0;
  console.log(JSON.stringify({ completed: done0, failed, ms, jobsPerSec: done0 / (ms / 1000), addP99Ms: p99, addMaxMs: adds[adds.length - 1] || 0 }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
