// The soak's runner: `node soak/run.js --seed N --minutes M [--keep-going] [--stop-after OP]`
// (or SEED, MINUTES, SOAK_KEEP_GOING=1, SOAK_STOP_AFTER). It starts a private redis-server with
// an append-only file (so a restart is one of its operations), a webhook receiver, producers
// and workers of BullMQ 6.7, BullMQ 5.81 and Bull 4, then draws operations from the seed until
// the time is up (records of a private PostgreSQL, which source-linked policies look up,
// coming and going beside them; the daemon serving the API bull-board's integration calls),
// checking the invariants after every operation and at quiescent checkpoints (every 40
// operations, and at the end). It prints the seed and, on a violation, its
// reproduction, and exits 1 (at the first one unless --keep-going). bullsweep is the
// harness's (BULLSWEEP_BIN, BULLSWEEP_TESTKIT_BIN), run as the README's role users.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startRedis, stopDaemons, freePort, BIN } = require('../lib/harness');
const { Prng } = require('./prng');
const { Journal, SoakBug } = require('./journal');
const { Webhook } = require('./webhook');
const { Losses } = require('./losses');
const { Traffic } = require('./traffic');
const { Sweeps, READ_WRITES } = require('./sweeps');
const { LiveChecks, AuditTrail } = require('./live');
const { snapshot, diff } = require('./keyspace');
const { WEIGHTS, operation } = require('./ops');
const { Sources } = require('./sources');
const { tokensYaml } = require('./board');

const CHECKPOINT_EVERY = 40;

function options() {
  const argv = process.argv.slice(2);
  const flag = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
  const seed = Number(flag('--seed') ?? process.env.SEED ?? Math.floor(Date.now() % 4294967296));
  return {
    seed: seed >>> 0,
    minutes: Number(flag('--minutes') ?? process.env.MINUTES ?? 10),
    keepGoing: argv.includes('--keep-going') || process.env.SOAK_KEEP_GOING === '1',
    stopAfter: Number(flag('--stop-after') ?? process.env.SOAK_STOP_AFTER ?? Infinity),
    logDir: flag('--log-dir') ?? process.env.SOAK_LOG_DIR ?? null,
  };
}

function directories(logDir) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-soak-'));
  const dirs = { root, audit: path.join(root, 'audit.jsonl'), archive: path.join(root, 'archive'),
    policies: path.join(root, 'policies'), cwd: path.join(root, 'cwd'), log: logDir || root };
  for (const d of [dirs.archive, dirs.policies, dirs.cwd, dirs.log]) fs.mkdirSync(d, { recursive: true });
  return dirs;
}

// The invariant-3 check of one read while traffic runs: bullsweep's own keys (which no library
// writes) are the same after it, when no daemon runs beside it.
function ownKeyChecks(ctx) {
  ctx.ownKeys = () => snapshot(ctx.client, 'bullsweep:*');
  ctx.judgeOwnKeys = async (before, command) => {
    const after = await snapshot(ctx.client, 'bullsweep:*');
    const d = diff(before, after, { streams: true });
    for (const list of Object.values(d)) list.splice(0, list.length, ...list.filter((k) => !READ_WRITES.has(k)));
    ctx.journal.checked();
    if (d.added.length + d.removed.length + d.changed.length) {
      ctx.journal.violation(3, `own:${command}`, `\`${command}\` changed bullsweep's own keys`,
        { added: d.added, removed: d.removed, changed: d.changed.map((k) => ({ key: k, before: before.get(k), after: after.get(k) })) });
    }
  };
}

// The servers, the traffic, bullsweep and the checks of one run.
async function setup(opts) {
  const dirs = directories(opts.logDir);
  process.stdout.write(`soak: seed ${opts.seed}, ${opts.minutes} min, bullsweep ${BIN}, files in ${dirs.root}\n`);
  const journal = new Journal({ seed: opts.seed, minutes: opts.minutes, dir: dirs.log, keepGoing: opts.keepGoing });
  const redis = await startRedis({ persist: true });
  const webhook = new Webhook();
  await webhook.start();
  const sources = new Sources({ journal });
  await sources.start();
  const ctx = { journal, redis, webhook, sources, client: redis.client(), audit: new AuditTrail(dirs.audit), dirs, counts: {} };
  ctx.losses = new Losses({ journal, audit: ctx.audit });
  ctx.traffic = new Traffic({ redis, journal, audit: ctx.audit, losses: ctx.losses });
  ctx.sweeps = new Sweeps({ redis, dirs, webhook, journal, sources });
  const tokens = path.join(dirs.root, 'tokens.yaml');
  fs.writeFileSync(tokens, tokensYaml());
  ctx.sweeps.listenOn(await freePort(), tokens);
  Object.assign(ctx.losses, { traffic: ctx.traffic, sweeps: ctx.sweeps });
  ctx.live = new LiveChecks({ client: ctx.client, journal, audit: ctx.audit, webhook, reads: ctx.sweeps.reads, losses: ctx.losses });
  ownKeyChecks(ctx);
  return ctx;
}

// Draws and runs operations until the time is up (then a last checkpoint), a violation (unless
// going on), an interruption, or `stopAfter`; the live checks after each.
async function soak(ctx, rng, opts, interrupted) {
  const { journal } = ctx;
  const deadline = Date.now() + opts.minutes * 60000;
  journal.op('setup', 'producers, workers, the repeatable job and the job scheduler');
  await ctx.traffic.start(rng.fork());
  journal.op('newPolicy', await ctx.sweeps.newPolicies(rng.fork()));
  let sinceCheckpoint = 0;
  let unreachable = 0;
  while (!journal.stop && !interrupted() && journal.opIndex < opts.stopAfter) {
    const last = Date.now() >= deadline;
    const name = last || sinceCheckpoint >= CHECKPOINT_EVERY ? 'checkpoint' : rng.weighted(WEIGHTS);
    const opRng = rng.fork();
    journal.op(name);
    ctx.counts[name] = (ctx.counts[name] || 0) + 1;
    sinceCheckpoint = name === 'checkpoint' ? 0 : sinceCheckpoint + 1;
    try {
      journal.result(await operation(name)(ctx, opRng));
    } catch (err) {
      if (err instanceof SoakBug) throw err;
      ctx.traffic.stats.opErrors += 1;
      journal.result(`error: ${err.message.split('\n')[0].slice(0, 300)}`);
    }
    await ctx.live.check().then(() => { unreachable = 0; }, async (err) => {
      journal.note(`live check failed: ${err.message}`);
      unreachable += 1;
      if (unreachable >= 3 && !(await ctx.client.ping().catch(() => null))) {
        throw new SoakBug('redis-server stopped answering and did not come back (stopped from outside the soak?)');
      }
    });
    if (last) break;
  }
}

// Prints the figures, and the first violation's reproduction or the soak's own failure; exits.
function finish(ctx, opts, started, failure) {
  const { journal } = ctx;
  const figures = { seed: opts.seed, minutes: Number(((Date.now() - started) / 60000).toFixed(2)), operations: journal.opIndex + 1,
    checks: journal.checks, violations: journal.violations.length, notes: journal.notes.length,
    documentedTtlLosses: ctx.losses.documented, byOperation: ctx.counts,
    bullsweep: ctx.sweeps.counts, traffic: ctx.traffic.stats, sources: ctx.sources.stats, webhookPosts: ctx.webhook.posts.length, log: journal.file };
  process.stdout.write(`SOAK-SUMMARY ${JSON.stringify(figures)}\n`);
  if (failure) {
    process.stderr.write(`soak: the soak itself failed at op #${journal.opIndex} (seed ${opts.seed}): ${failure.stack}\n`);
    process.exit(2);
  }
  if (journal.violations.length) {
    process.stderr.write(`\nsoak: seed ${opts.seed}: ${journal.violations.length} violation(s); the first:\n${journal.format(journal.violations[0])}\n`);
    process.exit(1);
  }
  process.stdout.write(`soak: seed ${opts.seed}: no violation in ${figures.operations} operations, ${figures.checks} checks\n`);
  fs.rmSync(ctx.dirs.root, { recursive: true, force: true });
  process.exit(0);
}

async function main() {
  const opts = options();
  const ctx = await setup(opts);
  const started = Date.now();
  // Ctrl-C (or SIGTERM) ends the run after the operation in progress, with the servers stopped.
  let interrupted = false;
  const interrupt = () => {
    if (interrupted) { ctx.redis.stop(); process.exit(130); }
    interrupted = true;
    process.stderr.write('soak: stopping after this operation (again to stop at once)\n');
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  let failure = null;
  try {
    await soak(ctx, new Prng(opts.seed), opts, () => interrupted);
  } catch (err) {
    failure = err;
  } finally {
    await ctx.sweeps.stopDaemon().catch(() => {});
    stopDaemons();
    await ctx.traffic.close().catch(() => {});
    await ctx.webhook.close();
    await ctx.sources.stop().catch(() => {});
    ctx.redis.stop();
  }
  finish(ctx, opts, started, failure);
}

main();
