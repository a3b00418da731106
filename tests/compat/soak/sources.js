// Sources that come and go: a private PostgreSQL (the tests' own, `lib/postgres.js`) with two
// tables of records, `soak_records` (a text key) and `soak_codes` (a `char(6)` key, which
// PostgreSQL pads with blanks, asked through `rtrim`), the queues whose jobs carry a record key
// at `data.rec` (world.js, `records`), policies that link them to one of the tables
// (policy.js), the `records` operation, which deletes records and inserts them again, and the
// `remind` operation, which adds jobs about them.
// Judged at every checkpoint, from the state the run started from and the tables as they were
// during it (no operation runs beside a checkpoint):
// - every job the run removed under a source link (an audit event naming the source) had no
//   record in that source's table: a job whose record exists is never removed by a source rule;
// - the plan made on the copy selects under `<state>:source` no more jobs of a state than there
//   are jobs there whose record is gone.
'use strict';
const { startPostgres } = require('../lib/postgres');
const { QUEUES, PLAN_STATE_KEYS, jobData } = require('./world');
const { queueView, snapshot } = require('./keyspace');

// The record keys job data names (`r1`…`r30`, of which `r1`…`r20` are there at the start;
// world.js's `recordKey` also names `r31`…`r33`, never inserted).
const KEYS = Array.from({ length: 30 }, (_, i) => `r${i + 1}`);
const TABLES = {
  records: { table: 'soak_records', create: 'CREATE TABLE soak_records (id text PRIMARY KEY)', column: 'id',
    query: 'SELECT id AS key FROM soak_records WHERE id = ANY($1)' },
  codes: { table: 'soak_codes', create: 'CREATE TABLE soak_codes (code char(6) PRIMARY KEY)', column: 'code',
    query: 'SELECT rtrim(code) AS key FROM soak_codes WHERE rtrim(code) = ANY($1)' },
};
const SOURCE_NAMES = Object.keys(TABLES);

// The record key of job `id` of queue `base` in snapshot `snap`.
function recOf(snap, base, id) {
  const h = snap.get(`${base}:${id}`);
  if (!h || h.type !== 'hash') return { found: false };
  try { return { found: true, rec: (JSON.parse(h.value.data) || {}).rec }; } catch { return { found: true, rec: undefined }; }
}

class Sources {
  constructor({ journal }) {
    this.journal = journal;
    this.pg = null;
    this.stats = { inserted: 0, deleted: 0, removedBySource: 0, sourceEventsJudged: 0 };
  }

  async start() {
    this.pg = await startPostgres();
    for (const t of Object.values(TABLES)) {
      await this.pg.sql(t.create);
      await this.pg.sql(`INSERT INTO ${t.table} SELECT unnest($1::text[])`, [KEYS.slice(0, 20)]);
    }
  }

  async stop() { if (this.pg) await this.pg.stop(); }

  // The `sources:` lines of a policy file whose policies link `names`.
  yaml(names) {
    if (!names.length || !this.pg) return [];
    return ['sources:', ...names.map((n) => `  ${n}: { postgres: { url: ${JSON.stringify(this.pg.url)}, query: ${JSON.stringify(TABLES[n].query)}, timeout: 5s } }`)];
  }

  // The record keys in source `name`'s table now (blanks trimmed: the keys jobs hold).
  async present(name) {
    const t = TABLES[name];
    const { rows } = await this.pg.sql(`SELECT rtrim(${t.column}) AS k FROM ${t.table}`);
    return new Set(rows.map((r) => r.k));
  }

  // Records go (1-4 deleted) or come back (1-4 inserted), in one table.
  async op(rng) {
    const name = rng.pick(SOURCE_NAMES);
    const t = TABLES[name];
    const have = await this.present(name);
    const go = have.size > 5 && (have.size === KEYS.length || rng.chance(0.5));
    const pool = KEYS.filter((k) => have.has(k) === go);
    const picked = [];
    for (let n = Math.min(pool.length, rng.int(1, 4)); n > 0; n--) picked.push(pool.splice(rng.int(0, pool.length - 1), 1)[0]);
    if (go) {
      await this.pg.sql(`DELETE FROM ${t.table} WHERE rtrim(${t.column}) = ANY($1)`, [picked]);
      this.stats.deleted += picked.length;
    } else {
      await this.pg.sql(`INSERT INTO ${t.table} SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, [picked]);
      this.stats.inserted += picked.length;
    }
    return `${t.table}: ${go ? 'deleted' : 'inserted'} ${picked.join(' ')} (${have.size + (go ? -picked.length : picked.length)} of ${KEYS.length} there)`;
  }

  // Reminders about records: 3-10 jobs on a queue with records (some delayed), as a producer
  // of that queue adds them.
  async remind(t, rng) {
    const q = rng.pick(QUEUES.filter((x) => x.records));
    const jobs = Array.from({ length: rng.int(3, 10) }, () => ({ name: rng.pick(['remind', 'remind', 'slow']),
      data: jobData(rng, q, t.nextSerial()), opts: rng.chance(0.2) ? { delay: rng.int(300, 6000) } : {} }));
    await t.producers[q.id].addBulk(jobs);
    t.stats.added += jobs.length;
    return `${q.base} ${jobs.map((j) => `${j.data.rec || '-'}${j.opts.delay ? '(delayed)' : ''}`).join(' ')}`;
  }

  // The checkpoint's judgement (see the top of this file); `events` are the run's audit events,
  // `s1` the state it started from, `plan` the plan made on a copy of it.
  async judge(ctx, s1, events, plan) {
    const present = await this.tables();
    this.judgeEvents(ctx, s1, events, present);
    this.judgePlan(ctx, s1, plan, present);
  }

  // `fn` (a `run` between checkpoints), judged as a checkpoint's run is by its events when no
  // daemon runs (a daemon's lookup may predate the last `records` operation): the jobs of the
  // queues with records are read before it, and its events are those stamped after it began.
  async around(ctx, fn) {
    if (ctx.sweeps.daemon || !ctx.sweeps.policies.some((p) => p.source)) return fn();
    const snap = new Map();
    for (const q of QUEUES.filter((x) => x.records)) for (const [k, v] of await snapshot(ctx.client, `${q.base}:*`)) snap.set(k, v);
    const from = ctx.audit.refresh();
    const started = Date.now();
    const out = await fn();
    if (!ctx.sweeps.daemon) this.judgeEvents(ctx, snap, ctx.audit.since(from).filter((e) => e.timestamp >= started), await this.tables());
    return out;
  }

  async tables() {
    return Object.fromEntries(await Promise.all(SOURCE_NAMES.map(async (n) => [n, await this.present(n)])));
  }

  // Every job an event removed under a source link had no record in that source's table; jobs
  // not in `s1` (added after it was read) are not judged.
  judgeEvents(ctx, s1, events, present) {
    for (const e of events) {
      if (!e.sourceLink || e.action === 'notify') continue;
      for (const id of e.jobIds || []) {
        const { found, rec } = recOf(s1, e.queueKey, id);
        if (!found) continue;
        this.stats.sourceEventsJudged += 1;
        ctx.journal.checked();
        const table = present[e.sourceLink];
        const bad = !table ? 'a source the soak does not declare' : typeof rec !== 'string' ? 'no record key'
          : table.has(rec) ? `its record ${rec} in ${TABLES[e.sourceLink].table}` : null;
        if (!bad) this.stats.removedBySource += 1;
        if (bad) {
          ctx.journal.violation(2, `source:${e.queueKey}:${id}`, `the run removed job ${id} of ${e.queueKey} under source ${e.sourceLink} (${e.sourceReason}) though it had ${bad}`,
            { queue: e.queueKey, jobId: id, rec, sourceLink: e.sourceLink, event: { seq: e.seq, action: e.action, state: e.state, sourceReason: e.sourceReason, actor: e.actor },
              job: s1.get(`${e.queueKey}:${id}`) || null, recordsThen: table ? [...table].sort() : null });
        }
      }
    }
  }

  // Per queue with records and plan state, `<state>:source` selects at most the jobs there whose
  // record is gone from the table the policy in force links.
  judgePlan(ctx, s1, plan, present) {
    for (const q of QUEUES.filter((x) => x.records)) {
      const entry = ((plan && plan.queues) || []).find((e) => e.key === q.base);
      const policy = ctx.sweeps.policies.find((p) => p.queueNamePattern === q.name);
      for (const [k, s] of Object.entries((entry && entry.states) || {})) {
        const [state, kind] = k.split(':');
        if (kind !== 'source' || !s.matched) continue;
        ctx.journal.checked();
        const table = policy && policy.source && present[policy.source.name];
        const view = queueView(s1, q.base, PLAN_STATE_KEYS[state] || []);
        const gone = [...view.where.keys()].filter((id) => { const r = recOf(s1, q.base, id); return r.found && typeof r.rec === 'string' && table && !table.has(r.rec); });
        if (s.matched > gone.length) {
          ctx.journal.violation(2, `sourcePlan:${q.base}:${state}:${ctx.journal.opIndex}`,
            `the plan selects ${s.matched} job(s) of ${q.base} ${state} by source, but only ${gone.length} there have no record`,
            { queue: q.base, state, planState: s, policySource: policy ? policy.source : null, jobsWithoutRecord: gone.slice(0, 20) });
        }
      }
    }
  }
}

module.exports = { Sources, SOURCE_NAMES };
