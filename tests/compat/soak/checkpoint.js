// A quiescent checkpoint: the daemon stopped, every worker closed once its jobs finished, no
// producer adding. Then, from one state of the keyspace:
// - invariant 3: `plan`, `report`, `alerts`, `explain` and `doctor` change no key (bullsweep's
//   own included) and send nothing;
// - invariant 2: `run` removes, changes and expires only what the plan made from the same state
//   shows, per queue and state (taken-along jobs as the plan counts them), leaves the queues the
//   plan calls uncovered byte for byte, and sends notices only where the plan notifies. Time
//   passes between a plan and a run, and every rule selects more as it does (an age crosses
//   `maxAge`, `keepFor` runs out), never less; so the plan a run is held to is one made on a copy
//   of the state the run started from (database 1), right after the run: it shows everything
//   the run may have done, and nothing the run may not;
// - invariant 4: each job removed, changed or given an expiry is named by an audit event of
//   the right action; no event calls a parent whose hash is gone `parentReleased` (or one that
//   still exists `parentRemoved`); `audit verify` passes;
// - source links (sources.js): a job the run removed under a source had no record there, and
//   the plan selects by source no more jobs of a state than lack their record;
// - invariant 5: `doctor` after the run finds nothing it did not find before it (ids of a ttl'd
//   queue Redis expired, which the next run drops, excepted: README, "Expiring keys");
// - and the continuous checks, with nothing moving.
'use strict';
const { QUEUES } = require('./world');
const { snapshot, diff } = require('./keyspace');
const { copyDatabase } = require('../lib/harness');
const { judgeQueue } = require('./accounting');
const { AuditTrail } = require('./audit');
const { SoakBug } = require('./journal');
const { READ_WRITES } = require('./sweeps');

const NOT_REMOVALS = new Set(['notify', 'anonymize', 'restore', 'unstage', 'failed']);

async function checkpoint(ctx, rng) {
  const { journal, sweeps, traffic, client } = ctx;
  await sweeps.stopDaemon();
  await traffic.stopWorkers();
  try {
    await ctx.live.check();
    const s0 = await snapshot(client);
    const reads = await readAll(ctx, rng);
    const s1 = await snapshot(client);
    judgeReads(ctx, s0, s1, reads);
    await copyTo1(client);
    const auditFrom = ctx.audit.refresh();
    const runStart = Date.now();
    const run = await sweeps.invoke('run', ['run']);
    const s2 = await snapshot(client);
    // The run ships events a stopped daemon left in Redis too: only the run's own are judged.
    const events = ctx.audit.since(auditFrom).filter((e) => e.timestamp >= runStart - 1000);
    const upper = await sweeps.invoke('plan', ['plan'], { tag: `op${journal.opIndex}-plan-on-copy`, db: 1 });
    await flush1(client);
    if (upper.code !== 0 || !upper.json) throw new SoakBug(`plan on the copy failed at a checkpoint: ${upper.stderr}`);
    judgeBackends(ctx, reads.plan.json, s1);
    const queues = judgeRun(ctx, upper.json, s1, s2, run);
    judgeAudit(ctx, queues, events, s2);
    await ctx.sources.judge(ctx, s1, events, upper.json);
    await judgeVerify(ctx);
    const after = await sweeps.invoke('doctor', ['doctor']);
    judgeDoctor(ctx, reads.doctor.json, after.json, reads.plan.json, s1);
    await ctx.live.check();
    return `plan/run over ${QUEUES.length} queues: ${summarize(queues)}; ${events.length} audit events`;
  } finally {
    await traffic.startWorkers();
  }
}

// Database 1 becomes a copy of database 0 (keys, values, times to live).
async function copyTo1(client) {
  await flush1(client);
  await copyDatabase(client, 0, 1);
}

async function flush1(client) {
  await client.select(1);
  await client.flushdb();
  await client.select(0);
}

async function readAll(ctx, rng) {
  const { sweeps } = ctx;
  const plan = await sweeps.invoke('plan', ['plan']);
  if (plan.code !== 0 || !plan.json) throw new SoakBug(`plan failed at a checkpoint: ${plan.stderr}`);
  const report = await sweeps.invoke('report', ['report']);
  const alerts = await sweeps.invoke('alerts', ['alerts']);
  const q = rng.pick(QUEUES);
  const explain = await sweeps.invoke('explain', ['explain', q.base, ...(q.lib === 'bull' ? ['--backend', 'bull'] : [])]);
  const doctor = await sweeps.invoke('doctor', ['doctor']);
  return { plan, report, alerts, explain, doctor };
}

// Invariant 3: the reads changed no key (streams by length, bullsweep's own keys included).
function judgeReads(ctx, s0, s1, reads) {
  const d = diff(s0, s1, { streams: true });
  for (const list of Object.values(d)) list.splice(0, list.length, ...list.filter((k) => !READ_WRITES.has(k)));
  ctx.journal.checked();
  const n = d.added.length + d.removed.length + d.changed.length;
  if (n) {
    ctx.journal.violation(3, `keys:${ctx.journal.opIndex}`, `reads (plan, report, alerts, explain, doctor) changed ${n} key(s)`,
      { added: d.added.slice(0, 20), removed: d.removed.slice(0, 20), changed: d.changed.slice(0, 20).map((k) => ({ key: k, before: s0.get(k), after: s1.get(k) })),
        commands: Object.values(reads).map((r) => r.tag) });
  }
  ctx.live.sends();
}

// Each queue is governed as the library that wrote it.
function judgeBackends(ctx, plan, s1) {
  for (const q of QUEUES) {
    const entry = (plan.queues || []).find((e) => e.key === q.base);
    ctx.journal.checked();
    if (entry && entry.backend && entry.backend !== q.lib) {
      ctx.journal.violation(2, `backend:${q.base}`, `the plan governs ${q.base}, a ${q.lib} queue, as ${entry.backend}`,
        { queue: q.base, writtenBy: q.pkg, planBackend: entry.backend, meta: s1.get(`${q.base}:meta`) || null });
    }
  }
}

// Invariant 2 per queue, and the run's notices, against the plan made on the copy.
function judgeRun(ctx, plan, s1, s2, run) {
  const keyDiff = diff(s1, s2);
  const out = {};
  for (const q of QUEUES) {
    const entry = (plan.queues || []).find((e) => e.key === q.base) || null;
    const { got, problems } = judgeQueue(q, entry, plan, s1, s2, keyDiff, (base, id) => ctx.losses.isExcused(base, id));
    out[q.id] = got;
    ctx.journal.checked();
    for (const p of problems) ctx.journal.violation(2, `${p.kind}:${q.base}:${ctx.journal.opIndex}`, p.summary, { ...p, runExit: run.code, runQueue: (run.json && run.json.queues || []).find((e) => e.key === q.base) || null });
  }
  for (const post of ctx.webhook.postsOf(run.tag)) {
    const b = post.body || {};
    const entry = (plan.queues || []).find((e) => e.key === b.queueKey);
    const s = entry && entry.states[b.state];
    ctx.journal.checked();
    if (!s || !['notify', 'mixed'].includes(s.action) || !s.matched) {
      ctx.journal.violation(2, `send:${run.tag}:${b.queueKey}:${b.state}`, `the run sent a notice for ${b.queueKey} ${b.state} the plan does not show`,
        { notice: { queueKey: b.queueKey, state: b.state, count: b.count }, planState: s || null });
    }
  }
  return out;
}

// Invariant 4: the run's events name what it removed, changed and expired, and label parents
// as what became of them.
function judgeAudit(ctx, queues, events, after) {
  for (const q of QUEUES) {
    const got = queues[q.id];
    const check = (ids, ok, what) => {
      for (const id of ids) {
        ctx.journal.checked();
        if (events.some((e) => ok(e) && AuditTrail.names(e, q.base, id))) continue;
        ctx.journal.violation(4, `${what}:${q.base}:${id}`, `job ${id} of ${q.base} was ${what} by the run without an audit event of that action`,
          { queue: q.base, jobId: id, eventsNamingIt: events.filter((e) => AuditTrail.names(e, q.base, id)).map((e) => ({ action: e.action, state: e.state, seq: e.seq })) });
      }
    };
    for (const ids of Object.values(got.removed)) check(ids, (e) => !NOT_REMOVALS.has(e.action), 'removed');
    for (const ids of Object.values(got.changed)) check(ids, (e) => e.action === 'anonymize', 'changed');
    for (const ids of Object.values(got.ttlSet)) check(ids, (e) => e.action === 'expire', 'expired');
  }
  judgeLabels(ctx, events, (key) => after.has(key) && after.get(key).type === 'hash');
}

// A parent called released must still exist; one called removed must be gone.
function judgeLabels(ctx, events, exists) {
  for (const e of events) {
    for (const r of e.relatedJobs || []) {
      ctx.journal.checked();
      const there = exists(r.key);
      if (r.role === 'parentReleased' && !there) {
        ctx.journal.violation(4, `released:${r.key}`, `audit event ${e.seq} (${e.action} ${e.queueKey} ${e.state}) calls ${r.key} parentReleased, but that parent is gone`,
          { event: { seq: e.seq, action: e.action, queueKey: e.queueKey, state: e.state, jobIds: e.jobIds, relatedJobs: e.relatedJobs } });
      } else if (r.role === 'parentRemoved' && there) {
        ctx.journal.violation(4, `removed:${r.key}`, `audit event ${e.seq} calls ${r.key} parentRemoved, but that parent is still there`,
          { event: { seq: e.seq, action: e.action, queueKey: e.queueKey, state: e.state, relatedJobs: e.relatedJobs } });
      }
    }
  }
}

async function judgeVerify(ctx) {
  const out = await ctx.sweeps.invoke('audit', ['audit', 'verify']);
  ctx.journal.checked();
  if (out.code !== 0 || !out.json || out.json.status !== 'ok') {
    ctx.journal.violation(4, `verify:${ctx.journal.opIndex}`, '`audit verify` does not pass', { exit: out.code, json: out.json, stderr: out.stderr.slice(0, 2000) });
  }
}

// Invariant 5: per queue and kind, what doctor finds after the run and did not find before.
// Ids whose job Redis expired dangle until the queue's next run (README, "Expiring keys"): a
// queue with a ttl, or with a job hash that carried an expiry before the run, may gain them.
function judgeDoctor(ctx, before, after, plan, s1) {
  if (!before || !after) {
    ctx.journal.note('doctor gave no JSON at a checkpoint');
    return;
  }
  const counts = (report) => {
    const m = new Map();
    for (const q of report.queues || []) for (const f of q.findings || []) m.set(`${q.key || q.queue}|${f.kind}`, { found: f.found, samples: f.samples });
    return m;
  };
  const b = counts(before);
  const expiring = new Set((plan.queues || []).filter((e) => Object.keys(e.states || {}).some((k) => k.endsWith(':ttl'))).map((e) => e.key));
  for (const q of QUEUES) {
    if ([...s1].some(([k, v]) => v.type === 'hash' && v.pttl >= 0 && k.startsWith(`${q.base}:`))) expiring.add(q.base);
  }
  for (const [key, f] of counts(after)) {
    const [queue, kind] = key.split('|');
    ctx.journal.checked();
    const was = (b.get(key) || { found: 0 }).found;
    if (f.found <= was || (kind === 'danglingIds' && expiring.has(queue))) continue;
    // What a loss excused earlier left (its id, the hash a worker made again) is that loss.
    const samples = f.samples || [];
    if (samples.length && samples.every((k) => k.startsWith(`${queue}:`) && ctx.losses.isExcused(queue, k.slice(queue.length + 1)))) continue;
    ctx.journal.violation(5, `${key}:${ctx.journal.opIndex}`, `after a routine run, doctor finds ${f.found - was} more ${kind} in ${queue}`,
      { queue, kind, before: was, after: f.found, samples: f.samples, library: (QUEUES.find((q) => q.base === queue) || {}).lib });
  }
}

function summarize(queues) {
  const n = (m) => Object.values(m).reduce((s, ids) => s + ids.length, 0);
  let removed = 0; let changed = 0; let expired = 0;
  for (const got of Object.values(queues)) { removed += n(got.removed); changed += n(got.changed); expired += n(got.ttlSet); }
  return `removed ${removed}, changed ${changed}, expiry set on ${expired}`;
}

module.exports = { checkpoint, judgeLabels };
