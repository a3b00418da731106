// Issue 27: `bullsweep doctor`, judged by real BullMQ (6.7 and 5.81). For every kind of damage,
// BullMQ builds healthy queues in database 0 (beside bystander queues no fault touches), which
// is copied to 1 (A) and 2 (B). On A, BullMQ does what it would have done (lib/damage.js's
// oracle: Job.remove(), its finalization); on B, the fault breaks the data. A copy of B (3)
// shows through BullMQ's API that the damage is real. Then `doctor` must find the damage on B
// and write nothing (every key's content and expiry compared), `doctor --repair <kind>` must
// leave B's keyspace equal to A's (streams apart), audited with the kind, and BullMQ must read
// B as consistent and work on it again (the blocked id added, the stuck parent processed).
// The live producer and the killed worker are in doctor_live.test.js.
//
// Both BullMQ builds run here (BULLSWEEP_BULLMQ names one to run only that one).
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRedis, dumpKeyspace, copyDatabase, bullsweep, writePolicy } = require('../lib/harness');
const { assertConsistent } = require('../lib/consistency');
const { assertReadable } = require('../lib/pending');
const { KINDS, BYSTANDERS, buildBystanders, openQueues, finish, removeJobs, withQueue, HOUR } = require('../lib/damage');
const { CHECKS } = require('../lib/doctor_checks');
const { VERSIONS, auditPolicy, runDoctor, findingsOf } = require('../lib/doctor_cli');
const { rawDump, diff } = require('../lib/snapshot');
const { build, QUEUES, LAYOUTS } = require('../lib/dataset');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

const doctor = (db, args, config) => runDoctor(redis, db, args, config);

// Asserts that database 2 (doctor's) holds the keys and values of database 1 (BullMQ's),
// streams apart, naming the keys that differ.
async function assertSameKeyspace(what) {
  const expected = await dumpKeyspace(redis.client(1));
  const actual = await dumpKeyspace(redis.client(2));
  const onlyA = Object.keys(expected).filter((k) => !(k in actual));
  const onlyB = Object.keys(actual).filter((k) => !(k in expected));
  assert.deepEqual({ onlyA, onlyB }, { onlyA: [], onlyB: [] }, `${what}: keys only BullMQ (A) or only doctor (B) left`);
  for (const key of Object.keys(expected)) assert.deepEqual(actual[key], expected[key], `${what}: ${key} differs (actual: doctor, expected: BullMQ)`);
}

const queuesOf = (spec) => [...BYSTANDERS, ...spec.queues].map((name) => ({ prefix: 'bull', name }));

async function freshDatabases() {
  for (const db of [0, 1, 2, 3]) await redis.client(db).flushdb();
}

// Builds the kind's data in 0, the oracle's copy in 1, the damaged copy in 2, and BullMQ's
// view of the damage in 3 (proved there, so B is untouched by BullMQ after the fault).
async function stage(v, kind) {
  const spec = KINDS[kind];
  await freshDatabases();
  const c0 = redis.client(0);
  await buildBystanders(v.mq, redis.connection(0));
  const ctx = await spec.build(v.mq, redis.connection(0), c0);
  await openQueues(v.mq, redis.connection(0), [...BYSTANDERS, ...spec.queues]);
  for (const db of [1, 2]) await copyDatabase(c0, 0, db);
  await spec.oracle(ctx, v.mq, redis.connection(1), redis.client(1));
  await spec.fault(ctx, v.mq, redis.connection(2), redis.client(2));
  await copyDatabase(redis.client(2), 2, 3);
  await CHECKS[kind].prove({ mq: v.mq, connection: redis.connection(3), client: redis.client(3), v5: v.v5 });
  return spec;
}

for (const v of VERSIONS) {
  for (const kind of Object.keys(KINDS)) {
    test(`${v.label}: ${kind}: doctor finds it changing nothing, --repair ${kind} leaves what BullMQ would have left`, async () => {
      const spec = await stage(v, kind);
      const B = redis.client(2);

      // Finding: exit 1, the count, a sample key; not one byte written.
      const damaged = await rawDump(B);
      const find = await doctor(2);
      assert.equal(find.code, 1, `doctor exits 1 on findings: ${find.stderr}${find.stdout}`);
      assert.ok(find.report, `doctor --json prints one JSON document: ${find.stdout}`);
      assert.equal(find.report.clean, false);
      const found = findingsOf(find.report, kind);
      // eventsOverLimit counts the entries over the bound.
      const want = kind === 'eventsOverLimit' ? (await B.xlen('bull:noisy:events')) - spec.bound : spec.found;
      assert.equal(found.found, want, `${kind} found: ${JSON.stringify(find.report)}`);
      assert.ok(found.samples.length > 0 && found.samples.every((s) => spec.samples.includes(s)),
        `${kind} samples ${JSON.stringify(found.samples)} name the damaged keys ${JSON.stringify(spec.samples)}`);
      assert.deepEqual(diff(damaged, await rawDump(B)), { added: [], removed: [], changed: [] }, 'doctor without --repair writes nothing');

      // Repair: the keyspace BullMQ leaves (streams compared apart).
      const beforeStreams = await B.xrange('bull:noisy:events', '-', '+');
      const { file, trail } = auditPolicy();
      const repair = await doctor(2, ['--repair', kind], file);
      assert.equal(repair.code, 1, `doctor --repair exits 1 (findings, repaired): ${repair.stderr}${repair.stdout}`);
      const repaired = findingsOf(repair.report, kind);
      assert.deepEqual([repaired.found, repaired.repaired], [want, want], `${kind}: ${JSON.stringify(repair.report)}`);
      await assertSameKeyspace(kind);
      if (kind === 'eventsOverLimit') {
        assert.deepEqual(await B.xrange('bull:noisy:events', '-', '+'), beforeStreams.slice(-spec.bound), 'the newest entries, exactly the bound');
      }
      if (kind === 'stuckParents') {
        const waiting = (await B.xrange('bull:parents:events', '-', '+')).map(([, f]) => f.join(' '));
        assert.ok(waiting.includes('event waiting jobId sp-1 prev waiting-children'), 'BullMQ\'s event for the move');
      }

      // The repair is audited with its kind, and the trail verifies.
      const events = fs.readFileSync(trail, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      const repairs = events.filter((e) => e.action === 'repair');
      assert.ok(repairs.length > 0, `a repair event: ${JSON.stringify(events)}`);
      assert.deepEqual([...new Set(repairs.map((e) => e.repairKind))], [kind], JSON.stringify(repairs));
      const named = new Set(repairs.flatMap((e) => (e.jobIds || []).map((id) => `${e.queueKey}:${id}`)));
      if (kind !== 'eventsOverLimit') {
        assert.deepEqual(spec.samples.filter((k) => !named.has(k)), [], `every repaired item is named in the audit: ${JSON.stringify(repairs)}`);
      }
      const verify = await bullsweep(['--redis', redis.url(2), '--config', file, 'audit', 'verify']);
      assert.equal(verify.code, 0, verify.stderr + verify.stdout);

      // Clean now, and BullMQ reads and works on the repaired queues.
      const again = await doctor(2);
      assert.equal(again.code, 0, `clean after the repair: ${again.stdout}${again.stderr}`);
      assert.equal(again.report.clean, true);
      await assertReadable(v.mq, redis, 2, queuesOf(spec));
      await assertConsistent(redis, 2, queuesOf(spec));
      await CHECKS[kind].after({ mq: v.mq, connection: redis.connection(2), client: B, v5: v.v5 });
    });
  }
}

// BullMQ's throttle mode (a dedup key with a TTL) is never a finding, also when it is the
// queue's only dedup key, and does not keep the queue from being examined.
test('a queue whose only dedup key has a TTL is examined and clean', async () => {
  const db = 6;
  await redis.client(db).flushdb();
  const { mq } = VERSIONS[0];
  const q = new mq.Queue('throttled', { connection: redis.connection(db) });
  await q.add('w', {}, { jobId: 't-1', deduplication: { id: 'thr', ttl: 3600000 } });
  await q.close();
  const r = await doctor(db);
  assert.equal(r.code, 0, `${r.stdout}${r.stderr}`);
  assert.deepEqual(r.report.queues.map((x) => [x.queue, x.error, x.findings]), [['throttled', null, []]]);
});

// Where the queue's policy archives, orphan hashes are archived first: the keyspace after the
// repair is still the one BullMQ's Job.remove() leaves, and the archive holds a copy of every
// orphan, field for field.
for (const v of VERSIONS) {
  test(`${v.label}: orphanHashes of a queue whose policy archives are archived first`, async () => {
    const spec = await stage(v, 'orphanHashes');
    const B = redis.client(2);
    const damaged = await dumpKeyspace(B);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-doctor-archive-'));
    const config = writePolicy(`version: 1
audit: { url: "file://${dir}/audit.jsonl" }
archive: { url: "file://${dir}/archive" }
policies:
  - { name: orph, queueNamePattern: "orph", rules: { completed: { maxAge: 30d, action: archive } } }
  - { name: rest, queueNamePattern: "*", rules: {} }
`);
    const repair = await doctor(2, ['--repair', 'orphanHashes'], config);
    assert.equal(repair.code, 1, `${repair.stderr}${repair.stdout}`);
    assert.deepEqual(Object.entries(findingsOf(repair.report, 'orphanHashes')).slice(0, 2), [['found', spec.found], ['repaired', spec.found]], repair.stdout);
    await assertSameKeyspace('archived first: the keyspace Job.remove() leaves');

    const ls = await bullsweep(['--config', config, '--json', 'archive', 'ls']);
    assert.equal(ls.code, 0, ls.stderr);
    const records = [];
    for (const m of ls.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))) {
      const cat = await bullsweep(['--config', config, 'archive', 'cat', m.segment]);
      assert.equal(cat.code, 0, cat.stderr);
      records.push(...cat.stdout.trim().split('\n').map((l) => JSON.parse(l)));
    }
    const orphans = ['o-done', 'order:2024:0007', 'o-dedup', 'o-child'];
    assert.deepEqual(records.map((r) => r.id).sort(), [...orphans].sort(), JSON.stringify(records));
    for (const r of records) {
      const hash = damaged[`bull:orph:${r.id}`].value;
      assert.deepEqual(Object.keys(r.fields).sort(), Object.keys(hash).sort(), r.id);
      for (const [field, text] of Object.entries(hash)) {
        const stored = r.fields[field];
        if (['data', 'returnvalue', 'stacktrace'].includes(field) && !(r.textFields || []).includes(field)) {
          assert.deepEqual(stored, JSON.parse(text), `${r.id} ${field}`);
        } else {
          assert.equal(String(stored), text, `${r.id} ${field}`);
        }
      }
    }
    assert.deepEqual(records.find((r) => r.id === 'o-done').logs, ['handled o-done'], 'the logs are archived with the job');
  });
}

// No false findings on healthy data: the compat dataset (several prefixes and tenants, flows
// across queues with failed children whose parents wait, dedup keys with and without TTL,
// custom ids with colons, a removed job scheduler's finished iterations, logs, a job held
// active under a worker's lock) is clean, changed by nothing, also under --repair all.
test('a healthy dataset is clean: exit 0, one line, nothing written, --repair all repairs nothing', async () => {
  const db = 8;
  const client = redis.client(db);
  await client.flushdb();
  await build(redis.connection(db));
  const layouts = writePolicy(['version: 1', 'discovery:', '  layouts:', ...LAYOUTS.map((l) => `    - "${l}"`), ''].join('\n'));
  const before = await rawDump(client);
  const text = await bullsweep(['--redis', redis.url(db), '--config', layouts, 'doctor']);
  assert.equal(text.code, 0, `${text.stdout}${text.stderr}`);
  assert.match(text.stdout, new RegExp(`^${QUEUES.length} queues examined, clean$`, 'm'), text.stdout);
  const json = await doctor(db, [], layouts);
  assert.equal(json.code, 0, json.stdout);
  assert.equal(json.report.clean, true);
  assert.deepEqual(json.report.queues.map((q) => q.key).sort(), QUEUES.map((q) => `${q.prefix}:${q.name}`).sort());
  for (const q of json.report.queues) assert.deepEqual([q.key, q.findings, q.error], [q.key, [], null]);
  assert.deepEqual(diff(before, await rawDump(client)), { added: [], removed: [], changed: [] });

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-doctor-'));
  const config = writePolicy(fs.readFileSync(layouts, 'utf8').replace('discovery:', `audit: { url: "file://${dir}/audit.jsonl" }\ndiscovery:`)
    + 'policies:\n  - { name: p, queueNamePattern: "*", rules: {} }\n');
  const repair = await doctor(db, ['--repair', 'all'], config);
  assert.equal(repair.code, 0, repair.stdout);
  const changes = diff(before, await rawDump(client));
  assert.deepEqual([changes.removed, changes.changed.filter((k) => !k.startsWith('bullsweep:'))], [[], []], JSON.stringify(changes));
});

test('doctor names its findings in a table, --queue selects by glob, and an unknown kind is a usage error naming the known ones', async () => {
  const db = 9;
  const client = redis.client(db);
  await client.flushdb();
  const q = new (require('bullmq').Queue)('mail', { connection: redis.connection(db) });
  await q.add('x', {}, { jobId: 'm-1' });
  await q.close();
  await client.lrem('bull:mail:wait', 1, 'm-1');
  const text = await bullsweep(['--redis', redis.url(db), 'doctor']);
  assert.equal(text.code, 1, text.stdout + text.stderr);
  assert.match(text.stdout, /bull:mail\S*\s+orphanHashes\s+1\s+0\s.*bull:mail:m-1/, text.stdout);
  const other = await doctor(db, ['--queue', 'mai?x*']);
  assert.deepEqual([other.code, other.report && other.report.queues, other.report && other.report.clean], [0, [], true], other.stdout + other.stderr);
  const glob = await doctor(db, ['--queue', 'ma*']);
  assert.deepEqual([glob.code, glob.report.queues.map((q) => q.queue)], [1, ['mail']], glob.stdout);
  const bad = await bullsweep(['--redis', redis.url(db), 'doctor', '--repair', 'orphanHash']);
  assert.equal(bad.code, 2, bad.stdout + bad.stderr);
  for (const kind of Object.keys(KINDS)) assert.ok(bad.stderr.includes(kind), `the error names ${kind}: ${bad.stderr}`);
  assert.equal(await client.exists('bull:mail:m-1'), 1, 'nothing was repaired');
});

// A stuck parent with a priority or a delay is moved as BullMQ moves a parent whose last child
// completed (moveParentToWait): to `prioritized` with the queue's `pc` counter, or to `delayed`
// at now + delay, with the queue's marker. Copy A: the children complete under a Worker;
// copy B: their hashes and state entries are deleted, then doctor repairs the parents.
for (const v of VERSIONS) {
  test(`${v.label}: a stuck parent with a priority or a delay goes where BullMQ's completion puts it`, async () => {
    await freshDatabases();
    const c0 = redis.client(0);
    const flows = new v.mq.FlowProducer({ connection: redis.connection(0) });
    await flows.add({ name: 'p', queueName: 'pparents', opts: { jobId: 'pp', priority: 5 }, children: [
      { name: 'gone', queueName: 'pkids', opts: { jobId: 'pc-gone' } }] });
    await flows.add({ name: 'p', queueName: 'pparents', opts: { jobId: 'dp', delay: HOUR }, children: [
      { name: 'gone', queueName: 'pkids', opts: { jobId: 'dc-gone' } }] });
    await flows.close();
    await openQueues(v.mq, redis.connection(0), ['pparents', 'pkids']);
    for (const db of [1, 2]) await copyDatabase(c0, 0, db);
    const A = redis.client(1);
    const B = redis.client(2);
    const t0 = Date.now();
    await finish(v.mq, redis.connection(1), 'pkids', ['pc-gone', 'dc-gone']);
    await B.del('bull:pkids:pc-gone', 'bull:pkids:dc-gone');
    await B.lrem('bull:pkids:wait', 0, 'pc-gone');
    await B.lrem('bull:pkids:wait', 0, 'dc-gone');
    const { file } = auditPolicy();
    const repair = await doctor(2, ['--repair', 'stuckParents'], file);
    assert.equal(repair.code, 1, `${repair.stdout}${repair.stderr}`);
    const t1 = Date.now();
    assert.deepEqual(Object.values(findingsOf(repair.report, 'stuckParents')).slice(0, 2), [2, 2], repair.stdout);

    assert.equal(await B.zscore('bull:pparents:prioritized', 'pp'), await A.zscore('bull:pparents:prioritized', 'pp'), 'the priority score, counter included');
    assert.equal(await B.get('bull:pparents:pc'), await A.get('bull:pparents:pc'));
    const due = Number(await B.zscore('bull:pparents:delayed', 'dp')) / 4096;
    assert.ok(due >= t0 + HOUR && due <= t1 + HOUR, `dp is due an hour after the repair: ${due - t1}`);
    const markers = async (c) => (await c.zrange('bull:pparents:marker', 0, -1, 'WITHSCORES'));
    const [am, bm] = [await markers(A), await markers(B)];
    assert.deepEqual(bm.filter((_, i) => i % 2 === 0), am.filter((_, i) => i % 2 === 0), `marker members: A ${am} B ${bm}`);
    assert.deepEqual(await B.zrange('bull:pparents:waiting-children', 0, -1), []);
    assert.deepEqual(await B.lrange('bull:pparents:wait', 0, -1), [], 'neither goes to wait');
    const events = (await B.xrange('bull:pparents:events', '-', '+')).map(([, f]) => f);
    assert.ok(events.some((f) => f[1] === 'waiting' && f[3] === 'pp'), 'the waiting event of the prioritized parent');
    assert.ok(events.some((f) => f[1] === 'delayed' && f[3] === 'dp'), 'the delayed event of the delayed parent');
  });
}

// An orphan hash that is a parent (a waiting parent whose `waiting-children` entry went):
// BullMQ's Job.remove() takes its pending children (removeChildren, its default), so the repair
// must not leave them naming a parent that is gone (orphanChildren made by the repair itself).
for (const v of VERSIONS) {
  test(`${v.label}: an orphan parent goes with its children, as Job.remove() takes them`, async () => {
    await freshDatabases();
    const c0 = redis.client(0);
    const flows = new v.mq.FlowProducer({ connection: redis.connection(0) });
    await flows.add({ name: 'p', queueName: 'op', opts: { jobId: 'par' }, children: [
      { name: 'k', queueName: 'okids', opts: { jobId: 'kid' } }, { name: 'k', queueName: 'op', opts: { jobId: 'kid2' } }] });
    await flows.close();
    await openQueues(v.mq, redis.connection(0), ['op', 'okids']);
    await c0.zrem('bull:op:waiting-children', 'par');
    for (const db of [1, 2]) await copyDatabase(c0, 0, db);
    await removeJobs(v.mq, redis.connection(1), 'op', ['par']);
    const { file } = auditPolicy();
    const repair = await doctor(2, ['--repair', 'orphanHashes'], file);
    assert.equal(repair.code, 1, repair.stdout + repair.stderr);
    await assertSameKeyspace('the keyspace Job.remove() of the parent leaves');
    const again = await doctor(2);
    assert.equal(again.code, 0, `no orphan children left behind: ${again.stdout}`);
  });
}

// A queue with sla.auditRequired is not repaired when its audit store cannot be written:
// counted as skipped, named on stderr, the damage left as it was.
test('auditRequired with no working audit store: nothing repaired, counted, named', async () => {
  const db = 10;
  const client = redis.client(db);
  await client.flushdb();
  const q = new (require('bullmq').Queue)('mail', { connection: redis.connection(db) });
  await q.add('x', {}, { jobId: 'm-1' });
  await q.close();
  await client.lrem('bull:mail:wait', 1, 'm-1');
  const config = writePolicy(`version: 1
audit: { url: "file:///proc/no-such-dir/audit.jsonl" }
policies:
  - { name: p, queueNamePattern: "*", rules: {}, sla: { auditRequired: true } }
`);
  const before = await rawDump(client);
  const run = await doctor(db, ['--repair', 'all'], config);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  const f = findingsOf(run.report, 'orphanHashes');
  assert.deepEqual([f.found, f.repaired, Object.values(f.skipped).reduce((a, b) => a + b, 0)], [1, 0, 1], run.stdout);
  assert.match(run.stderr, /audit/, run.stderr);
  const changes = diff(before, await rawDump(client));
  const queueKeys = (keys) => keys.filter((k) => !k.startsWith('bullsweep:'));
  assert.deepEqual([queueKeys(changes.added), changes.removed, queueKeys(changes.changed)], [[], [], []], 'the queue is left as it was');
});

// BullMQ accepts custom ids of three `:`-separated parts, so a job's own key can end like a
// sub-key of another (`x:y:processed` is the job `x:y:processed`, not the `:processed` of a job
// `x:y`) or start like a queue key (`de:q:r`, `repeat:z:1`). Such jobs are jobs: nothing is
// found, --repair all deletes nothing, and a Worker processes every one of them.
for (const v of VERSIONS) {
  test(`${v.label}: jobs whose custom ids look like sub-keys or queue keys are jobs, never damage`, async () => {
    const db = 11;
    const client = redis.client(db);
    await client.flushdb();
    const connection = redis.connection(db);
    const ids = ['x:y:processed', 'a:b:failed', 'c:d:logs', 'e:f:dependencies', 'g:h:unsuccessful', 'i:j:lock', 'de:q:r', 'repeat:z:1'];
    const q = new v.mq.Queue('ids', { connection });
    for (const jobId of ids) await q.add('job', { jobId }, { jobId });
    await q.close();
    const before = await rawDump(client);
    const find = await doctor(db);
    assert.deepEqual([find.code, find.report && find.report.queues.map((x) => [x.queue, x.error, x.findings])], [0, [['ids', null, []]]], find.stdout + find.stderr);
    const { file } = auditPolicy();
    const repair = await doctor(db, ['--repair', 'all'], file);
    const lost = [];
    for (const id of ids) if (!(await client.exists(`bull:ids:${id}`))) lost.push(id);
    assert.deepEqual(lost, [], `doctor --repair all deleted live jobs: ${repair.stdout}`);
    const changes = diff(before, await rawDump(client));
    assert.deepEqual([changes.removed, changes.changed.filter((k) => !k.startsWith('bullsweep:'))], [[], []], JSON.stringify(changes));
    await finish(v.mq, connection, 'ids', ids);
  });
}

// Job scheduler ids may contain `:`; a template `repeat:report:2024` is a template, not an
// iteration `repeat:<sid>:<millis>` (its scheduler `report:2024` is in `repeat`). Live
// schedulers are never damage: nothing found, --repair all deletes nothing, BullMQ lists them.
for (const v of VERSIONS) {
  test(`${v.label}: schedulers whose ids contain ':' are never damage`, async () => {
    const db = 12;
    const client = redis.client(db);
    await client.flushdb();
    const sids = ['daily:report', 'report:2024', 'now:1', 'plain'];
    await withQueue(v.mq, redis.connection(db), 'sch', async (q) => {
      for (const sid of sids) {
        await q.upsertJobScheduler(sid, { every: HOUR, ...(sid === 'now:1' ? {} : { startDate: Date.now() + HOUR }) }, { name: sid });
      }
    });
    const before = await rawDump(client);
    const find = await doctor(db);
    assert.deepEqual([find.code, find.report && find.report.queues.map((x) => [x.queue, x.error, x.findings])], [0, [['sch', null, []]]], find.stdout + find.stderr);
    const { file } = auditPolicy();
    await doctor(db, ['--repair', 'all'], file);
    const changes = diff(before, await rawDump(client));
    assert.deepEqual([changes.removed, changes.changed.filter((k) => !k.startsWith('bullsweep:'))], [[], []], JSON.stringify(changes));
    await withQueue(v.mq, redis.connection(db), 'sch', async (q) => {
      assert.deepEqual((await q.getJobSchedulers()).map((s) => s.key).sort(), [...sids].sort());
    });
  });
}
