// bull-board through the integration (`integrations/bull-board`, `@bullsweep/bull-board`): the
// `board` operation mounts bull-board (its Express adapter) over one queue with the integration
// pointed at the soak's daemon API (`--listen --dashboard`, sweeps.js), presses "Clean all" of
// one state through bull-board's HTTP API as a signed-in user, then "Retry all" of the failed
// jobs. The queue's workers are closed meanwhile (as at a checkpoint), so nothing but the Clean
// and the daemon's own schedule changes the queue. Judged:
// - with no daemon running, the integration cannot tell whether bullsweep governs the queue and
//   refuses the Clean: not one job of the queue may go;
// - with the daemon, every audit event of the Clean (its actor names the user) is of the
//   cleaned state (a repair event, dropping ids of it whose hash is gone, names none) and of
//   jobs that were in that state before it.
'use strict';
const express = require('express');
const { createBullBoard } = require('@bull-board/api');
const { BullMQAdapter } = require('@bull-board/api/bullMQAdapter');
const { BullAdapter } = require('@bull-board/api/bullAdapter');
const { ExpressAdapter } = require('@bull-board/express');
const { bullsweepBoard } = require('../../../integrations/bull-board');
const { QUEUES, LIVE, FINISHED } = require('./world');
const { snapshot, queueView } = require('./keyspace');
const { sleep } = require('./traffic');

const TOKEN = 'soak-board-secret';
const TOKEN_NAME = 'soak-board-app';
// The state bull-board cleans, the Redis keys it covers, the plan's name of it.
const STATES = {
  completed: { keys: ['completed'], plan: 'completed' },
  failed: { keys: ['failed'], plan: 'failed' },
  delayed: { keys: ['delayed'], plan: 'delayed' },
  wait: { keys: ['wait', 'paused', 'prioritized'], plan: 'waiting' },
};

// The tokens file the daemon's dashboard reads.
function tokensYaml() {
  return `tokens:\n  - { name: ${TOKEN_NAME}, token: "${TOKEN}", role: operator }\n`;
}

// A bull-board app over queue `q` (the soak's own producer), signed in as `user`.
async function mount(ctx, q, user) {
  const integration = bullsweepBoard({ daemon: { url: ctx.sweeps.daemonUrl, token: TOKEN, timeoutMs: 5000, sweepTimeoutMs: 30000 } });
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath('/queues');
  const producer = ctx.traffic.producers[q.id];
  const adapter = q.lib === 'bull' ? new BullAdapter(producer) : new BullMQAdapter(producer);
  createBullBoard({ queues: [integration.adapt(adapter)], serverAdapter });
  const app = express();
  app.use((req, res, next) => { req.user = { username: user }; next(); });
  app.use('/queues', integration.express(), serverAdapter.getRouter());
  const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  return { url: `http://127.0.0.1:${server.address().port}/queues`, close: () => new Promise((r) => server.close(r)) };
}

async function put(url) {
  const res = await fetch(url, { method: 'PUT' });
  const text = await res.text();
  return { status: res.status, text: text.replace(/\s+/g, ' ').slice(0, 200) };
}

// Closes queue `q`'s workers (their jobs finished); resolves a function that starts them again.
async function pauseWorkers(t, q) {
  const ws = t.workers[q.id] || [];
  const n = ws.length;
  delete t.workers[q.id];
  await Promise.all(ws.map((w) => t.closeWorker(w)));
  return async () => {
    t.workers[q.id] = Array.from({ length: n }, () => t.worker(q));
    await Promise.all(t.workers[q.id].map((w) => w.ready));
  };
}

async function board(ctx, rng) {
  // Mostly a queue with jobs in the state (where someone would press Clean).
  const status = rng.weighted({ completed: 4, failed: 4, delayed: 1, wait: 1 });
  const routable = QUEUES.filter((x) => !x.neverCovered);
  const holding = [];
  for (const x of routable) if (await ctx.client.exists(...STATES[status].keys.map((k) => `${x.base}:${k}`))) holding.push(x);
  const q = holding.length && rng.chance(0.85) ? rng.pick(holding) : rng.pick(routable);
  const user = `board-op${ctx.journal.opIndex}`;
  const daemonRan = !!ctx.sweeps.daemon;
  const restart = await pauseWorkers(ctx.traffic, q);
  const app = await mount(ctx, q, user);
  // The integration logs why the daemon could not be reached (console.error): kept for the op log.
  const appLog = [];
  const consoleError = console.error;
  console.error = (...args) => { appLog.push(String(args[0]).slice(0, 160)); };
  try {
    const keys = [...LIVE[q.lib].lists, ...LIVE[q.lib].sets, ...FINISHED];
    const s0 = await snapshot(ctx.client, `${q.base}:*`);
    const auditFrom = ctx.audit.refresh();
    const clean = await put(`${app.url}/api/queues/${encodeURIComponent(q.name)}/clean/${status}`);
    const s1 = await snapshot(ctx.client, `${q.base}:*`);
    const before = queueView(s0, q.base, keys);
    const removed = [...before.where.keys()].filter((id) => {
      const h = s0.get(`${q.base}:${id}`);
      return h && h.type === 'hash' && h.pttl < 0 && !s1.has(`${q.base}:${id}`);
    });
    const inState = new Set(STATES[status].keys.flatMap((k) => before.states[k] || []));
    if (!daemonRan) {
      ctx.journal.checked();
      if (removed.length) {
        ctx.journal.violation(2, `boardNoDaemon:${q.base}:${ctx.journal.opIndex}`,
          `with no daemon running, bull-board's Clean of ${status} on ${q.base} removed ${removed.length} job(s)`,
          { queue: q.base, status, clean, removed: removed.slice(0, 20), ofTheState: removed.filter((id) => inState.has(id)).length });
      }
    } else {
      await judgeEvents(ctx, q, status, user, auditFrom, inState, clean, removed.length > 0);
    }
    // "Retry all" of the failed jobs (bull-board calls the library's retry: traffic, not judged).
    ctx.traffic.noteRetry(q);
    const retry = await put(`${app.url}/api/queues/${encodeURIComponent(q.name)}/retry/failed`);
    return `${q.base} Clean ${status} as ${user} (${daemonRan ? 'daemon' : 'no daemon'}): ${clean.status} ${clean.text}; `
      + `${removed.length} job(s) gone, ${removed.filter((id) => inState.has(id)).length} of ${inState.size} in ${status}; Retry all: ${retry.status}`
      + `${appLog.length ? `; app log: ${appLog[0]}` : ''}`;
  } finally {
    console.error = consoleError;
    await app.close();
    await restart();
  }
}

// The Clean's audit events (the daemon ships them to the file; waited for up to 5 s when jobs
// of the queue went): each of the cleaned state, naming jobs that were in it.
async function judgeEvents(ctx, q, status, user, auditFrom, inState, clean, acted) {
  const ours = () => ctx.audit.since(auditFrom).filter((e) => typeof e.actor === 'string' && e.actor.endsWith(` for ${user}`));
  for (let i = 0; acted && i < 25 && !ours().length; i++) await sleep(200);
  for (const e of ours()) {
    ctx.journal.checked();
    if (e.queueKey !== q.base) continue;
    // A repair event (ids of the state whose hash is gone, dropped by the sweep) names no state.
    const wrongState = e.action !== 'repair' && String(e.state || '').split(':')[0] !== STATES[status].plan;
    const outside = ['notify', 'anonymize'].includes(e.action) ? [] : (e.jobIds || []).filter((id) => !inState.has(id));
    if (wrongState || outside.length) {
      ctx.journal.violation(2, `boardClean:${q.base}:${ctx.journal.opIndex}`,
        `bull-board's Clean of ${status} on ${q.base} (through the daemon) acted ${wrongState ? `on state ${e.state}` : `on ${outside.length} job(s) not in ${status}`}`,
        { queue: q.base, status, event: { seq: e.seq, action: e.action, state: e.state, actor: e.actor, jobIds: (e.jobIds || []).slice(0, 20) }, outside: outside.slice(0, 20), clean });
    }
  }
}

module.exports = { board, tokensYaml };
