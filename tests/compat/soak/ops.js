// The soak's operations and their weights: routine traffic of the libraries, bullsweep's
// commands, a retry storm raced by a burst of runs, records of the sources coming and going
// (sources.js), bull-board's Clean and "Retry all" through the integration (board.js), and the
// quiescent checkpoint.
'use strict';
const { LIBRARY_OPS } = require('./library_ops');
const { SWEEP_OPS, runBurst } = require('./sweep_ops');
const { checkpoint } = require('./checkpoint');
const { sleep } = require('./traffic');
const { board } = require('./board');

// Relative weights. Library operations keep the queues busy with every kind of job; the
// bullsweep side runs, reads and repairs beside them; records of the sources come and go.
const WEIGHTS = {
  add: 12, addBulk: 3, orders: 6, addReused: 10, resubmit: 3, addDeduplicated: 3, flow: 7, retryJobs: 6, retryOne: 3, promote: 2,
  pauseResume: 2, removeJob: 2, clean: 2, schedule: 0.5, crashWorker: 0.7, idle: 7, storm: 3, lull: 3,
  newPolicy: 3, run: 10, runBurst: 1.5, plan: 3, report: 2, alerts: 2, explain: 2, doctor: 1.5, doctorRepair: 1,
  forget: 1.5, restore: 1.5, daemon: 2, redisRestart: 0.6, records: 6, remind: 6, board: 1.5, checkpoint: 2.5,
};

// A retry storm on both Bull queues while runs of them follow each other until the retries
// are over (Bull fetches a job in two calls; a sweep between them must leave the job alone).
async function storm(ctx, rng) {
  let over = false;
  const traffic = Promise.all(['reports', 'digest'].map((q) => LIBRARY_OPS.retryStorm(ctx.traffic, rng.fork(), q)))
    .then(async (lines) => {
      await sleep(2500);
      over = true;
      return lines.join('; ');
    });
  const r = rng.fork();
  let runs = 0;
  while (!over) {
    await runBurst(ctx, r, { queue: '[rd]*', n: 1 });
    runs += 1;
  }
  return `${await traffic}; ${runs} runs of both meanwhile`;
}

// A lull in sweeps: 8-25 library operations in a row with no bullsweep command between them
// (cron runs bullsweep hourly while producers never stop; ids expired by a ttl dangle meanwhile).
async function lull(ctx, rng) {
  const names = Object.keys(LIBRARY_OPS).filter((n) => n !== 'retryStorm');
  const weights = Object.fromEntries(names.map((n) => [n, WEIGHTS[n] || 0]));
  const done = [];
  for (let n = rng.int(8, 25); n > 0; n--) {
    const name = rng.weighted(weights);
    try {
      done.push(`${name}: ${await LIBRARY_OPS[name](ctx.traffic, rng.fork())}`);
    } catch (err) {
      done.push(`${name}: error ${err.message.slice(0, 120)}`);
    }
  }
  return `${done.length} operations:\n      ${done.join('\n      ')}`;
}

function operation(name) {
  if (name === 'checkpoint') return checkpoint;
  if (name === 'storm') return storm;
  if (name === 'lull') return lull;
  if (name === 'records') return (ctx, rng) => ctx.sources.op(rng);
  if (name === 'remind') return (ctx, rng) => ctx.sources.remind(ctx.traffic, rng);
  if (name === 'board') return board;
  if (SWEEP_OPS[name]) return SWEEP_OPS[name];
  return (ctx, rng) => LIBRARY_OPS[name](ctx.traffic, rng);
}

module.exports = { WEIGHTS, operation };
