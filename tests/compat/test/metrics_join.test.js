// bullsweep's metrics join BullMQ's own: each queue series carries `queue_name` and `prefix`
// beside `queue` (the key base), so that BullMQ's `exportPrometheusMetrics`, given the same two
// labels as its global variables (as README "Metrics and health" shows), matches bullsweep's
// series one to one on `on(queue_name, prefix)`, with no label_replace.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue } = require('bullmq');
const {
  startRedis, writePolicy, waitFor, startDaemon, stopDaemons, freePort, httpGet,
} = require('../lib/harness');
const { finishJobs } = require('../lib/dataset');

let redis; let port;
const queues = [];

// `name{labels} value` lines of a text exposition, as {name, labels, value}.
function samples(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const m = line.match(/^([a-z_:]+)\{(.*)\} ([0-9.e+-]+)$/);
    if (!m) continue;
    const labels = {};
    for (const pair of m[2].matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

before(async () => {
  redis = await startRedis();
  const connection = redis.connection(0);
  for (const [prefix, name, n] of [['bull:acme', 'billing', 30], ['bull:globex', 'billing', 12], ['bull:acme', 'mail', 7]]) {
    const queue = new Queue(name, { connection, prefix });
    queues.push(queue);
    await finishJobs(queue, connection, n, { fail: (i) => i % 4 === 0 });
  }
  const policy = writePolicy([
    'version: 1',
    'schedule: 24h',
    'discovery: { layouts: ["bull:{tenant}:{queue}"] }',
    'policies:',
    '  - { name: keep, queueNamePattern: "*", rules: { completed: { maxCount: 1000 } } }',
    '',
  ].join('\n'));
  port = await freePort();
  startDaemon(['--redis', redis.url(0), '--config', policy, '--listen', `127.0.0.1:${port}`]);
  await waitFor('every queue counted', async () => {
    const r = await httpGet(port, '/metrics').catch(() => ({ body: '' }));
    return samples(r.body).filter((s) => s.name === 'bullsweep_jobs' && s.labels.state === 'completed').length === 3;
  });
});

after(async () => {
  for (const queue of queues) await queue.close();
  stopDaemons();
  redis.stop();
});

test('every BullMQ series finds its bullsweep queue on (queue_name, prefix), with the same counts', async () => {
  const ours = samples((await httpGet(port, '/metrics')).body);
  const info = ours.filter((s) => s.name === 'bullsweep_queue_info');
  assert.equal(info.length, 3);
  for (const s of info) {
    assert.equal(s.labels.queue, `${s.labels.prefix}:${s.labels.queue_name}`, JSON.stringify(s.labels));
  }
  for (const queue of queues) {
    const theirs = samples(await queue.exportPrometheusMetrics({ queue_name: queue.name, prefix: queue.opts.prefix }));
    for (const state of ['completed', 'failed']) {
      const bullmq = theirs.find((s) => s.name === 'bullmq_job_count' && s.labels.state === state);
      assert.ok(bullmq, `${queue.name}: ${state}`);
      // The join: the same queue_name and prefix, exactly one partner.
      const on = (s) => s.labels.queue_name === bullmq.labels.queue_name && s.labels.prefix === bullmq.labels.prefix;
      assert.equal(info.filter(on).length, 1, `${queue.opts.prefix}:${queue.name}`);
      const jobs = ours.filter((s) => s.name === 'bullsweep_jobs' && s.labels.state === state && on(s));
      assert.equal(jobs.length, 1);
      assert.equal(jobs[0].value, bullmq.value, `${queue.opts.prefix}:${queue.name} ${state}`);
    }
  }
});
