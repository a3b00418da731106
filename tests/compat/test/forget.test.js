// Erasure: real BullMQ puts one person's data (user u42, ann@example.com) in every state, in
// flows (as child, as parent, with copies in parents' :processed and :failed), in a
// deduplication placeholder, in a job scheduler template, in events streams and in archive
// segments, across two tenants, beside another person's (u7) jobs. `bullsweep forget` must
// leave nothing of u42 anywhere, leave u7's jobs byte for byte, keep BullMQ's queues
// consistent and flows completing, wait for active jobs, and be idempotent.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue, Worker, FlowProducer } = require('../lib/bullmq');
const { startRedis, dumpKeyspace, bullsweep, writePolicy, sleep, waitFor } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');

const ID = 'u42';
const EMAIL = 'ann@example.com';
const OTHER = { id: 'u7', email: 'bob@example.com' };
const ann = (extra = {}) => ({ user: { id: ID, email: EMAIL }, ...extra });
const bob = (extra = {}) => ({ user: { ...OTHER }, ...extra });

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

async function streamsText(client) {
  let cursor = '0';
  const out = [];
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', '*:events', 'COUNT', 1000);
    for (const key of batch) out.push(JSON.stringify(await client.xrange(key, '-', '+')));
    cursor = next;
  } while (cursor !== '0');
  return out.join('\n');
}

test('forget erases one person everywhere, once, and BullMQ keeps working', async () => {
  const connection = redis.connection(0);
  const client = redis.client(0);
  const q = (name, tenant = 'acme') => new Queue(name, { connection, prefix: `bull:${tenant}` });
  const orders = q('orders');
  const mail = q('mail');
  const archived = q('archived');
  const vault = q('vault');
  const globex = q('orders', 'globex');
  const all = [orders, mail, archived, vault, globex];

  // Finished jobs: completed (with logs and a return value) and failed, for both people.
  const finisher = (queueName, prefix) => new Worker(queueName, async (job) => {
    await job.log(`handled for ${job.data.user.email}`);
    if (job.name === 'charge') throw new Error(`card of ${job.data.user.email} declined`);
    return { ok: true, user: job.data.user.id };
  }, { connection, prefix });
  const finished = {};
  for (const [queue, prefix] of [[orders, 'bull:acme'], [archived, 'bull:acme'], [vault, 'bull:acme'], [globex, 'bull:globex']]) {
    const jobs = [await queue.add('ship', ann()), await queue.add('charge', ann(), { attempts: 1 })];
    if (queue !== vault) jobs.push(await queue.add('ship', bob()));
    const w = finisher(queue.name, prefix);
    await waitFor(`${queue.name} to finish`, async () => {
      const c = await queue.getJobCounts('completed', 'failed');
      return c.completed + c.failed === jobs.length;
    });
    await w.close();
    finished[`${prefix}:${queue.name}`] = jobs.map((j) => j.id);
  }

  // A job scheduler whose template holds u42, and another person's.
  await mail.upsertJobScheduler('digest-a', { every: 3600000 }, { name: 'digest', data: ann() });
  await mail.upsertJobScheduler('digest-b', { every: 3600000 }, { name: 'digest', data: bob() });

  // Flows in acme:mail (parents) with children in acme:orders.
  const producer = new FlowProducer({ connection, prefix: 'bull:acme' });
  const childWorker = new Worker('orders', async (job) => {
    if (job.name === 'notify-fail') throw new Error(`no mailbox for ${job.data.user.email}`);
    return { sent: job.data.user.id };
  }, { connection, prefix: 'bull:acme', autorun: false });
  // 1. Bob's parent with u42's child (completes: copy in :processed), u42's failing child
  //    (ignored failure: copy in :failed) and Bob's pending child (keeps the parent waiting).
  const f1 = await producer.add({ name: 'digest', queueName: 'mail', data: bob(), children: [
    { name: 'notify', queueName: 'orders', data: ann() },
    { name: 'notify-fail', queueName: 'orders', data: ann(), opts: { ignoreDependencyOnFailure: true } },
    { name: 'notify-later', queueName: 'orders', data: bob(), opts: { delay: 3600000 } },
  ] });
  // 2. Bob's parent whose only child is u42's, still waiting: erasing it releases the parent.
  const f2 = await producer.add({ name: 'digest', queueName: 'mail', data: bob(), children: [
    { name: 'notify-later', queueName: 'orders', data: ann(), opts: { delay: 3600000 } },
  ] });
  // 3. u42's own parent with u42's child: both go.
  const f3 = await producer.add({ name: 'digest', queueName: 'mail', data: ann(), children: [
    { name: 'notify-later', queueName: 'orders', data: ann(), opts: { delay: 3600000 } },
  ] });
  // 4. Bob's parent whose u42 child completed and was removed on completion: only the copy
  //    (its return value names u42) is left.
  const f4 = await producer.add({ name: 'digest', queueName: 'mail', data: bob(), children: [
    { name: 'notify', queueName: 'orders', data: ann(), opts: { removeOnComplete: true } },
    { name: 'notify-later', queueName: 'orders', data: bob(), opts: { delay: 3600000 } },
  ] });
  childWorker.run();
  await waitFor('the flow children to finish', async () => {
    const p1 = await client.hlen(`bull:acme:mail:${f1.job.id}:processed`);
    const p1f = await client.hlen(`bull:acme:mail:${f1.job.id}:failed`);
    const p4 = await client.hlen(`bull:acme:mail:${f4.job.id}:processed`);
    return p1 === 1 && p1f === 1 && p4 === 1;
  });
  await childWorker.close();
  // The active job of u42 is held by a worker until released; it owns dedup id d1 with
  // keepLastIfActive, so a second u42 job with that id waits in the placeholder dn:d1.
  let release;
  const held = new Promise((r) => { release = r; });
  const holder = new Worker('orders', async () => { await held; return { done: true }; }, { connection, prefix: 'bull:acme', lockDuration: 30000 });
  const active = await orders.add('export', ann(), { deduplication: { id: 'd1', keepLastIfActive: true } });
  await waitFor('the job to be active', async () => (await orders.getJobState(active.id)) === 'active');
  await orders.add('export', ann({ again: true }), { deduplication: { id: 'd1', keepLastIfActive: true } });
  assert.ok((await client.hget('bull:acme:orders:dn:d1', 'data')).includes(ID), 'the placeholder holds u42');
  await holder.pause(true).catch(() => {});

  // Waiting, delayed and prioritized jobs of both people.
  const waiting = await orders.add('ship', ann());
  const delayed = await orders.add('ship', ann(), { delay: 3600000 });
  const prioritized = await orders.add('ship', ann(), { priority: 5 });
  const bobWaiting = await orders.add('ship', bob());
  const bobDelayed = await orders.add('ship', bob(), { delay: 3600000 });

  // Archive: acme:archived keeps u42's and Bob's jobs in one segment; acme:vault only u42's.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-forget-'));
  const policy = writePolicy([
    'version: 1',
    'discovery: { layouts: ["bull:{tenant}:{queue}"] }',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    `archive: { url: "file://${dir}/archive" }`,
    'subjects:',
    '  - { name: user, paths: [user.id] }',
    'policies:',
    '  - { name: keep, queueNamePattern: "*", rules: { completed: { maxAge: 30d }, failed: { maxAge: 30d } } }',
    '  - { name: cold, queueNamePattern: archived, rules: { completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } } }',
    '  - { name: vault, queueNamePattern: vault, rules: { completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } } }',
    '',
  ].join('\n'));
  const args = ['--redis', redis.url(0), '--config', policy];
  const archiving = await bullsweep([...args, 'run']);
  assert.equal(archiving.code, 0, archiving.stderr);
  const grep = async (filter) => (await bullsweep([...args, 'archive', 'grep', filter])).stdout.trim().split('\n').filter(Boolean);
  assert.equal((await grep(`fields.data.user.id=${ID}`)).length, 4, 'u42 is archived twice in each of two queues');
  assert.equal((await grep(`fields.data.user.id=${OTHER.id}`)).length, 1);

  // Bad input is refused before anything is read.
  for (const [extra, want] of [
    [['--subject', `user=${ID}`], 'request-id'],
    [['--subject', `person=${ID}`, '--request-id', 'R'], 'unknown subject `person`'],
    [['--subject', 'user=', '--request-id', 'R'], 'empty id'],
    [['--subject', `user=${ID}`, '--request-id', 'R', '--tenant', 'initech'], 'tenant `initech` has no queues'],
  ]) {
    const r = await bullsweep([...args, 'forget', ...extra]);
    assert.equal(r.code, 2, `${extra.join(' ')}: ${r.stderr}`);
    assert.ok(r.stderr.includes(want), `${extra.join(' ')}: ${r.stderr}`);
  }

  const bobKeys = [
    `bull:acme:orders:${bobWaiting.id}`, `bull:acme:orders:${bobDelayed.id}`, `bull:acme:orders:${f1.children[2].job.id}`,
    `bull:acme:orders:${finished['bull:acme:orders'][2]}`, `bull:acme:mail:${f1.job.id}`, `bull:acme:mail:${f2.job.id}`,
    `bull:acme:mail:${f4.job.id}`, 'bull:acme:mail:repeat:digest-b',
  ];
  const hashes = async (keys) => Promise.all(keys.map((k) => client.hgetall(k)));
  const bobBefore = await hashes(bobKeys);
  const globexKeys = finished['bull:globex:orders'].map((id) => `bull:globex:orders:${id}`);
  const globexBefore = await hashes(globexKeys);
  const archiveFiles = () => fs.readdirSync(`${dir}/archive`, { recursive: true }).filter((f) => fs.statSync(path.join(dir, 'archive', f)).isFile()).sort();

  // Dry run: reports everything, changes nothing.
  const before = await dumpKeyspace(client);
  const filesBefore = archiveFiles();
  const dry = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--tenant', 'acme', '--request-id', 'GDPR-1', '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  const planned = JSON.parse(dry.stdout);
  assert.equal(planned.status, 'wouldErase');
  const plannedOrders = planned.queues.find((x) => x.queue === 'bull:acme:orders');
  for (const state of ['completed', 'failed', 'wait', 'delayed', 'prioritized']) {
    assert.ok(plannedOrders.states[state] && plannedOrders.states[state].length > 0, `dry run finds u42 in ${state}: ${JSON.stringify(plannedOrders.states)}`);
  }
  assert.deepEqual(plannedOrders.pending.map((p) => p.id), [active.id]);
  assert.deepEqual(await dumpKeyspace(client), before, 'a dry run changes nothing');
  assert.deepEqual(archiveFiles(), filesBefore);
  assert.ok(!dry.stdout.includes(EMAIL) && !dry.stdout.includes(`"${ID}"`), 'the receipt holds no personal data');

  // Erase acme while u42's job is still active: everything else goes, the active job is pending.
  const first = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--tenant', 'acme', '--request-id', 'GDPR-1', '--wait-active', '1s']);
  assert.equal(first.code, 1, first.stderr);
  const r1 = JSON.parse(first.stdout);
  assert.equal(r1.status, 'pending');
  const ordersReceipt = r1.queues.find((x) => x.queue === 'bull:acme:orders');
  assert.deepEqual(ordersReceipt.pending, [{ id: active.id, state: 'active' }]);
  assert.deepEqual(ordersReceipt.states.wait, [waiting.id]);
  assert.ok(ordersReceipt.states.delayed.includes(delayed.id));
  assert.deepEqual(ordersReceipt.states.prioritized, [prioritized.id]);
  assert.deepEqual(ordersReceipt.dedupPlaceholders, ['dn:d1']);
  const mailReceipt = r1.queues.find((x) => x.queue === 'bull:acme:mail');
  assert.deepEqual(mailReceipt.schedulers, ['repeat:digest-a']);
  assert.ok(Object.values(mailReceipt.states).flat().includes(f3.job.id), JSON.stringify(mailReceipt));
  const f3child = f3.children[0].job.id;
  assert.ok(r1.queues.flatMap((x) => x.removedWithParent).includes(`bull:acme:orders:${f3child}`)
    || ordersReceipt.states.delayed.includes(f3child), 'the child of u42\'s parent goes');
  assert.ok(mailReceipt.copies.some((c) => c.startsWith(`${f4.job.id}:processed/`)), 'the copy of a removed child is found');
  // Flow 1's two copies go with their jobs or are found by the scan; flow 4's only by the scan.
  assert.ok(ordersReceipt.copiesWithJobs + mailReceipt.copies.length >= 3, JSON.stringify([ordersReceipt, mailReceipt]));
  assert.ok(ordersReceipt.events > 0);
  assert.deepEqual([...new Set(r1.archive.map((s) => s.action))].sort(), ['deleted', 'rewritten']);

  // Bob's jobs and the other tenant are untouched, byte for byte.
  assert.deepEqual(await hashes(bobKeys), bobBefore);
  assert.deepEqual(await hashes(globexKeys), globexBefore);
  assert.equal(await client.exists('bull:acme:orders:dn:d1'), 0);
  assert.deepEqual((await mail.getJobSchedulers()).map((s) => s.key || s.id).sort(), ['digest-b']);
  // Flow 1 lost its u42 copies and still waits for Bob's child; flow 2's parent was released.
  assert.deepEqual(Object.keys(await client.hgetall(`bull:acme:mail:${f1.job.id}:processed`)), []);
  assert.deepEqual(Object.keys(await client.hgetall(`bull:acme:mail:${f1.job.id}:failed`)), []);
  assert.equal(await mail.getJobState(f1.job.id), 'waiting-children');
  assert.equal(await mail.getJobState(f2.job.id), 'waiting');

  // The active job finishes; erasing again removes it and finds nothing else.
  release();
  await waitFor('the held job to complete', async () => (await orders.getJobState(active.id)) === 'completed');
  await holder.close();
  const second = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--tenant', 'acme', '--request-id', 'GDPR-1', '--wait-active', '1s']);
  assert.equal(second.code, 0, second.stderr);
  const r2 = JSON.parse(second.stdout);
  assert.equal(r2.status, 'erased');
  assert.deepEqual(r2.queues.find((x) => x.queue === 'bull:acme:orders').states.completed, [active.id]);
  const third = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--tenant', 'acme', '--request-id', 'GDPR-1']);
  assert.equal(third.code, 0, third.stderr);
  assert.equal(JSON.parse(third.stdout).status, 'nothingFound', third.stdout);
  assert.deepEqual(await hashes(globexKeys), globexBefore, '--tenant acme leaves globex alone');

  // Without --tenant, the other tenant's copy goes too; then nothing is left.
  const everywhere = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--request-id', 'GDPR-2']);
  assert.equal(everywhere.code, 0, everywhere.stderr);
  assert.deepEqual(JSON.parse(everywhere.stdout).queues.map((x) => x.queue), ['bull:globex:orders']);
  assert.equal(JSON.parse((await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--request-id', 'GDPR-2'])).stdout).status, 'nothingFound');

  // Nothing of u42 is left in the keyspace, the events streams or the archive.
  const text = JSON.stringify(await dumpKeyspace(client));
  assert.ok(!text.includes(EMAIL) && !text.includes(`"${ID}"`) && !text.includes(`\\"${ID}\\"`), 'no u42 in the keyspace');
  const streams = await streamsText(client);
  assert.ok(!streams.includes(EMAIL) && !streams.includes(ID), `no u42 in the events streams: ${streams.split('],[').filter((e) => e.includes(ID) || e.includes(EMAIL)).join('\n')}`);
  assert.ok(text.includes(OTHER.email), 'Bob is still there');
  assert.equal((await grep(`fields.data.user.id=${ID}`)).length, 0);
  assert.equal((await grep(`fields.data.user.id=${OTHER.id}`)).length, 1, "Bob's archived job stays");
  const ls = (await bullsweep([...args, '--json', 'archive', 'ls'])).stdout.trim().split('\n');
  assert.equal(ls.length, 1, ls.join('\n'));
  assert.equal(archiveFiles().length, 2, `only the rewritten segment and its manifest remain: ${archiveFiles()}`);
  for (const f of filesBefore) {
    assert.ok(!archiveFiles().includes(f), `old archive file ${f} is gone`);
  }

  // Every erasure is audited under its request id, and the trail verifies and holds no PII.
  const trailText = fs.readFileSync(`${dir}/audit.jsonl`, 'utf8');
  const trail = trailText.trim().split('\n').map((l) => JSON.parse(l));
  const erased = trail.filter((e) => e.action === 'erase');
  assert.ok(erased.some((e) => e.executionId === 'GDPR-1' && e.jobIds.includes(waiting.id)));
  assert.ok(erased.some((e) => e.executionId === 'GDPR-1' && e.state === 'archive'));
  assert.ok(erased.some((e) => e.executionId === 'GDPR-2' && e.queueKey === 'bull:globex:orders'));
  assert.ok(!trailText.includes(EMAIL));
  const verify = await bullsweep([...args, 'audit', 'verify']);
  assert.equal(verify.code, 0, verify.stderr);

  // BullMQ sees consistent queues, and the flows complete.
  await assertConsistent(redis, 0, ['orders', 'mail', 'archived', 'vault'].map((name) => ({ prefix: 'bull:acme', name }))
    .concat([{ prefix: 'bull:globex', name: 'orders' }]));
  await orders.promoteJobs();
  const finish = new Worker('orders', async () => ({ ok: true }), { connection, prefix: 'bull:acme' });
  const parents = new Worker('mail', async () => ({ ok: true }), { connection, prefix: 'bull:acme' });
  await waitFor('the flows to complete', async () => {
    const states = await Promise.all([f1, f2, f4].map((f) => mail.getJobState(f.job.id)));
    return states.every((s) => s === 'completed');
  });
  await finish.close();
  await parents.close();
  await producer.close();
  for (const queue of all) await queue.close();
});
