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

// A policy for an erasure test: keys by tenant (`bull:<tenant>:<queue>`) and without one
// (`bull:<queue>`), the audit file in a fresh temporary directory, `subjects` as the
// `subjects:` value, finished jobs kept 30 days.
function layeredPolicy(subjects) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-forget-'));
  return writePolicy([
    'version: 1',
    'discovery: { layouts: ["bull:{tenant}:{queue}", "bull:{queue}"] }',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    `subjects: ${subjects}`,
    'policies: [{ name: keep, queueNamePattern: "*", rules: { completed: { maxAge: 30d }, failed: { maxAge: 30d } } }]',
    '',
  ].join('\n'));
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
    [['--subject', `user=${ID}`, '--request-id', 'R', '--tenant', 'initech'], 'unknown tenant `initech`'],
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

// 600 levels of arrays around a value: deeper than a recursive JSON parser reads (serde_json
// stops at 128), as deep as any producer may write.
const deepNest = (levels) => {
  let nest = 'leaf';
  for (let i = 0; i < levels; i += 1) nest = [nest];
  return nest;
};

test('a queue with a wrong-typed key is named and skipped, the others are erased, and deep data is found', async () => {
  const db = 1;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const q = (name) => new Queue(name, { connection, prefix: 'bull' });
  const mail = q('mail');
  const broken = q('broken');
  const deep = q('deep');
  const deeparch = q('deeparch');
  const annMail = await mail.add('send', ann());
  const bobMail = await mail.add('send', bob());
  const annBroken = await broken.add('send', ann());
  const annDeep = await deep.add('send', ann({ nest: deepNest(600) }));
  const bobDeep = await deep.add('send', bob({ nest: deepNest(600) }));
  const archivedDeep = await deeparch.add('send', ann({ nest: deepNest(600) }));
  const w = new Worker('deeparch', async () => ({ ok: true }), { connection, prefix: 'bull' });
  await waitFor('the deep job to complete', async () => (await deeparch.getJobState(archivedDeep.id)) === 'completed');
  await w.close();
  // The broken queue's events stream is a string.
  await client.del('bull:broken:events');
  await client.set('bull:broken:events', 'not a stream');

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-forget-bad-'));
  const policy = writePolicy([
    'version: 1',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    `archive: { url: "file://${dir}/archive" }`,
    'subjects: [{ name: user, paths: [user.id] }]',
    'policies:',
    '  - { name: keep, queueNamePattern: "*", rules: { completed: { maxAge: 30d } } }',
    '  - { name: cold, queueNamePattern: deeparch, rules: { completed: { maxAge: 1ms, action: archive } } }',
    '',
  ].join('\n'));
  const args = ['--redis', redis.url(db), '--config', policy];
  const archiving = await bullsweep([...args, 'run']);
  assert.equal(archiving.code, 0, archiving.stderr);
  assert.equal(await client.exists(`bull:deeparch:${archivedDeep.id}`), 0, 'the deep job is archived');

  const first = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--request-id', 'BAD-1']);
  assert.equal(first.code, 1, first.stderr);
  const r1 = JSON.parse(first.stdout);
  assert.equal(r1.status, 'incomplete', first.stdout);
  // The bad queue is named, with its key, and nothing else remains.
  const remaining = r1.remaining.map((r) => `${r.kind} ${r.name}`).sort();
  assert.deepEqual(remaining, ['events bull:broken:events', 'jobs bull:broken'], first.stdout);
  for (const r of r1.remaining) assert.ok(r.reason.includes('bull:broken:events'), JSON.stringify(r));
  assert.ok(first.stderr.includes('bull:broken:events'), first.stderr);
  assert.ok(r1.searched.some((p) => p.kind === 'events' && p.name === 'bull:mail:events'), first.stdout);
  // Every other queue was erased, the deep waiting job and the deep archived record included.
  assert.equal(await client.exists(`bull:mail:${annMail.id}`), 0);
  assert.equal(await client.exists(`bull:deep:${annDeep.id}`), 0, 'the 600-deep waiting job is erased');
  assert.equal(r1.scan.malformed, 0, 'deep JSON is not malformed');
  assert.deepEqual(r1.queues.find((x) => x.queue === 'bull:deep').states, { wait: [annDeep.id] });
  assert.deepEqual(r1.archive.map((s) => [s.ids, s.action]), [[[archivedDeep.id], 'deleted']], first.stdout);
  // The bad queue is untouched: nothing was half done there.
  assert.equal(await client.exists(`bull:broken:${annBroken.id}`), 1);
  assert.deepEqual(await broken.getWaiting().then((js) => js.map((j) => j.id)), [annBroken.id]);
  // Bob stays.
  assert.equal(await client.exists(`bull:mail:${bobMail.id}`), 1);
  assert.equal(await client.exists(`bull:deep:${bobDeep.id}`), 1);

  // Once the key is repaired, running it again completes the erasure.
  await client.del('bull:broken:events');
  const second = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--request-id', 'BAD-1']);
  assert.equal(second.code, 0, second.stderr);
  const r2 = JSON.parse(second.stdout);
  assert.equal(r2.status, 'erased', second.stdout);
  assert.deepEqual(r2.remaining, []);
  assert.equal(await client.exists(`bull:broken:${annBroken.id}`), 0);
  await assertConsistent(redis, db, ['mail', 'broken', 'deep', 'deeparch'].map((name) => ({ prefix: 'bull', name })));
  for (const queue of [mail, broken, deep, deeparch]) await queue.close();
});

test('a tenant no queue key names is refused with nothing changed; a queue without a tenant keeps another tenant\'s entries and says erased, and names what it cannot attribute as remaining', async () => {
  const db = 2;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const acme = new Queue('mail', { connection, prefix: 'bull:acme-corp' });
  const legacy = new Queue('legacy-mail', { connection, prefix: 'bull' });
  const user = (tenantId) => ({ user: { id: 'u-1', email: 'ann@example.com' }, tenantId });
  const acmeJob = await acme.add('send', user('acme-corp'));
  // The legacy queue's jobs say they belong to no tenant ("none") or to globex; one of each
  // fails naming the user, so its `failed` entry names u-1.
  const legacyJob = await legacy.add('send', user('none'));
  const failing = await legacy.add('fail', user('none'), { attempts: 1 });
  const globexFailing = await legacy.add('fail', user('globex'), { attempts: 1 });
  const w = new Worker('legacy-mail', async (job) => {
    if (job.name === 'fail') throw new Error('mailbox of u-1 is full');
    return { ok: true };
  }, { connection, prefix: 'bull', autorun: false });
  // Only the failing jobs are processed: the first job is taken out of the list meanwhile.
  await legacy.pause();
  await client.lrem('bull:legacy-mail:paused', 0, legacyJob.id);
  await legacy.resume();
  w.run();
  await waitFor('the legacy jobs to fail', async () => (await legacy.getJobState(failing.id)) === 'failed'
    && (await legacy.getJobState(globexFailing.id)) === 'failed');
  await w.close();
  await client.rpush('bull:legacy-mail:wait', legacyJob.id);

  const policy = layeredPolicy('[{ name: user, paths: [user.id], tenantPath: tenantId }]');
  const args = ['--redis', redis.url(db), '--config', policy];
  const legacyEvents = async () => JSON.stringify(await client.xrange('bull:legacy-mail:events', '-', '+'));
  const namingU1 = async () => (await client.xrange('bull:legacy-mail:events', '-', '+'))
    .filter(([, fields]) => fields.some((v) => v.includes('u-1'))).length;
  assert.equal(await namingU1(), 2, 'two failed entries name u-1');
  const keyspace = await dumpKeyspace(client);
  const events = await legacyEvents();
  const acmeEvents = JSON.stringify(await client.xrange('bull:acme-corp:mail:events', '-', '+'));

  // A misspelt tenant: exit 2, the tenants named, nothing changed.
  const typo = await bullsweep([...args, 'forget', '--subject', 'user=u-1', '--tenant', 'acme', '--request-id', 'T-1']);
  assert.equal(typo.code, 2, typo.stderr);
  assert.ok(typo.stderr.includes('unknown tenant `acme`') && typo.stderr.includes('acme-corp'), typo.stderr);
  assert.equal(typo.stdout, '');
  assert.deepEqual(await dumpKeyspace(client), keyspace);
  assert.equal(await legacyEvents(), events);
  assert.equal(JSON.stringify(await client.xrange('bull:acme-corp:mail:events', '-', '+')), acmeEvents);

  // The right tenant: its job goes. The legacy queue's jobs (tenant "none" and globex) stay,
  // and so do their entries naming u-1: their jobs exist and their data names another
  // tenant, so they are provably not acme-corp's. The receipt counts them as another
  // tenant's and says erased (exit 0): the stream was searched to the end.
  const right = await bullsweep([...args, 'forget', '--subject', 'user=u-1', '--tenant', 'acme-corp', '--request-id', 'T-2']);
  assert.equal(right.code, 0, right.stderr);
  const r = JSON.parse(right.stdout);
  assert.equal(r.status, 'erased', right.stdout);
  assert.deepEqual(r.remaining, [], right.stdout);
  assert.ok(r.searched.some((x) => x.kind === 'events' && x.name === 'bull:legacy-mail:events'), right.stdout);
  assert.equal(await client.exists(`bull:acme-corp:mail:${acmeJob.id}`), 0);
  assert.equal(await acme.getJob(acmeJob.id), undefined, 'BullMQ finds no acme-corp job of u-1');
  for (const id of [legacyJob.id, failing.id, globexFailing.id]) {
    assert.equal((await legacy.getJob(id)).data.user.id, 'u-1', `BullMQ still reads job ${id}`);
  }
  assert.equal(await legacyEvents(), events, 'another tenant\'s events stay, byte for byte');
  const legacyReceipt = r.queues.find((x) => x.queue === 'bull:legacy-mail');
  assert.ok(legacyReceipt, right.stdout);
  assert.deepEqual([legacyReceipt.events, legacyReceipt.eventsOfOtherTenants, legacyReceipt.eventsOfUnknownTenant], [0, 2, 0], right.stdout);

  // Once a job is gone its entry cannot be told to be anyone's: the stream remains
  // (incomplete, exit 1), never called erased; globex's entry is still counted as another's.
  await (await legacy.getJob(failing.id)).remove();
  const after = await legacyEvents();
  const gone = await bullsweep([...args, 'forget', '--subject', 'user=u-1', '--tenant', 'acme-corp', '--request-id', 'T-3']);
  assert.equal(gone.code, 1, gone.stderr);
  const g = JSON.parse(gone.stdout);
  assert.equal(g.status, 'incomplete', gone.stdout);
  assert.deepEqual(g.remaining.map((x) => [x.kind, x.name]), [['events', 'bull:legacy-mail:events']], gone.stdout);
  assert.ok(g.remaining[0].reason.includes('without --tenant'), gone.stdout);
  assert.ok(gone.stderr.includes('bull:legacy-mail:events'), gone.stderr);
  const gq = g.queues.find((x) => x.queue === 'bull:legacy-mail');
  assert.deepEqual([gq.events, gq.eventsOfOtherTenants, gq.eventsOfUnknownTenant], [0, 1, 1], gone.stdout);
  assert.equal(await legacyEvents(), after, 'nothing of the stream went');

  // Without --tenant, as the reason says, the person goes from every tenant, entries too.
  const everywhere = await bullsweep([...args, 'forget', '--subject', 'user=u-1', '--request-id', 'T-4']);
  assert.equal(everywhere.code, 0, everywhere.stderr);
  assert.equal(JSON.parse(everywhere.stdout).status, 'erased', everywhere.stdout);
  assert.ok(!(await legacyEvents()).includes('u-1'), await legacyEvents());
  assert.equal(await client.exists(`bull:legacy-mail:${globexFailing.id}`), 0);
  await acme.close();
  await legacy.close();
});

test('events of jobs a run removed are erased by what identifies the subject', async () => {
  const db = 3;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const orders = new Queue('orders', { connection, prefix: 'bull' });
  // Ann's and Bob's charges fail naming their emails only (not their ids).
  const annCharge = await orders.add('charge', ann(), { attempts: 1 });
  const bobCharge = await orders.add('charge', bob(), { attempts: 1 });
  const w = new Worker('orders', async (job) => {
    throw new Error(`card of ${job.data.user.email} declined`);
  }, { connection, prefix: 'bull' });
  await waitFor('both charges to fail', async () => (await orders.getJobCounts('failed')).failed === 2);
  await w.close();
  // Ann still has a waiting job, which ties her id to her email.
  const annWaiting = await orders.add('ship', ann());

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-forget-events-'));
  const policy = writePolicy([
    'version: 1',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    'subjects: [{ name: user, paths: [user.id, user.email] }]',
    'policies: [{ name: short, queueNamePattern: orders, rules: { completed: { maxAge: 30d }, failed: { maxAge: 1ms } } }]',
    '',
  ].join('\n'));
  const args = ['--redis', redis.url(db), '--config', policy];
  // An earlier run removes the failed jobs; their `failed` entries keep the emails.
  const run = await bullsweep([...args, 'run']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await client.exists(`bull:orders:${annCharge.id}`), 0);
  assert.equal(await client.exists(`bull:orders:${bobCharge.id}`), 0);
  const stream = async () => JSON.stringify(await client.xrange('bull:orders:events', '-', '+'));
  assert.ok((await stream()).includes(EMAIL));

  const out = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--request-id', 'EV-1']);
  assert.equal(out.code, 0, out.stderr);
  const r = JSON.parse(out.stdout);
  assert.equal(r.status, 'erased', out.stdout);
  assert.equal(await client.exists(`bull:orders:${annWaiting.id}`), 0);
  const after = await stream();
  assert.ok(!after.includes(EMAIL) && !after.includes(ID), `no entry names Ann: ${after}`);
  assert.ok(after.includes(OTHER.email), "Bob's entries stay");
  assert.ok(r.searched.some((p) => p.kind === 'events' && p.name === 'bull:orders:events'), out.stdout);
  assert.ok(r.searched.some((p) => p.kind === 'keyspace'), out.stdout);
  assert.ok(!out.stdout.includes(EMAIL), 'the receipt holds no personal data');
  await orders.close();
});

test('a job whose data names the subject but is not strict JSON is named as remaining, never erased silently', async () => {
  const db = 4;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const odd = new Queue('odd', { connection, prefix: 'bull' });
  // JSON.stringify writes a lone surrogate as `\ud800`: JavaScript reads it back, a strict
  // JSON reader refuses it, so the subject's paths cannot be read in it.
  const annOdd = await odd.add('send', ann({ note: 'half \ud800 a pair' }));
  const bobOdd = await odd.add('send', bob({ note: 'half \ud800 a pair' }));
  const annPlain = await odd.add('send', ann());
  assert.ok((await client.hget(`bull:odd:${annOdd.id}`, 'data')).includes('\\ud800'));

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-forget-odd-'));
  const policy = writePolicy([
    'version: 1',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    'subjects: [{ name: user, paths: [user.id] }]',
    'policies: [{ name: keep, queueNamePattern: "*", rules: { completed: { maxAge: 30d } } }]',
    '',
  ].join('\n'));
  const args = ['--redis', redis.url(db), '--config', policy];
  const out = await bullsweep([...args, 'forget', '--subject', `user=${ID}`, '--request-id', 'ODD-1']);
  assert.equal(out.code, 1, out.stderr);
  const r = JSON.parse(out.stdout);
  assert.equal(r.status, 'incomplete', out.stdout);
  assert.deepEqual(r.remaining.map((x) => [x.kind, x.name]), [['key', `bull:odd:${annOdd.id}`]], out.stdout);
  assert.ok(r.remaining[0].reason.includes('not JSON'), out.stdout);
  // It is kept, as is Bob's; Ann's other job is erased.
  assert.equal(await client.exists(`bull:odd:${annOdd.id}`), 1);
  assert.equal(await client.exists(`bull:odd:${bobOdd.id}`), 1);
  assert.equal(await client.exists(`bull:odd:${annPlain.id}`), 0);
  await odd.close();
});

test('a key whose name is not UTF-8 stops nothing: it is skipped, or named as remaining where it holds the subject, and everything else is erased', async () => {
  const db = 5;
  const connection = redis.connection(db);
  const client = redis.client(db);
  const key = (text, ...bytes) => Buffer.concat([Buffer.from(text), Buffer.from(bytes)]);
  const good = new Queue('good', { connection, prefix: 'bull' });
  const other = new Queue('other', { connection, prefix: 'bull' });
  const acme = new Queue('mail', { connection, prefix: 'bull:acme' });
  const globex = new Queue('mail', { connection, prefix: 'bull:globex' });
  const u8 = { user: { id: 'u8' } };
  const goodJobs = [];
  for (let i = 0; i < 50; i++) goodJobs.push((await good.add('send', u8)).id);
  const otherJob = await other.add('send', { user: { id: 'u9' } });
  // The key: a string whose name ends in the byte 0xFF, in another queue.
  await client.set(key('bull:other:', 0xff), 'x');

  const policy = layeredPolicy('[{ name: user, paths: [user.id] }]');
  const args = ['--redis', redis.url(db), '--config', policy];
  const forget = async (id, ...more) => {
    const out = await bullsweep([...args, 'forget', '--subject', 'user=u8', '--request-id', id, ...more]);
    return { ...out, r: JSON.parse(out.stdout) };
  };

  // The key holds no job data to read: the subject's 50 jobs are erased, the status says so.
  const first = await forget('BIN-1');
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.r.status, 'erased', first.stdout);
  assert.deepEqual(first.r.remaining, [], first.stdout);
  assert.equal(first.r.queues.find((q) => q.queue === 'bull:good').states.wait.length, 50, first.stdout);
  assert.ok(Object.values(await good.getJobCounts()).every((n) => n === 0), 'BullMQ counts no job in bull:good');
  for (const id of goodJobs) assert.equal(await client.exists(`bull:good:${id}`), 0);
  assert.equal((await other.getJob(otherJob.id)).data.user.id, 'u9', 'the other queue\'s job stays');
  assert.equal(await client.get(key('bull:other:', 0xff)), 'x', 'the key stays');

  // Under a covered queue, a job hash whose name is not UTF-8 is read: one that names the
  // subject cannot be erased by name, so it is kept and named (escaped) as remaining; one
  // that names another person, and a job's log list, are no reason to stop. The subject's
  // new jobs are erased all the same.
  await client.hset(key('bull:good:', 0xfe), 'name', 'send', 'data', JSON.stringify(u8), 'timestamp', Date.now(), 'opts', '{}');
  await client.hset(key('bull:good:', 0xfd), 'name', 'send', 'data', JSON.stringify({ user: { id: 'u9' } }), 'timestamp', Date.now(), 'opts', '{}');
  await client.rpush(key('bull:good:', 0xfc, 0x3a, 0x6c, 0x6f, 0x67, 0x73), 'a log line');
  const again = [];
  for (let i = 0; i < 5; i++) again.push((await good.add('send', u8)).id);
  const second = await forget('BIN-2');
  assert.equal(second.code, 1, second.stderr);
  assert.equal(second.r.status, 'incomplete', second.stdout);
  assert.deepEqual(second.r.remaining.map((x) => [x.kind, x.name]), [['key', 'bull:good:\\xfe']], second.stdout);
  assert.ok(second.r.remaining[0].reason.includes('not UTF-8'), second.stdout);
  assert.ok(second.stderr.includes('bull:good:\\xfe'), second.stderr);
  assert.deepEqual(second.r.queues.find((q) => q.queue === 'bull:good').states.wait.sort(), again.sort(), second.stdout);
  assert.equal((await good.getJobCounts()).waiting, 0);
  assert.equal(await client.exists(key('bull:good:', 0xfe)), 1, 'kept, never claimed erased');
  assert.equal(await client.exists(key('bull:good:', 0xfd)), 1);

  // Once it is removed by hand, as the reason says, the erasure completes.
  await client.del(key('bull:good:', 0xfe));
  const third = await forget('BIN-3');
  assert.equal(third.code, 0, third.stderr);
  assert.equal(third.r.status, 'nothingFound', third.stdout);

  // Under --tenant, a key in another tenant's queue is out of scope, whatever it holds.
  const acmeJob = await acme.add('send', u8);
  await client.hset(key('bull:globex:mail:', 0xff), 'name', 'send', 'data', JSON.stringify(u8), 'timestamp', Date.now(), 'opts', '{}');
  await globex.add('send', { user: { id: 'u9' } });
  const tenant = await forget('BIN-4', '--tenant', 'acme');
  assert.equal(tenant.code, 0, tenant.stderr);
  assert.equal(tenant.r.status, 'erased', tenant.stdout);
  assert.equal(await acme.getJob(acmeJob.id), undefined);
  assert.equal(await client.exists(key('bull:globex:mail:', 0xff)), 1, 'another tenant\'s key is not touched');
  for (const q of [good, other, acme, globex]) await q.close();
});
