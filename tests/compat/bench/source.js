// Benchmark contender for `bench --strategy source`: the seed's approach to jobs whose order
// is gone, written with BullMQ and the `pg` client: for each job id, Job.fromId, one query for
// its order (`data.orderId`), and job.remove() when the order was deleted or is no longer
// pending; over the ids the bench names, until done or until <cap seconds> have passed.
// Before saying ready it reads a few seeded jobs back (pending.js's check).
// Usage: node source.js <host> <port> <db> <queue> <first id> <last id> <postgres url>
// <cap seconds> (Redis password in BULLSWEEP_BENCH_REDIS_PASSWORD). Prints "ready", waits for
// a line on stdin, works, then prints
// {"ms": <time spent>, "examined": <jobs read>, "removed": <jobs>, "queries": <SQL queries>,
//  "checked": <jobs read back>}.
'use strict';
const { Job, Queue } = require('bullmq');
const { Client } = require('pg');
const { check } = require('./pending');

async function main() {
  const [host, port, db, name, firstArg, lastArg, pgUrl, capArg] = process.argv.slice(2);
  const first = Number(firstArg);
  const last = Number(lastArg);
  const capMs = Number(capArg) * 1000;
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const queue = new Queue(name, { connection: { host, port: Number(port), db: Number(db), password } });
  const pg = new Client({ connectionString: pgUrl });
  await Promise.all([queue.waitUntilReady(), pg.connect()]);
  const checked = await check(queue, [...new Set([first, last])], 'delayed');
  process.stdout.write('ready\n');
  process.stdin.once('data', async () => {
    const started = process.hrtime.bigint();
    const elapsedMs = () => Number(process.hrtime.bigint() - started) / 1e6;
    let examined = 0;
    let removed = 0;
    let queries = 0;
    for (let id = first; id <= last && elapsedMs() < capMs; id += 1) {
      const job = await Job.fromId(queue, String(id));
      if (!job) continue;
      examined += 1;
      const { rows } = await pg.query('SELECT status FROM orders WHERE id = $1', [String(job.data.orderId)]);
      queries += 1;
      if (rows.length === 0 || rows[0].status !== 'pending') {
        await job.remove();
        removed += 1;
      }
    }
    const ms = elapsedMs();
    process.stdout.write(JSON.stringify({ ms, examined, removed, queries, checked }) + '\n');
    await Promise.all([queue.close(), pg.end()]);
    process.exit(0);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
