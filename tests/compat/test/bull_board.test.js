// bull-board 9.10 with @bullsweep/bull-board (integrations/bull-board), in headless Chromium,
// over real BullMQ data and a real daemon:
// - bull-board shows each queue's bullsweep policy and links its jobs to bullsweep's page of
//   the queue; bullsweep's dashboard links its queues and archived jobs to bull-board;
// - bull-board's "Clean" on a governed queue becomes one bounded sweep by the daemon: the
//   queue's keys end as `bullsweep run` leaves a twin copy of the same data, consistent for
//   BullMQ, with an audit event whose actor names the signed-in bull-board user, and no Redis
//   call of bullsweep's over 5 ms (SLOWLOG);
// - on a queue no policy governs, bull-board's own Clean still removes the jobs;
// - with `clean: 'block'`, Clean removes nothing and the UI says why.
// The bull-board app signs its users in with HTTP Basic (as an app's auth would); the package
// finds the user on `req.user`.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Queue } = require('bullmq');
const express = require('express');
const { createBullBoard } = require('@bull-board/api');
const { BullMQAdapter } = require('@bull-board/api/bullMQAdapter');
const { ExpressAdapter } = require('@bull-board/express');
const { FastifyAdapter } = require('@bull-board/fastify');
const Fastify = require('fastify');
const { launchChromium } = require('../lib/browser');
const {
  startRedis, writePolicy, waitFor, startDaemon, stopDaemons, freePort, bullsweep, copyDatabase, sleep, BIN,
} = require('../lib/harness');
const { finishJobs } = require('../lib/dataset');
const { rawDump } = require('../lib/snapshot');
const { assertConsistent } = require('../lib/consistency');
const { bullsweepBoard } = require('../../../integrations/bull-board');

const OPS = 'bull-board-ops-secret';
const ADMIN = 'admin-secret';
const USER = 'bea@example.com';

let redis; let client; let daemon; let dir; let args; let browser; let server;
let daemonUrl; let boardUrl; let fastifyUrl; let fastifyApp; let scratchDone;
const queues = {};

// Every key of db `db` under `base`, with its content (rawDump's), by key. A stream's
// entries are compared without their ids: an event's id is the time it was written, and the
// two sweeps ran at different times.
async function keysOf(db, base) {
  const c = redis.client(db);
  const all = await rawDump(c);
  c.disconnect();
  return Object.fromEntries(Object.entries(all).filter(([k]) => k.startsWith(`${base}:`)).map(([k, v]) => [k,
    v.type === 'stream' ? { ...v, value: { length: v.value.meta.length, entries: v.value.entries.map((e) => e[1]) } } : v]));
}

// The bull-board app: HTTP Basic sign-in, then `/queues` (Clean sweeps governed queues) and
// `/locked` (Clean on governed queues is blocked), each its own board.
function boardApp(port) {
  const board = (basePath, mode, list) => {
    const integration = bullsweepBoard({
      daemon: { url: daemonUrl, token: OPS },
      clean: mode,
    });
    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath(basePath);
    createBullBoard({ queues: list.map((q) => integration.adapt(new BullMQAdapter(q))), serverAdapter });
    return { integration, router: serverAdapter.getRouter() };
  };
  const sweeping = board('/queues', 'sweep', [queues.billing, queues.scratch]);
  const locked = board('/locked', 'block', [queues.ledger]);
  const app = express();
  app.use((req, res, next) => {
    const [scheme, value] = (req.headers.authorization || '').split(' ');
    if (scheme !== 'Basic') {
      res.set('www-authenticate', 'Basic realm="ops"').status(401).end();
      return;
    }
    req.user = { username: Buffer.from(value, 'base64').toString().split(':')[0] };
    next();
  });
  app.use('/queues', sweeping.integration.express(), sweeping.router);
  app.use('/locked', locked.integration.express(), locked.router);
  return new Promise((resolve) => {
    const s = app.listen(port, '127.0.0.1', () => resolve({ server: s, boards: [sweeping, locked] }));
  });
}

// The same with bull-board's Fastify adapter: `/queues` over `payroll`, Clean sweeping.
async function fastifyBoard() {
  const integration = bullsweepBoard({ daemon: { url: daemonUrl, token: OPS } });
  const serverAdapter = new FastifyAdapter();
  createBullBoard({ queues: [integration.adapt(new BullMQAdapter(queues.payroll))], serverAdapter });
  serverAdapter.setBasePath('/queues');
  const app = Fastify();
  app.addHook('onRequest', async (request, reply) => {
    const [scheme, value] = (request.headers.authorization || '').split(' ');
    if (scheme !== 'Basic') return reply.header('www-authenticate', 'Basic realm="ops"').code(401).send();
    request.user = Buffer.from(value, 'base64').toString().split(':')[0];
  });
  app.addHook('preHandler', integration.fastify());
  await app.register(serverAdapter.registerPlugin(), { prefix: '/queues' });
  await app.listen({ port: 0, host: '127.0.0.1' });
  await integration.refresh();
  return { app, url: `http://127.0.0.1:${app.server.address().port}` };
}

before(async () => {
  redis = await startRedis();
  const connection = redis.connection(0);
  client = redis.client(0);
  for (const name of ['scratch', 'billing', 'ledger', 'exports', 'payroll']) {
    queues[name] = new Queue(name, { connection });
    await finishJobs(queues[name], connection, name === 'exports' ? 6 : 40, { fail: (i) => i % 5 === 0 });
    if (name === 'scratch') scratchDone = Date.now();
  }
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-bull-board-'));
  const boardPort = await freePort();
  boardUrl = `http://127.0.0.1:${boardPort}`;
  // maxCount rules only, so that the daemon's sweep and `run` on the twin select the same jobs
  // whenever they run.
  const policy = writePolicy([
    'version: 1',
    'schedule: 24h',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    `archive: { url: "file://${dir}/archive" }`,
    `bullBoard: { url: "${boardUrl}/queues/" }`,
    'policies:',
    '  - { name: billing, queueNamePattern: billing, rules: { completed: { maxCount: 10 }, failed: { maxCount: 3 } } }',
    '  - { name: ledger, queueNamePattern: ledger, rules: { completed: { maxCount: 5 } } }',
    '  - { name: payroll, queueNamePattern: payroll, rules: { completed: { maxCount: 7 } } }',
    '  - { name: cold, queueNamePattern: exports, rules: { completed: { maxCount: 0, action: archive } } }',
    '',
  ].join('\n'));
  args = ['--redis', redis.url(0), '--config', policy];
  // An archived job for the dashboard's archive page.
  const r = await bullsweep([...args, 'run', '--queue', 'exports']);
  assert.equal(r.code, 0, r.stderr);
  // Every queue was swept just now: the daemon's 24 h schedule leaves them alone.
  for (const name of Object.keys(queues)) await client.hset('bullsweep:lastrun', `bull:${name}`, Date.now());
  // The twin: the same data in db 1, for `bullsweep run`.
  await copyDatabase(client, 0, 1);
  const tokens = path.join(dir, 'tokens.yaml');
  fs.writeFileSync(tokens, [
    'tokens:',
    `  - { name: bull-board-app, token: "${OPS}", role: operator }`,
    `  - { name: alice-admin, token: "${ADMIN}", role: admin }`,
    '',
  ].join('\n'));
  const port = await freePort();
  daemonUrl = `http://127.0.0.1:${port}`;
  daemon = startDaemon([...args, '--listen', `127.0.0.1:${port}`, '--dashboard', '--dashboard-tokens', tokens]);
  await waitFor('the dashboard answers', async () => (await fetch(`${daemonUrl}/login`).catch(() => ({}))).status === 200);
  let boards;
  ({ server, boards } = await boardApp(boardPort));
  await Promise.all(boards.map((b) => b.integration.refresh()));
  ({ app: fastifyApp, url: fastifyUrl } = await fastifyBoard());
  browser = await launchChromium();
});

after(async () => {
  if (browser) await browser.close();
  if (server) server.close();
  if (fastifyApp) await fastifyApp.close();
  stopDaemons();
  for (const q of Object.values(queues)) await q.close();
  if (redis) redis.stop();
});

// A page of bull-board (the Express app's, or `at` another's), signed in as USER.
async function boardPage(p, at = boardUrl) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, httpCredentials: { username: USER, password: 'x' } });
  const page = await context.newPage();
  await page.goto(`${at}${p}`);
  return page;
}

// Clicks "Clean all" on the status tab shown and confirms.
async function cleanAll(page) {
  await page.getByRole('button', { name: 'Clean all' }).click();
  await page.getByRole('button', { name: 'Confirm' }).click();
}

const counts = (name) => queues[name].getJobCounts('completed', 'failed');

test('bull-board shows the policy and links to bullsweep; the dashboard links to bull-board', async () => {
  const page = await boardPage('/queues/queue/billing?status=completed');
  const description = page.locator('header p, [class*=description]').filter({ hasText: 'bullsweep' }).first();
  await description.waitFor();
  const text = await description.innerText();
  assert.match(text, /bullsweep policy billing \(every 1d\): completed: remove beyond 10; failed: remove beyond 3/);
  const back = `${daemonUrl}/queue?key=bull%3Abilling`;
  assert.ok(text.includes(back), `the description names bullsweep's page: ${text}`);
  const jobLink = page.getByRole('link', { name: 'bullsweep' }).first();
  assert.equal(await jobLink.getAttribute('href'), back, "a job links to bullsweep's page of its queue");
  await page.goto(`${boardUrl}/queues/queue/scratch`);
  await page.getByText('bullsweep: no policy governs this queue').first().waitFor();
  await page.context().close();

  // The dashboard's links to bull-board: the overview's row, the queue page, an archived job.
  const dash = await browser.newContext({ viewport: { width: 1400, height: 900 }, extraHTTPHeaders: { authorization: `Bearer ${ADMIN}` } });
  const d = await dash.newPage();
  await d.goto(`${daemonUrl}/`);
  const row = d.locator('tr[data-queue="bull:billing"] a.bull-board');
  assert.equal(await row.getAttribute('href'), `${boardUrl}/queues/queue/billing`);
  assert.equal(await row.getAttribute('rel'), 'noopener noreferrer');
  await d.goto(`${daemonUrl}/queue?key=bull%3Abilling`);
  const link = d.locator('#bull-board a.bull-board');
  assert.equal(await link.getAttribute('href'), `${boardUrl}/queues/queue/billing`);
  await d.goto(`${daemonUrl}/archive?grep=queue%3Dbull:exports`);
  const job = d.locator('tr[data-job] a.bull-board').first();
  const id = await d.locator('tr[data-job]').first().getAttribute('data-job');
  assert.equal(await job.getAttribute('href'), `${boardUrl}/queues/queue/exports/${id}`);
  await dash.close();
  // The link opens bull-board's page of the queue.
  const opened = await boardPage('/queues/queue/billing');
  await opened.getByRole('heading', { name: 'billing' }).waitFor();
  await opened.context().close();
});

test('without a daemon, the policy is read with explain --json, and Clean can only be blocked', async () => {
  const explain = { bin: BIN, config: args[3], args: ['--redis', redis.url(0)] };
  assert.throws(() => bullsweepBoard({ explain }), /clean: 'sweep' needs a daemon/);
  const integration = bullsweepBoard({ explain, clean: 'block', dashboardUrl: 'https://bullsweep.example.com/' });
  const [billing, scratch] = [integration.adapt(new BullMQAdapter(queues.billing)), integration.adapt(new BullMQAdapter(queues.scratch))];
  await integration.refresh();
  assert.match(billing.getDescription(), /^bullsweep policy billing \(every 1d\): completed: remove beyond 10; failed: remove beyond 3 · https:\/\/bullsweep\.example\.com\/queue\?key=bull%3Abilling$/);
  assert.match(scratch.getDescription(), /^bullsweep: no policy governs this queue/);
  await assert.rejects(billing.clean('completed', 5000), { statusCode: 409, message: /Clean is blocked/ });
});

test("Clean on a governed queue is the daemon's bounded sweep, audited for the bull-board user", async () => {
  assert.deepEqual(await counts('billing'), { completed: 32, failed: 8 });
  await client.config('SET', 'slowlog-log-slower-than', '5000');
  await client.slowlog('RESET');
  const page = await boardPage('/queues/queue/billing?status=completed');
  await cleanAll(page);
  await waitFor('the sweep', async () => (await counts('billing')).completed === 10);
  await page.context().close();
  assert.deepEqual(await counts('billing'), { completed: 10, failed: 3 }, 'the whole policy ran, failed jobs too');

  const slow = (await client.slowlog('GET', 1000)).filter((e) => String(e[5] || '').startsWith('bullsweep'));
  assert.deepEqual(slow.map((e) => `${e[3].join(' ').slice(0, 80)}: ${e[2]} µs`), [], 'no call of bullsweep over 5 ms');

  const twin = await bullsweep(['--redis', redis.url(1), '--config', args[3], 'run', '--queue', 'billing']);
  assert.equal(twin.code, 0, twin.stderr);
  const [mine, theirs] = [await keysOf(0, 'bull:billing'), await keysOf(1, 'bull:billing')];
  assert.deepEqual(Object.keys(mine), Object.keys(theirs), 'the same keys as `bullsweep run` leaves');
  for (const key of Object.keys(mine)) assert.deepEqual(mine[key], theirs[key], key);
  await assertConsistent(redis, 0, [{ prefix: 'bull', name: 'billing' }]);

  const audit = await bullsweep([...args, '--json', 'audit', 'query', '--queue', 'billing']);
  assert.equal(audit.code, 0, audit.stderr);
  const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const removed = events.filter((e) => e.actor === `bull-board-app for ${USER}` && e.action === 'remove');
  assert.equal(removed.reduce((n, e) => n + e.jobCount, 0), 27, `audited for the bull-board user: ${JSON.stringify(events.map((e) => e.actor))}`);
});

test("Clean on a queue no policy governs is bull-board's own", async () => {
  // bull-board cleans jobs finished more than 5 s ago.
  await sleep(Math.max(0, scratchDone + 5500 - Date.now()));
  assert.equal((await counts('scratch')).completed, 32);
  const page = await boardPage('/queues/queue/scratch?status=completed');
  await cleanAll(page);
  await waitFor("bull-board's clean", async () => (await counts('scratch')).completed === 0);
  await page.context().close();
});

test("with clean: 'block', Clean on a governed queue removes nothing and says why", async () => {
  const before = await keysOf(0, 'bull:ledger');
  const page = await boardPage('/locked/queue/ledger?status=completed');
  await cleanAll(page);
  const toast = page.getByText("bullsweep's policy ledger governs this queue: Clean is blocked");
  await toast.waitFor();
  await page.context().close();
  assert.deepEqual(await keysOf(0, 'bull:ledger'), before, 'nothing changed');
});

test("with bull-board's Fastify adapter, Clean on a governed queue is swept for the user too", async () => {
  const page = await boardPage('/queues/queue/payroll?status=completed', fastifyUrl);
  await page.getByText('bullsweep policy payroll').first().waitFor();
  await cleanAll(page);
  await waitFor('the sweep', async () => (await counts('payroll')).completed === 7);
  await page.context().close();
  await assertConsistent(redis, 0, [{ prefix: 'bull', name: 'payroll' }]);
  const audit = await bullsweep([...args, '--json', 'audit', 'query', '--queue', 'payroll']);
  assert.equal(audit.code, 0, audit.stderr);
  const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(events.length > 0 && events.every((e) => e.actor === `bull-board-app for ${USER}`), JSON.stringify(events.map((e) => e.actor)));
  assert.equal(events.reduce((n, e) => n + e.jobCount, 0), 25);
});

test('a user name beyond Latin-1 is audited intact, and a failed explain shows no command line', async () => {
  await finishJobs(queues.billing, redis.connection(0), 5);
  const integration = bullsweepBoard({ daemon: { url: daemonUrl, token: OPS } });
  const billing = integration.adapt(new BullMQAdapter(queues.billing));
  const user = 'Łukasz Żółć';
  // The middleware carries the signed-in user to Clean, as in an Express app.
  await new Promise((resolve, reject) => {
    integration.express()({ user }, {}, (e) => (e ? reject(e) : billing.clean('completed', 5000).then(resolve, reject)));
  });
  const audit = await bullsweep([...args, '--json', 'audit', 'query', '--queue', 'billing']);
  const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(events.filter((e) => e.actor === `bull-board-app for ${user}`).reduce((n, e) => n + e.jobCount, 0), 5,
    JSON.stringify(events.map((e) => e.actor)));
  // The command line of `explain` may hold a Redis URL: bull-board's users never see it.
  const leaky = bullsweepBoard({
    explain: { bin: BIN, config: path.join(dir, 'missing.yaml'), args: ['--redis', 'redis://:SuperSecretPw@127.0.0.1:1/0'] },
    clean: 'block',
  });
  const adapter = leaky.adapt(new BullMQAdapter(queues.billing));
  await leaky.refresh();
  const rejected = await adapter.clean('completed', 5000).then(() => null, (e) => e);
  assert.ok(rejected, 'Clean is refused when bullsweep cannot be asked');
  for (const text of [rejected.message, adapter.getDescription()]) {
    assert.doesNotMatch(text, /SuperSecretPw|--redis|missing\.yaml/, text);
  }
  assert.throws(() => bullsweepBoard({ daemon: { url: 'http://u:p@127.0.0.1:1', token: OPS } }), /may not hold a user or password/);
});
