// What a run removed, per queue and state, judged by the keyspace, and what a plan or run
// report says it removes: each state's selected jobs and every job taken along (issue 42:
// a run removes exactly what the plan made from the same state shows, taken-along jobs
// included). States are named as policies name them: `wait` and `paused` are `waiting`.
'use strict';

const STATES = ['wait', 'paused', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed'];
// A report's `<state>:source` row removes jobs of `<state>`.
const named = (state) => (state === 'wait' || state === 'paused' ? 'waiting' : state.replace(/:source$/, ''));

// The ids in every state of every queue in `bases`: `${base} ${state}` → sorted ids.
async function membership(client, bases) {
  const out = {};
  for (const base of bases) {
    for (const state of STATES) {
      const key = `${base}:${state}`;
      const type = await client.type(key);
      const ids = type === 'list' ? await client.lrange(key, 0, -1) : type === 'zset' ? await client.zrange(key, 0, -1) : [];
      const k = `${base} ${named(state)}`;
      out[k] = [...(out[k] || []), ...ids].sort();
    }
  }
  return out;
}

// Per queue and state, how many ids of `before` are in no state of `after` (moved ids, a
// released parent, are not removed).
function removedPer(before, after) {
  const still = new Set();
  for (const [k, ids] of Object.entries(after)) for (const id of ids) still.add(`${k.split(' ')[0]} ${id}`);
  const out = {};
  for (const [k, ids] of Object.entries(before)) {
    const gone = ids.filter((id) => !still.has(`${k.split(' ')[0]} ${id}`)).length;
    if (gone > 0) out[k] = gone;
  }
  return out;
}

// Per queue and state, what a report says its run removes: each state's `done` (a run, with
// `field` 'done'), its `toActOn` (a plan, with `field` 'toActOn') or its `matched` less what
// it leaves (a plan), and every job taken along (parents and children removed; a released
// parent is moved, not removed).
function reportedRemovals(report, field) {
  const out = {};
  const add = (k, n) => { if (n > 0) out[k] = (out[k] || 0) + n; };
  const left = (s) => Object.values(s.skipped || {}).filter((v) => typeof v === 'number').reduce((a, b) => a + b, 0);
  for (const q of report.queues) {
    for (const [state, s] of Object.entries(q.states)) {
      if (!/^remove|^archive/.test(s.action)) continue;
      add(`${q.key} ${named(state)}`, field === 'done' || field === 'toActOn' ? s[field] : s.matched - left(s));
      for (const [base, states] of Object.entries((s.takenAlong && s.takenAlong.queues) || {})) {
        for (const [from, c] of Object.entries(states)) add(`${base} ${named(from)}`, (c.parentRemoved || 0) + (c.childRemoved || 0));
      }
    }
  }
  return out;
}

// The summary line of `plan` or `run` in figures: `Plan: 1,004 jobs to act on (notify 4,
// remove 1,000) …` → {total: 1004, by: {notify: 4, remove: 1000}}.
function summaryOf(stdout) {
  const m = stdout.match(/^(?:Plan: ([\d,]+) jobs? to act on|Run: acted on ([\d,]+) jobs?)(?: \(([^)]*)\))?/m);
  if (!m) throw new Error(`no summary line in: ${stdout}`);
  const num = (t) => Number(t.replace(/,/g, ''));
  const by = {};
  for (const part of (m[3] || '').split(', ').filter(Boolean)) {
    const at = part.lastIndexOf(' ');
    by[part.slice(0, at)] = num(part.slice(at + 1));
  }
  return { total: num(m[1] || m[2]), by };
}

module.exports = { membership, removedPer, reportedRemovals, summaryOf };
