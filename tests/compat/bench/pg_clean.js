// BullMQ's own removal of every completed job of queue `bench` on PostgreSQL:
// Queue.clean(0, LIMIT, 'completed'), looped while a call removes LIMIT (0: one call).
// Usage: node pg_clean.js URL LIMIT. Prints {"removed": …, "ms": …, "calls": …}.
'use strict';
require('../lib/bullmq_pg');
const { Queue } = require('bullmq');

(async () => {
  const [url, limit] = [process.argv[2], Number(process.argv[3] || 0)];
  const q = new Queue('bench', { connection: url });
  await q.getJobCounts();
  const started = process.hrtime.bigint();
  let removed = 0;
  let calls = 0;
  for (;;) {
    const ids = await q.clean(0, limit, 'completed');
    removed += ids.length;
    calls += 1;
    if (limit === 0 || ids.length < limit) break;
  }
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  await q.close();
  console.log(JSON.stringify({ removed, ms, calls }));
})().catch((e) => { console.error(e); process.exit(1); });
