// Redis Cluster differential test: real BullMQ builds the usual dataset on a three-primary
// cluster with a replica each (hash-tagged prefixes; queues sharing `{bull}`, with flows between
// them; `{orders}` with its own tag; dedup keys, a scheduler, logs, a job held active under its
// lock). Every key is copied (DUMP/RESTORE) into a standalone server, where BullMQ's
// Queue.clean runs, while `bullsweep run` runs on the cluster. The two keyspaces must be
// identical, and BullMQ's own API must find the cluster's queues consistent. Then the same
// for legacy Bull's data, under the `{bull}` tag, against Bull's Queue.clean.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue } = require('bullmq');
const { startRedis, dumpKeyspace, bullsweep, writePolicy, sleep } = require('../lib/harness');
const { startCluster } = require('../lib/cluster');
const { build, CLUSTER_QUEUES, CLUSTER_LAYOUTS, CLUSTER_SHAPE } = require('../lib/dataset');
const { assertConsistent } = require('../lib/consistency');

let cluster;
let single;
before(async () => {
  cluster = await startCluster();
  single = await startRedis();
});
after(() => {
  cluster.stop();
  single.stop();
});

// Every key of every primary, as it is, into `target`.
async function copyInto(primaries, target) {
  let copied = 0;
  for (const node of primaries) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'COUNT', 1000);
      for (const key of batch) {
        const dump = await node.dumpBuffer(key);
        const ttl = await node.pttl(key);
        await target.restore(key, ttl > 0 ? ttl : 0, dump, 'REPLACE');
        copied += 1;
      }
      cursor = next;
    } while (cursor !== '0');
  }
  return copied;
}

// The keyspace of every primary, as one.
async function clusterKeyspace() {
  const all = {};
  for (const node of await cluster.primaries()) Object.assign(all, await dumpKeyspace(node));
  return Object.fromEntries(Object.entries(all).sort(([a], [b]) => a.localeCompare(b)));
}

test('bullsweep run on a cluster leaves the keyspace Queue.clean(0, 0) leaves', async () => {
  await build(cluster.connection(), { shape: CLUSTER_SHAPE });
  const primaries = await cluster.primaries();
  const copied = await copyInto(primaries, single.client(0));
  assert.ok(copied > 300, `${copied} keys copied`);
  // The queues sit on more than one primary.
  let holding = 0;
  for (const node of primaries) {
    const [, metas] = await node.scan('0', 'MATCH', '*:meta', 'COUNT', 10000);
    if (metas.length > 0) holding += 1;
  }
  assert.ok(holding > 1, 'the two tags live on different primaries');
  await sleep(20); // every finished job is now older than maxAge below
  const before = await clusterKeyspace();

  for (const { prefix, name } of CLUSTER_QUEUES) {
    const q = new Queue(name, { connection: single.connection(0), prefix });
    for (const state of ['completed', 'failed']) await q.clean(0, 0, state);
    await q.close();
  }
  const config = writePolicy([
    'version: 1',
    'discovery:',
    '  layouts:',
    ...CLUSTER_LAYOUTS.map((l) => `    - "${l}"`),
    'policies:',
    '  - { name: everything, queueNamePattern: "*", rules: { completed: { maxAge: 1ms }, failed: { maxAge: 1ms } } }',
    '',
  ].join('\n'));
  const run = await bullsweep(['--redis', cluster.url(), '--config', config, '--json', 'run']);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(run.stdout);
  assert.equal(report.queues.length, CLUSTER_QUEUES.length, run.stdout);

  const expected = await dumpKeyspace(single.client(0));
  const actual = await clusterKeyspace();
  assert.deepEqual(actual, expected);
  // Not vacuous: jobs, their logs, a parent's :processed and dedup keys went.
  const gone = Object.keys(before).filter((k) => !(k in actual));
  assert.ok(gone.some((k) => k.endsWith(':logs')), 'logs removed');
  assert.ok(gone.some((k) => k.endsWith(':processed')), 'a parent\'s :processed removed');
  assert.ok(gone.some((k) => k.includes(':de:')), 'a dedup key removed');
  assert.ok(gone.some((k) => k.startsWith('{orders}:orders:')), 'the other tag\'s jobs removed');
  assert.ok(Object.keys(actual).some((k) => k.endsWith(':held-by-worker:lock')), 'the locked job stays');

  await assertConsistent({ client: () => cluster.client(), connection: () => cluster.connection() }, 0, CLUSTER_QUEUES);
});

test('legacy Bull on a cluster (a hash-tagged prefix): a run leaves the keyspace Bull\'s Queue.clean leaves', async () => {
  const IORedis = require('ioredis');
  const { bullQueue, buildBull } = require('../lib/bull_dataset');
  // Bull's blocking and subscriber clients may not retry or check readiness.
  const clients = () => cluster.adopt(new IORedis.Cluster(cluster.seeds, {
    enableReadyCheck: false, redisOptions: { maxRetriesPerRequest: null, enableReadyCheck: false },
  }));
  const specs = [{ prefix: '{bull}', name: 'legacy-mail' }, { prefix: '{bull}', name: 'legacy-reports' }];
  for (const node of await cluster.primaries()) await node.flushall();
  await single.client(0).flushall();
  const release = await buildBull(clients, { queues: specs });
  await copyInto(await cluster.primaries(), single.client(0));
  await sleep(20);
  for (const spec of specs) {
    const q = bullQueue(single.connection(0), spec);
    await q.clean(0, 'completed');
    await q.clean(0, 'failed');
    await q.close();
  }
  const config = writePolicy(['version: 1', 'discovery:', '  layouts: ["{{bull}}:{queue}"]', 'policies:',
    '  - { name: everything, queueNamePattern: "*", rules: { completed: { maxAge: 1ms }, failed: { maxAge: 1ms } } }', ''].join('\n'));
  const run = await bullsweep(['--redis', cluster.url(), '--config', config, '--json', 'run']);
  assert.equal(run.code, 0, `${run.stderr}\n${run.stdout}`);
  const report = JSON.parse(run.stdout);
  assert.deepEqual(report.queues.map((q) => [q.key, q.backend, q.error]), specs.map((s) => [`${s.prefix}:${s.name}`, 'bull', undefined]));
  const done = report.queues.flatMap((q) => Object.values(q.states)).reduce((n, s) => n + (s.done || 0), 0);
  assert.ok(done >= 40, `bullsweep removed ${done} jobs`);
  assert.deepEqual(await clusterKeyspace(), await dumpKeyspace(single.client(0)));
  // Bull reads the swept queues on the cluster as it reads the cleaned copy.
  for (const spec of specs) {
    const [onCluster, onCopy] = [bullQueue(clients, spec), bullQueue(single.connection(0), spec)];
    assert.deepEqual(await onCluster.getJobCounts(), await onCopy.getJobCounts());
    const waiting = await onCluster.getWaiting();
    assert.ok(waiting.length > 0 && waiting.every((j) => j && j.id), 'every waiting job readable');
    await onCluster.close();
    await onCopy.close();
  }
  await release();
});
