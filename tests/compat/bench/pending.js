// Benchmark contender for `bench --strategy pending`: BullMQ's own removal of a job by id
// (Queue.remove runs the script Job.remove runs, without fetching the job first), looped over
// the ids the bench names, oldest first, until done or until <cap seconds> have passed.
// Before saying ready it reads a few of the seeded jobs back with Queue.getJob and
// Job.getState, and fails unless BullMQ sees them as it would have written them.
// Usage: node pending.js <host> <port> <db> <queue> <first id> <last id> <state> <cap seconds>
// (password in BULLSWEEP_BENCH_REDIS_PASSWORD; state is `waiting` or `delayed`). Prints
// "ready", waits for a line on stdin, removes, then prints
// {"ms": <time spent>, "removed": <jobs>, "tried": <ids tried>, "checked": <jobs read back>}.
'use strict';
const { Queue } = require('bullmq');

// Reads jobs `ids` back and throws unless each is what the seed meant to write.
async function check(queue, ids, state) {
  for (const id of ids) {
    const job = await queue.getJob(String(id));
    if (!job) throw new Error(`job ${id}: Queue.getJob found nothing`);
    const seen = await job.getState();
    const problems = [];
    if (job.id !== String(id)) problems.push(`id ${job.id}`);
    if (seen !== state) problems.push(`state ${seen}`);
    if (!job.data || job.data.orderId !== String(id)) problems.push(`data ${JSON.stringify(job.data)}`);
    if (!Number.isFinite(job.timestamp) || job.timestamp <= 0) problems.push(`timestamp ${job.timestamp}`);
    if (state === 'delayed' && !(job.delay > 0 && job.opts.delay === job.delay)) {
      problems.push(`delay ${job.delay}, opts.delay ${job.opts.delay}`);
    }
    if (problems.length > 0) throw new Error(`job ${id} as BullMQ reads it: ${problems.join(', ')}`);
  }
  return ids.length;
}

async function main() {
  const [host, port, db, name, firstArg, lastArg, state, capArg] = process.argv.slice(2);
  const first = Number(firstArg);
  const last = Number(lastArg);
  const capMs = Number(capArg) * 1000;
  const password = process.env.BULLSWEEP_BENCH_REDIS_PASSWORD || undefined;
  const queue = new Queue(name, { connection: { host, port: Number(port), db: Number(db), password } });
  await queue.waitUntilReady();
  const sample = [...new Set([first, Math.floor((first + last) / 2), last])];
  const checked = await check(queue, sample, state);
  process.stdout.write('ready\n');
  process.stdin.once('data', async () => {
    const started = process.hrtime.bigint();
    const elapsedMs = () => Number(process.hrtime.bigint() - started) / 1e6;
    let removed = 0;
    let tried = 0;
    for (let id = first; id <= last && elapsedMs() < capMs; id += 1) {
      tried += 1;
      if ((await queue.remove(String(id))) === 1) removed += 1;
    }
    const ms = elapsedMs();
    process.stdout.write(JSON.stringify({ ms, removed, tried, checked }) + '\n');
    await queue.close();
    process.exit(0);
  });
}

module.exports = { check };

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
