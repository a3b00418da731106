// The operations of bullsweep the soak draws from: a new random policy, `run` (alone, for one
// queue, or in a burst), the reads (`plan`, `report`, `alerts`, `explain`, `doctor`),
// `doctor --repair all`, `forget`, `archive restore`, the daemon (start, reload, stop) and a
// Redis restart. Each takes the soak's context and a PRNG and resolves a line for the op log.
'use strict';
const { QUEUES, USERS } = require('./world');
const { SoakBug } = require('./journal');

function summary(out) {
  const queues = out.json && out.json.queues;
  if (!Array.isArray(queues)) return `exit ${out.code}${out.stderr ? `: ${out.stderr.trim().split('\n').pop().slice(0, 200)}` : ''}`;
  const acted = [];
  for (const q of queues) {
    for (const [state, s] of Object.entries(q.states || {})) {
      if (s.done || s.matched) acted.push(`${q.key}/${state}:${s.action}=${s.done ?? s.matched}`);
    }
  }
  return `exit ${out.code}; ${acted.join(' ') || 'nothing'}`;
}

// A run that failed on something other than a queue's own error (a Redis restart, the lock) is
// noted, not judged; a usage error (exit 2) means the soak is broken.
function judgeExit(ctx, out, what) {
  if (out.code === 2) throw new SoakBug(`${what} refused its arguments or policy: ${out.stderr}`);
  if (out.code !== 0) ctx.journal.note(`${what} exited ${out.code}: ${out.stderr.trim().split('\n').slice(-2).join(' | ').slice(0, 300)}`);
}

// A run, most of the time of one queue (cron jobs per team): a queue is then swept every few
// runs, and what Redis expires meanwhile stays until its own next run. Its source-linked
// removals are judged (sources.js, `around`).
async function run(ctx, rng) {
  const args = ['run'];
  if (rng.chance(0.6)) args.push('--queue', rng.pick(QUEUES).name);
  const out = await ctx.sources.around(ctx, () => ctx.sweeps.invoke('run', args));
  judgeExit(ctx, out, 'run');
  return `${args.join(' ')}: ${summary(out)}`;
}

// Several runs back to back (as cron every few seconds, or a daemon with a short schedule).
async function runBurst(ctx, rng, { queue = null, n = rng.int(3, 12) } = {}) {
  const args = ['run', ...(queue ? ['--queue', queue] : [])];
  let acted = 0;
  for (let i = 0; i < n; i++) {
    const out = await ctx.sweeps.invoke('run', args, { tag: `op${ctx.journal.opIndex}-run${i}` });
    judgeExit(ctx, out, 'run');
    for (const q of (out.json && out.json.queues) || []) for (const s of Object.values(q.states || {})) acted += s.done || 0;
  }
  return `${n}x ${args.join(' ')}: acted on ${acted}`;
}

const read = (command, argsOf) => async (ctx, rng) => {
  const args = argsOf(rng);
  const before = ctx.sweeps.daemon ? null : await ctx.ownKeys();
  const out = await ctx.sweeps.invoke(command, args);
  if (out.code === 2) throw new SoakBug(`${command} refused its arguments: ${out.stderr}`);
  if (before) await ctx.judgeOwnKeys(before, `bullsweep ${args.join(' ')}`);
  return `${args.join(' ')}: exit ${out.code}`;
};

const plan = read('plan', () => ['plan']);
const report = read('report', () => ['report']);
const alerts = read('alerts', () => ['alerts']);
const doctor = read('doctor', () => ['doctor']);
const explain = read('explain', (rng) => {
  const q = rng.pick(QUEUES);
  return ['explain', q.base, ...(q.lib === 'bull' ? ['--backend', 'bull'] : [])];
});

async function doctorRepair(ctx) {
  const out = await ctx.sweeps.invoke('doctor', ['doctor', '--repair', 'all']);
  if (out.code === 2) throw new SoakBug(`doctor --repair refused: ${out.stderr}`);
  const found = ((out.json && out.json.queues) || []).flatMap((q) => (q.findings || []).map((f) => `${q.key || q.queue}/${f.kind}=${f.found}`));
  return `exit ${out.code}; ${found.join(' ') || 'clean'}`;
}

async function forget(ctx, rng) {
  const user = rng.pick(USERS);
  const out = await ctx.sweeps.invoke('forget', ['forget', '--subject', `user=${user}`, '--request-id', `soak-${ctx.journal.opIndex}`,
    '--wait-active', '2s', '--lock-wait', '5s'], { subjects: true });
  if (out.code === 2) throw new SoakBug(`forget refused: ${out.stderr}`);
  const receipt = out.json || {};
  return `${user}: exit ${out.code}, status ${receipt.status}`;
}

// Puts back an archived job: as a new job, or under its id (refused while the id exists).
async function restore(ctx, rng) {
  const ls = await ctx.sweeps.invoke('archive', ['archive', 'ls']);
  const segments = ls.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  if (!segments.length) return 'nothing archived yet';
  const seg = rng.pick(segments);
  const cat = await ctx.sweeps.invoke('archive', ['archive', 'cat', seg.segment]);
  const records = cat.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((r) => r.encoding !== 'base64');
  if (!records.length) return `${seg.segment}: no record`;
  const r = rng.pick(records);
  const as = rng.chance(0.5) ? 'new' : 'original';
  const out = await ctx.sweeps.invoke('archive', ['archive', 'restore', r.queue, r.id, '--as', as, '--actor', 'soak',
    '--hold', rng.pick(['0', '5s', '24h'])]);
  return `${r.queue} ${r.id} as ${as}: exit ${out.code}${out.code ? ` (${out.stderr.trim().split('\n')[0].slice(0, 160)})` : ''}`;
}

async function daemon(ctx, rng) {
  const s = ctx.sweeps;
  if (!s.daemon) return `started (${s.startDaemon()})`;
  if (rng.chance(0.5)) return `reloaded (${s.reloadDaemon()})`;
  const exit = await s.stopDaemon();
  return `stopped (${exit ? `exit ${exit.code}` : 'killed'})`;
}

async function redisRestart(ctx, rng) {
  const down = rng.int(100, 1200);
  ctx.traffic.lastRestartAt = Date.now() + down + 1000;
  await ctx.redis.restart(down);
  ctx.traffic.lastRestartAt = Date.now();
  return `down ${down}ms`;
}

async function newPolicy(ctx, rng) {
  return ctx.sweeps.newPolicies(rng);
}

const SWEEP_OPS = { newPolicy, run, runBurst, plan, report, alerts, explain, doctor, doctorRepair, forget, restore, daemon, redisRestart };

module.exports = { SWEEP_OPS, runBurst };
