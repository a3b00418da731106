// Random policy files over every action and state: finished rules (maxAge, maxCount, keepFor,
// ttl, archive, anonymize, notify), pending rules (waiting, delayed, prioritized,
// waiting-children, with remove, archive or notify), stalled remove and retry, job rules,
// events bounds, event mode, protectWaitingParents, source links to the soak's PostgreSQL
// (sources.js) on the queues whose jobs carry a record key. Each bullsweep invocation gets its
// own rendering, whose webhook header names the invocation.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { QUEUES, LAYOUTS } = require('./world');
const { SOURCE_NAMES } = require('./sources');

const dur = (rng, lo, hi) => `${rng.int(lo, hi)}ms`;

// A rule for a finished state. `ttl` comes often: on failed jobs (which "Retry all" brings
// back) and on queues whose producers reuse custom ids, an expiry meets a live job.
function finishedRule(rng, q, state, { ttlOk }) {
  const ttl = ttlOk ? (q.ids || state === 'failed' ? 8 : 4) : 0;
  const kind = rng.weighted({ maxAge: 4, maxCount: 2, ttl, archive: 2, anonymize: 2, notify: state === 'failed' ? 2 : 0 });
  switch (kind) {
    case 'maxAge': return { maxAge: dur(rng, 1000, 20000), ...(rng.chance(0.2) ? { keepFor: dur(rng, 200, 3000) } : {}) };
    case 'maxCount': return { maxCount: rng.int(0, 10) };
    case 'ttl': return { ttl: state === 'failed' ? dur(rng, 2000, 10000) : dur(rng, 1000, 5000) };
    case 'notify': return { maxAge: dur(rng, 500, 5000), action: 'notify' };
    default: return { maxAge: dur(rng, 1000, 15000), action: kind };
  }
}

function pendingRule(rng, { archiveOk = true, notifyOk = true } = {}) {
  const action = rng.weighted({ remove: 4, archive: archiveOk ? 1 : 0, notify: notifyOk ? 3 : 0 });
  return { maxAge: dur(rng, 1000, 12000), ...(action === 'remove' ? {} : { action }) };
}

// The rules of one queue's policy. A policy that archives has no ttl (check refuses both).
function rulesFor(rng, q) {
  const rules = {};
  const ttlOk = rng.chance(q.ids ? 0.8 : 0.6);
  const archiveOk = !ttlOk;
  for (const state of ['completed', 'failed']) {
    if (!rng.chance(0.8)) continue;
    let rule = finishedRule(rng, q, state, { ttlOk });
    if (rule.action === 'archive' && !archiveOk) rule = { maxAge: rule.maxAge };
    rules[state] = rule;
  }
  if (rng.chance(0.25)) rules.waiting = pendingRule(rng, { archiveOk });
  if (rng.chance(q.repeat ? 0.7 : 0.4)) rules.delayed = pendingRule(rng, { archiveOk });
  if (q.lib === 'bullmq' && rng.chance(0.2)) rules.prioritized = pendingRule(rng, { archiveOk });
  if (q.children && rng.chance(0.6)) rules['waiting-children'] = { maxAge: dur(rng, 1000, 10000) };
  // Bull's stalled jobs often, with a short maxAge: Bull takes a job in two calls, and a job
  // retried after a backoff sits in active between them with its first attempt's processedOn.
  if (q.lib === 'bull' && rng.chance(0.8)) {
    rules.stalled = { maxAge: dur(rng, 100, 700), action: rng.chance(0.8) ? 'remove' : 'retry' };
  } else if (rng.chance(0.25)) {
    rules.stalled = { maxAge: dur(rng, 1000, 3000), action: rng.chance(0.7) ? 'remove' : 'retry' };
  }
  return rules;
}

// A random policy set: for each queue but those never covered, most of the time a policy.
function randomPolicies(rng) {
  const policies = [];
  for (const q of QUEUES) {
    if (q.neverCovered || !rng.chance(0.85)) continue;
    const p = { name: `p-${q.id}`, queueNamePattern: q.name, rules: rulesFor(rng, q) };
    if (q.tenant) p.tenant = q.tenant;
    if (q.lib === 'bull' && rng.chance(0.3)) p.backend = 'bull';
    if (q.lib === 'bullmq' && rng.chance(0.3)) p.backend = 'bullmq';
    if (rng.chance(0.15)) {
      const ttlFree = !Object.values(p.rules).some((r) => r.action === 'archive');
      p.jobs = [{ name: 'slow', completed: ttlFree && rng.chance(0.5) ? { ttl: dur(rng, 1000, 4000) } : { maxAge: dur(rng, 500, 5000) } }];
    }
    if (q.lib === 'bullmq' && rng.chance(0.15)) p.events = { maxLen: rng.int(50, 500) };
    if (q.lib === 'bullmq' && rng.chance(0.2)) p.protectWaitingParents = true;
    if (rng.chance(0.15)) p.mode = 'event';
    if (q.records && rng.chance(0.7)) p.source = sourceLink(rng, p);
    policies.push(p);
  }
  return policies;
}

// A policy-level source link (every job of the queue without a job rule of its own): one of
// the two tables, a short grace, removing (or archiving, in a policy without a ttl).
function sourceLink(rng, p) {
  const ttlFree = !Object.values(p.rules).some((r) => r.ttl) && !(p.jobs || []).some((j) => j.completed && j.completed.ttl);
  return { name: rng.pick(SOURCE_NAMES), key: 'data.rec', keepFor: dur(rng, 1, 3000),
    ...(ttlFree && rng.chance(0.25) ? { action: 'archive' } : {}) };
}

const y = (v) => JSON.stringify(v);

// The YAML of a policy file: `policies` with the soak's targets (audit file, archive directory,
// pii rules, the webhook with the `X-Soak-Op: tag` header); `subjects` for `forget` (whose file
// then has no ttl, which check refuses beside subjects).
function render(policies, { tag, dirs, webhookUrl, subjects = false, schedule = '2s', sources = null }) {
  const lines = [
    'version: 1',
    `discovery: { layouts: ${y(LAYOUTS)} }`,
    `schedule: ${schedule}`,
    `audit: { url: ${y(`file://${dirs.audit}`)} }`,
    `archive: { url: ${y(`file://${dirs.archive}`)} }`,
    'pii: { paths: ["user.email"], patterns: [email] }',
    `notify: { log: false, webhook: { url: ${y(webhookUrl)}, headers: { X-Soak-Op: ${y(tag)} } } }`,
  ];
  if (subjects) lines.push('subjects: [{ name: user, paths: ["user.id"] }]');
  if (sources) lines.push(...sources.yaml([...new Set(policies.filter((p) => p.source).map((p) => p.source.name))]));
  lines.push('policies:');
  for (const p of policies) {
    const rules = subjects ? withoutTtl(p.rules) : p.rules;
    const jobs = p.jobs && subjects ? p.jobs.map((j) => ({ ...j, completed: withoutTtl({ c: j.completed }).c || { maxAge: '5s' } })) : p.jobs;
    const fields = { name: p.name, queueNamePattern: p.queueNamePattern, ...(p.tenant ? { tenant: p.tenant } : {}),
      ...(p.backend ? { backend: p.backend } : {}), ...(p.mode ? { mode: p.mode } : {}),
      ...(p.protectWaitingParents ? { protectWaitingParents: true } : {}), ...(p.events ? { events: p.events } : {}),
      ...(p.source ? { source: { name: p.source.name, key: p.source.key, ...(p.source.action ? { action: p.source.action } : {}) },
        deleteWhen: 'sourceDeleted', keepFor: p.source.keepFor } : {}),
      rules, ...(jobs ? { jobs } : {}) };
    lines.push(`  - ${y(fields)}`);
  }
  return `${lines.join('\n')}\n`;
}

function withoutTtl(rules) {
  const out = {};
  for (const [state, rule] of Object.entries(rules)) {
    if (rule.ttl) out[state] = { maxAge: rule.ttl };
    else out[state] = rule;
  }
  return out;
}

// Writes a rendering to `dir/<tag>.yaml`; returns its path.
function writeRendering(dir, text, tag) {
  const file = path.join(dir, `${tag}.yaml`);
  fs.writeFileSync(file, text);
  return file;
}

module.exports = { randomPolicies, render, writeRendering };
