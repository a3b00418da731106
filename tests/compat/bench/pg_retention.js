// `bullsweep bench --strategy postgres-retention`'s load: JOBS jobs added to queue `bench`
// (which already holds the seed's completed jobs), with `removeOnComplete: { count: KEEP }`
// when MODE is `remove-on-complete`, then a Worker of concurrency 8 completing them, for at
// most SECONDS. Usage: node pg_retention.js URL MODE JOBS KEEP SECONDS.
// Prints {"completed": …, "failed": …, "ms": …, "finishedLeft": …, "errors": […]}.
'use strict';
require('../lib/bullmq_pg');
const { Queue, Worker } = require('bullmq');

(async () => {
  const [url, mode, jobs, keep, seconds] = [process.argv[2], process.argv[3], Number(process.argv[4]), Number(process.argv[5]), Number(process.argv[6])];
  const q = new Queue('bench', { connection: url });
  const opts = mode === 'remove-on-complete' ? { removeOnComplete: { count: keep } } : {};
  for (let i = 0; i < jobs; i += 1000) {
    const n = Math.min(1000, jobs - i);
    await q.addBulk(Array.from({ length: n }, (_, k) => ({ name: 'send', data: { i: i + k }, opts })));
  }
  let completed = 0;
  let failed = 0;
  const errors = new Set();
  const started = Date.now();
  const worker = new Worker('bench', async () => ({ ok: true }), { connection: url, concurrency: 8 });
  worker.on('completed', () => { completed += 1; });
  worker.on('failed', (_, e) => { failed += 1; errors.add(String(e && e.message).slice(0, 120)); });
  worker.on('error', (e) => { errors.add(String(e && e.message).slice(0, 120)); });
  while (completed + failed < jobs && Date.now() - started < seconds * 1000) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const ms = Date.now() - started;
  await worker.close(true);
  const counts = await q.getJobCounts();
  await q.close();
  console.log(JSON.stringify({ completed, failed, ms, finishedLeft: counts.completed, errors: [...errors] }));
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
