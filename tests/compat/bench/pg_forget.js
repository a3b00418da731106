// `bench --strategy postgres-forget`'s BullMQ contender: erasure written the way a BullMQ user
// would write it on PostgreSQL, with Queue.getJobs pages over every state of every queue,
// filtered in JS, then job.remove(). Usage: node pg_forget.js URL SUBJECT QUEUE...
// Prints {"ms": …, "scanned": …, "removed": …}.
'use strict';
require('../lib/bullmq_pg');
const { Queue } = require('bullmq');
const { eraseByScan } = require('../lib/erase_by_scan');

const STATES = ['wait', 'delayed', 'prioritized', 'waiting-children', 'active', 'completed', 'failed'];

(async () => {
  const [url, subject, ...names] = process.argv.slice(2);
  const started = process.hrtime.bigint();
  let scanned = 0;
  let removed = 0;
  // One queue open at a time: each holds its own pool of connections.
  for (const name of names) {
    const queue = new Queue(name, { connection: url });
    const done = await eraseByScan(queue, STATES, subject);
    scanned += done.scanned;
    removed += done.removed;
    await queue.close();
  }
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  console.log(JSON.stringify({ ms, scanned, removed }));
})().catch((e) => { console.error(e); process.exit(1); });
