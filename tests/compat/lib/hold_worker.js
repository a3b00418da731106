// A Worker process that takes jobs and never finishes them, so that a test can SIGKILL it
// and keep what a killed worker leaves: jobs in `active` under locks that outlive it.
// Usage: node hold_worker.js <bullmq package> <redis url> <queue> <concurrency>
// Prints "active <id>" for each job it takes.
'use strict';
const [pkg, url, queue, concurrency] = process.argv.slice(2);
const { Worker } = require(pkg);
const { hostname, port, pathname } = new URL(url);
const connection = { host: hostname, port: Number(port), db: Number(pathname.slice(1) || 0) };
new Worker(queue, (job) => {
  process.stdout.write(`active ${job.id}\n`);
  return new Promise(() => {});
}, { connection, concurrency: Number(concurrency), lockDuration: 10 * 60000 });
