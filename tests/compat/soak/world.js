// The soak's world: the queues its producers and workers use (three libraries, several
// prefixes and two tenants), the layouts that name them, and the jobs' self-checking data.
'use strict';
const crypto = require('node:crypto');

// Every queue of the soak. `lib` is the library whose data the queue holds; `pkg` the npm
// package that writes it. `children` names the queue a flow parent's children go to.
// `neverCovered`: no generated policy ever covers it (a flow's children left alone by the plan).
// `ids`: the pool of custom ids producers reuse (idempotency keys). `repeat`: a repeatable job
// (Bull) or a job scheduler (BullMQ) runs there; `bullmqMeta`: a BullMQ `Queue` object is once
// opened on this Bull queue (a migration script), which writes a BullMQ `meta` hash.
// `records`: its jobs carry a record key (`data.rec`) that source-linked policies look up in
// the soak's PostgreSQL (sources.js).
const QUEUES = [
  { id: 'orders', lib: 'bullmq', pkg: 'bullmq', prefix: 'bull', name: 'orders', ids: 'order' },
  { id: 'mail', lib: 'bullmq', pkg: 'bullmq', prefix: 'bull', name: 'mail', repeat: true, records: true },
  { id: 'reminders', lib: 'bullmq', pkg: 'bullmq', prefix: 'bull', name: 'reminders', records: true },
  { id: 'exports', lib: 'bullmq', pkg: 'bullmq', prefix: 'bull', name: 'exports', children: 'export-parts' },
  { id: 'export-parts', lib: 'bullmq', pkg: 'bullmq', prefix: 'bull', name: 'export-parts', neverCovered: true },
  { id: 'acme-billing', lib: 'bullmq', pkg: 'bullmq5', prefix: '{app}:acme', name: 'billing', tenant: 'acme',
    children: 'acme-billing' },
  { id: 'globex-billing', lib: 'bullmq', pkg: 'bullmq5', prefix: '{app}:globex', name: 'billing', tenant: 'globex',
    ids: 'invoice' },
  { id: 'reports', lib: 'bull', pkg: 'bull', prefix: 'legacy', name: 'reports', ids: 'report' },
  { id: 'cron', lib: 'bull', pkg: 'bull', prefix: 'legacy', name: 'cron', repeat: true, bullmqMeta: true },
  { id: 'digest', lib: 'bull', pkg: 'bull', prefix: 'legacy', name: 'digest', ids: 'digest' },
];
for (const q of QUEUES) q.base = `${q.prefix}:${q.name}`;
const byId = new Map(QUEUES.map((q) => [q.id, q]));

// The layouts of every generated policy file: tenants are in the `{app}` prefix.
const LAYOUTS = ['bull:{queue}', '{{app}}:{tenant}:{queue}', 'legacy:{queue}'];

// The live states as Redis keys, per library: a job in one of them must keep its hash and data.
const LIVE = {
  bullmq: { lists: ['wait', 'paused', 'active'], sets: ['delayed', 'prioritized', 'waiting-children'] },
  bull: { lists: ['wait', 'paused', 'active'], sets: ['delayed'] },
};
const FINISHED = ['completed', 'failed'];
const LIVE_KEYS = new Set([...LIVE.bullmq.lists, ...LIVE.bullmq.sets]);

// The Redis key a plan's state name counts (`waiting` is the wait list, and for a paused queue
// of BullMQ before 6 the paused list; `stalled` is the active list).
const PLAN_STATE_KEYS = {
  completed: ['completed'], failed: ['failed'], waiting: ['wait', 'paused'], delayed: ['delayed'],
  prioritized: ['prioritized'], 'waiting-children': ['waiting-children'], stalled: ['active'],
};

// The subjects (people) jobs belong to, for `forget`.
const USERS = Array.from({ length: 8 }, (_, i) => `u${i}`);

function checksum(k) {
  return crypto.createHash('sha1').update(`soak:${k}`).digest('hex').slice(0, 12);
}

// A job's data: a unique key `k` and its checksum `c` (what a worker checks), the person it
// belongs to (with an email, the anonymizer's and the notices' personal data), how long a worker
// takes (`ms`) and how many attempts fail (`fail`); on a queue with records, the record's key.
function jobData(rng, q, serial, extra = {}) {
  const user = rng.pick(USERS);
  const rec = q.records ? { rec: recordKey(rng) } : {};
  return payload(`${q.id}#${serial}`, { user: { id: user, email: `${user}@example.com` },
    ms: rng.chance(0.25) ? rng.int(300, 2500) : rng.int(0, 30), fail: rng.chance(0.3) ? rng.int(1, 3) : 0, ...rec, ...extra });
}

// A record key (`r1`…`r30`, some never inserted, some jobs none): see sources.js.
function recordKey(rng) {
  if (rng.chance(0.08)) return undefined;
  return rng.chance(0.06) ? rng.pick(['r31', 'r32', 'r33']) : `r${rng.int(1, 30)}`;
}

// A payload with key `k`: what a repeatable job's iterations carry (no person, no failure).
function payload(k, extra = { ms: 5, fail: 0 }) {
  return { k, c: checksum(k), ...extra };
}

// Whether `data` is a payload a producer of the soak made (the personal fields may have been
// anonymized since; the key and its checksum never are).
function validPayload(data) {
  return !!data && typeof data === 'object' && typeof data.k === 'string' && data.c === checksum(data.k);
}

module.exports = { QUEUES, byId, LAYOUTS, LIVE, FINISHED, LIVE_KEYS, PLAN_STATE_KEYS, USERS, jobData, payload, validPayload };
