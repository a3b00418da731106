// `bullsweep bench --strategy postgres`'s dataset: BullMQ 6.7's PostgreSQL schema (its own
// migrations) and `jobs` jobs added by BullMQ's own addBulk to queue `bench`, then marked
// completed as a worker's completion leaves them (state, finish time, return value), spread
// over the last hour. Usage: node pg_seed.js URL JOBS BYTES. Prints {"ms": …}.
'use strict';
const { Client } = require('pg');
require('../lib/bullmq_pg');
const { migrate } = require('../lib/bullmq_pg');
const { Queue } = require('bullmq');

(async () => {
  const [url, jobs, bytes] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4] || 800)];
  const started = Date.now();
  await migrate(url);
  const q = new Queue('bench', { connection: url });
  const filler = 'x'.repeat(Math.max(0, bytes - 120));
  for (let i = 0; i < jobs; i += 1000) {
    const n = Math.min(1000, jobs - i);
    await q.addBulk(Array.from({ length: n }, (_, k) => ({
      name: 'send', data: { user: { id: `u${(i + k) % 9973}`, email: `u${(i + k) % 9973}@example.com` }, payload: filler },
    })));
  }
  await q.close();
  const c = new Client({ connectionString: url });
  await c.connect();
  const now = Date.now();
  await c.query(`UPDATE bullmq.job SET state = 'completed', attempts_made = 1, attempts_started = 1,
    processed_at_ms = $1::bigint - 3600000 + (seq % 3600000), finished_at_ms = $1::bigint - 3600000 + (seq % 3600000) + 40,
    return_value = '{"ok":true}'::jsonb WHERE queue = 'bench'`, [now]);
  await c.query('VACUUM ANALYZE bullmq.job');
  await c.end();
  console.log(JSON.stringify({ ms: Date.now() - started }));
})().catch((e) => { console.error(e); process.exit(1); });
