// What a run did to one queue, read from two keyspace snapshots, and what the plan made from
// the first allows: removals per state against the jobs the plan selects for a removing action
// and the jobs it says a run takes along (by queue and state, from `takenAlong.queues`; a plan
// without those maps, from an older build, is held to its counts of jobs taken along for the
// queue as a whole), in-place changes against `anonymize`, expiries against `ttl`.
'use strict';
const { LIVE, FINISHED, LIVE_KEYS } = require('./world');
const { queueView } = require('./keyspace');

const REMOVING = new Set(['remove', 'archive', 'mixed', 'expire']);
const CHANGING = new Set(['anonymize', 'mixed']);
// Keys under which a plan counts jobs a run takes along with the ones it selects.
const ALONG = /along|taken|children|cascade/i;
// Counts under such keys that are not removals (released parents, parents left waiting).
const NOT_REMOVED = /released|parentWaiting|protect|skipped/i;

// The plan's name of a Redis state key.
function planState(key) {
  if (key === 'wait' || key === 'paused') return 'waiting';
  if (key === 'active') return 'stalled';
  return key;
}

function stateKeysOf(q) {
  return [...LIVE[q.lib].lists, ...LIVE[q.lib].sets, ...FINISHED];
}

// Of an id's finished states, the one whose score is its job's `finishedOn` (an id in both
// `completed` and `failed` has a stale entry in one of them: the job is the other's).
function finishedAt(snap, base, id, states, hash) {
  const finishedOn = hash.value && hash.value.finishedOn;
  if (states.length < 2 || finishedOn === undefined) return null;
  return states.find((s) => {
    const e = snap.get(`${base}:${s}`);
    if (!e || e.type !== 'zset') return false;
    const i = e.value.findIndex((v, k) => k % 2 === 0 && v === id);
    return i >= 0 && Number(e.value[i + 1]) === Number(finishedOn);
  }) || null;
}

// Per Redis state, the ids whose hash a run removed, the ids whose hash expired (it carried a
// time to live before), the ids changed in place, and the ids that got a time to live; jobs
// `excused` names (lost earlier within a documented limit) are left out.
function whatChanged(q, before, after, excused = () => false) {
  const keys = stateKeysOf(q);
  const v1 = queueView(before, q.base, keys);
  const v2 = queueView(after, q.base, keys);
  const out = { removed: {}, expired: {}, changed: {}, ttlSet: {} };
  for (const [id, states] of v1.where) {
    const h1 = before.get(`${q.base}:${id}`);
    if (!h1 || h1.type !== 'hash' || excused(q.base, id)) continue;
    const h2 = after.get(`${q.base}:${id}`);
    const state = states.find((s) => LIVE_KEYS.has(s)) || finishedAt(before, q.base, id, states, h1) || states[0];
    const push = (m) => { (m[state] = m[state] || []).push(id); };
    if (!h2) push(h1.pttl >= 0 ? out.expired : out.removed);
    else if (h2.pttl >= 0 && h1.pttl < 0) push(out.ttlSet);
    else if (JSON.stringify(h1.value) !== JSON.stringify(h2.value)
      && JSON.stringify(v2.where.get(id) || []) === JSON.stringify(states)) push(out.changed);
  }
  return out;
}

// The sum of every count in `node` under a key that speaks of jobs taken along.
function alongCount(node, inside = false) {
  if (typeof node === 'number') return inside ? node : 0;
  if (!node || typeof node !== 'object') return 0;
  let n = 0;
  for (const [k, v] of Object.entries(node)) {
    if (inside && NOT_REMOVED.test(k)) continue;
    n += alongCount(v, inside || ALONG.test(k));
  }
  return n;
}

// The jobs a plan entry selects in `state` (the plan's name) for one of `actions`.
function selected(entry, state, actions) {
  if (!entry) return 0;
  let n = 0;
  for (const [k, s] of Object.entries((entry && entry.states) || {})) {
    if (k.split(':')[0] === state && actions.has(s.action)) n += s.matched || 0;
  }
  return n;
}

// What the plan counts as taken along from queue `base`, per plan state: the parents removed
// and children removed its `takenAlong.queues` maps name there, whichever queue's entry holds
// them. Null for a plan without such maps (a build before they were counted by queue and state).
function alongByState(plan, base) {
  let mapped = false;
  const out = {};
  for (const e of plan.queues || []) {
    for (const s of Object.values(e.states || {})) {
      const queues = s.takenAlong && s.takenAlong.queues;
      if (!queues) continue;
      mapped = true;
      for (const [state, counts] of Object.entries(queues[base] || {})) {
        const ps = planState(state);
        out[ps] = (out[ps] || 0) + (counts.parentRemoved || 0) + (counts.childRemoved || 0);
      }
    }
  }
  return mapped ? out : null;
}

// The removals beyond what the plan selects in each state, and beyond what it takes along (per
// state with a plan that maps them, for the queue as a whole with one that only counts them).
function removedBeyond(q, entry, got, along) {
  const byPlanState = {};
  for (const [state, ids] of Object.entries(got.removed)) {
    const ps = planState(state);
    byPlanState[ps] = [...(byPlanState[ps] || []), ...ids];
  }
  const excess = {};
  let over = 0;
  for (const [ps, ids] of Object.entries(byPlanState)) {
    const allowed = selected(entry, ps, REMOVING) + (along ? along[ps] || 0 : 0);
    if (ids.length > allowed) { excess[ps] = { removed: ids.length, allowed, ids: ids.slice(0, 20) }; over += ids.length - allowed; }
  }
  const counted = along ? 0 : alongCount(entry);
  if (over <= counted) return null;
  return { kind: 'removedBeyondPlan', summary: `the run removed ${over - counted} job(s) of ${q.base} beyond what the plan selects and takes along`,
    excess, takenAlongFromIt: along, planEntry: entry };
}

// The problems with what a run did to queue `q` given the plan's entry for it (null when the
// plan lists it under `uncovered` or not at all: then nothing of it may change, but what the
// plan says a governed queue's flows take along from it).
function judgeQueue(q, entry, plan, before, after, keyDiff, excused) {
  const problems = [];
  const mine = (k) => k.startsWith(`${q.base}:`) && !excused(q.base, k.slice(q.base.length + 1));
  const changedKeys = { removed: keyDiff.removed.filter(mine), added: keyDiff.added.filter(mine), changed: keyDiff.changed.filter(mine) };
  const got = whatChanged(q, before, after, excused);
  const along = alongByState(plan, q.base);
  const reached = along && Object.values(along).some((n) => n > 0);
  if (!entry && !reached) {
    const n = changedKeys.removed.length + changedKeys.added.length + changedKeys.changed.length;
    if (n) problems.push({ kind: 'leftAlone', summary: `the plan leaves ${q.base} alone, yet the run changed ${n} of its keys`, got, keys: sample(changedKeys) });
    return { got, problems };
  }
  const beyond = removedBeyond(q, entry, got, along);
  if (beyond) problems.push(beyond);
  if (!entry) return { got, problems };
  for (const [state, ids] of Object.entries(got.changed)) {
    const allowed = selected(entry, planState(state), CHANGING);
    if (ids.length > allowed) problems.push({ kind: 'changedBeyondPlan', summary: `the run changed ${ids.length} job(s) in ${q.base}'s ${state} in place; the plan anonymizes ${allowed}`, ids: ids.slice(0, 20), planEntry: entry });
  }
  for (const [state, ids] of Object.entries(got.ttlSet)) {
    const ttl = entry.states[`${planState(state)}:ttl`];
    if (LIVE_KEYS.has(state) || !ttl || ids.length > (ttl.matched || 0)) {
      problems.push({ kind: 'expiryBeyondPlan', summary: `the run gave ${ids.length} job(s) in ${q.base}'s ${state} an expiry`, ids: ids.slice(0, 20), planEntry: entry });
    }
  }
  return { got, problems };
}

function sample(keys) {
  return Object.fromEntries(Object.entries(keys).map(([k, v]) => [k, { count: v.length, keys: v.slice(0, 20) }]));
}

module.exports = { judgeQueue, planState, whatChanged };
