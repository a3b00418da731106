// bull-board 9.10 with @bullsweep/bull-board (integrations/bull-board), in headless Chromium,
// over real BullMQ data and a real daemon:
// - bull-board shows each queue's bullsweep policy and links its jobs to bullsweep's page of
//   the queue; bullsweep's dashboard links its queues and archived jobs to bull-board;
// - bull-board's "Clean" of a state on a governed queue becomes one bounded sweep of that
//   state alone by the daemon: the queue's keys end as `bullsweep run` leaves a twin copy of
//   the same data under the policy's rule for that state alone, consistent for BullMQ, with
//   an audit event whose actor names the signed-in bull-board user (that each of the sweep's
//   calls stops at its budget is counted in jobs by budget.rs and measured by the bench,
//   never timed here); every key of the queue's other states is as it was, the
//   queue's description says what the Clean did, and a state the policy has no rule for is
//   refused with nothing done (issue 42, break 11);
// - on a queue no policy governs, bull-board's own Clean still removes the jobs;
// - with `clean: 'block'`, Clean removes nothing and the UI says why.
// The bull-board app signs its users in with HTTP Basic (as an app's auth would); the package
// finds the user on `req.user`.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
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
let daemonUrl; let boardUrl; let fastifyUrl; let fastifyApp; let scratchDone; let twinPolicy;
let hook; let hookUrl;
const queues = {};
// The notices the webhook received.
const notices = [];

// The policy file, with billing's rules `billing`. maxCount and maxAge: 1ms rules only, so
// that the daemon's sweep and `run` on the twin select the same jobs whenever they run.
function policyText(billing) {
  return [
    'version: 1',
    'schedule: 24h',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    `archive: { url: "file://${dir}/archive" }`,
    `bullBoard: { url: "${boardUrl}/queues/" }`,
    `notify: { webhook: { url: "${hookUrl}" } }`,
    'policies:',
    `  - { name: billing, queueNamePattern: billing, rules: ${billing} }`,
    '  - { name: ledger, queueNamePattern: ledger, rules: { completed: { maxCount: 5 } } }',
    '  - { name: payroll, queueNamePattern: payroll, rules: { completed: { maxCount: 7 } } }',
    '  - { name: cold, queueNamePattern: exports, rules: { completed: { maxCount: 0, action: archive } } }',
    '  - { name: orders, queueNamePattern: orders, rules: { completed: { maxCount: 10 }, failed: { maxCount: 2 } } }',
    '  - name: mixed',
    '    queueNamePattern: mixed',
    '    pii: { paths: [user.email] }',
    '    rules: { completed: { maxCount: 10 }, failed: { maxAge: 1ms, action: anonymize } }',
    '  - { name: alerts, queueNamePattern: alerts, rules: { failed: { maxAge: 1ms, action: notify } } }',
    '',
  ].join('\n');
}

// Every key of db `db` under `base`, with its content (rawDump's), by key. A stream's
// entries are compared without their ids: an event's id is the time it was written, and the
// two sweeps ran at different times. The workers' `stalled-check` is left out: it expires by
// itself, 30 s after a worker last looked.
async function keysOf(db, base) {
  const c = redis.client(db);
  const all = await rawDump(c);
  c.disconnect();
  const ours = ([k]) => k.startsWith(`${base}:`) && k !== `${base}:stalled-check`;
  return Object.fromEntries(Object.entries(all).filter(ours).map(([k, v]) => [k,
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
  const sweeping = board('/queues', 'sweep', [queues.billing, queues.scratch, queues.orders, queues.mixed, queues.alerts]);
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
  hook = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => { notices.push(JSON.parse(body)); res.end(); });
  });
  await new Promise((resolve) => hook.listen(0, '127.0.0.1', resolve));
  hookUrl = `http://127.0.0.1:${hook.address().port}/hook`;
  for (const name of ['scratch', 'billing', 'ledger', 'exports', 'payroll', 'orders', 'mixed', 'alerts']) {
    queues[name] = new Queue(name, { connection });
    await finishJobs(queues[name], connection, name === 'exports' ? 6 : 40, {
      fail: (i) => i % 5 === 0, data: (i) => ({ i, user: { email: `u${i}@example.com` } }),
    });
    if (name === 'scratch') scratchDone = Date.now();
  }
  // Jobs waiting for their time in `mixed`, whose policy has no rule for them.
  for (let i = 0; i < 3; i += 1) await queues.mixed.add('later', { i }, { delay: 3600000 });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-bull-board-'));
  const boardPort = await freePort();
  boardUrl = `http://127.0.0.1:${boardPort}`;
  const policy = writePolicy(policyText('{ completed: { maxCount: 10 }, failed: { maxCount: 3 } }'));
  // The twin's: billing's rule for completed jobs alone, what a Clean of completed applies.
  twinPolicy = writePolicy(policyText('{ completed: { maxCount: 10 } }'));
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
  if (hook) hook.close();
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

test("Clean of completed on a governed queue is the daemon's bounded sweep of completed jobs, audited for the bull-board user", async () => {
  assert.deepEqual(await counts('billing'), { completed: 32, failed: 8 });
  const page = await boardPage('/queues/queue/billing?status=completed');
  await cleanAll(page);
  await waitFor('the sweep', async () => (await counts('billing')).completed === 10);
  await page.context().close();
  assert.deepEqual(await counts('billing'), { completed: 10, failed: 8 }, 'the rule for completed jobs ran, and no other');


  const twin = await bullsweep(['--redis', redis.url(1), '--config', twinPolicy, 'run', '--queue', 'billing']);
  assert.equal(twin.code, 0, twin.stderr);
  const [mine, theirs] = [await keysOf(0, 'bull:billing'), await keysOf(1, 'bull:billing')];
  assert.deepEqual(Object.keys(mine), Object.keys(theirs), 'the same keys as `bullsweep run` leaves');
  for (const key of Object.keys(mine)) assert.deepEqual(mine[key], theirs[key], key);
  await assertConsistent(redis, 0, [{ prefix: 'bull', name: 'billing' }]);

  const audit = await bullsweep([...args, '--json', 'audit', 'query', '--queue', 'billing']);
  assert.equal(audit.code, 0, audit.stderr);
  const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const removed = events.filter((e) => e.actor === `bull-board-app for ${USER}` && e.action === 'remove');
  assert.equal(removed.reduce((n, e) => n + e.jobCount, 0), 22, `audited for the bull-board user: ${JSON.stringify(events.map((e) => e.actor))}`);
  assert.deepEqual([...new Set(removed.map((e) => e.state))], ['completed']);
});

// Every key of `base` in `before` and `after` is the same, but the set of `state`, the events
// stream, and the keys of the jobs `removed` (gone now).
function assertOnly(base, state, before, after, removed) {
  const own = (key, id) => key === `${base}:${id}` || key.startsWith(`${base}:${id}:`);
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (key === `${base}:${state}` || key === `${base}:events`) continue;
    if (removed.some((id) => own(key, id))) {
      assert.equal(after[key], undefined, `${key} is removed`);
    } else {
      assert.deepEqual(after[key], before[key], `${key} is as it was`);
    }
  }
}

const idsOf = async (name, state) => (await queues[name].getJobs([state], 0, -1)).map((j) => j.id);

test("Clean of one state acts on that state alone and says what it did; a state the policy has no rule for is refused (issue 42, break 11)", async () => {
  // Clean failed on `orders` (completed: beyond 10, failed: beyond 2): the failed jobs beyond
  // 2 go, and every completed job stays.
  const sweptAt = await client.hget('bullsweep:lastrun', 'bull:orders');
  const before = await keysOf(0, 'bull:orders');
  const failed = await idsOf('orders', 'failed');
  assert.deepEqual(await counts('orders'), { completed: 32, failed: 8 });
  let page = await boardPage('/queues/queue/orders?status=failed');
  await cleanAll(page);
  await waitFor('the sweep', async () => (await counts('orders')).failed === 2);
  assert.deepEqual(await counts('orders'), { completed: 32, failed: 2 }, 'failed jobs beyond 2 went, completed ones stayed');
  await page.getByText(`last Clean of failed by ${USER}: bullsweep removed 6 jobs under failed: remove beyond 2`).first().waitFor();
  await page.context().close();
  const kept = await idsOf('orders', 'failed');
  assertOnly('bull:orders', 'failed', before, await keysOf(0, 'bull:orders'), failed.filter((id) => !kept.includes(id)));
  await assertConsistent(redis, 0, [{ prefix: 'bull', name: 'orders' }]);
  assert.equal(await client.hget('bullsweep:lastrun', 'bull:orders'), sweptAt, 'a Clean of one state is not the queue\'s sweep: the rest of the policy is still due');

  // Clean completed on `mixed` (failed: anonymize): the completed jobs beyond 10 go, and no
  // failed job is anonymized.
  const mixed = await keysOf(0, 'bull:mixed');
  const completed = await idsOf('mixed', 'completed');
  page = await boardPage('/queues/queue/mixed?status=completed');
  await cleanAll(page);
  await waitFor('the sweep', async () => (await counts('mixed')).completed === 10);
  for (const job of await queues.mixed.getFailed(0, -1)) {
    assert.match(job.data.user.email, /^u\d+@example\.com$/, 'a failed job keeps its data');
  }
  const left = await idsOf('mixed', 'completed');
  assertOnly('bull:mixed', 'completed', mixed, await keysOf(0, 'bull:mixed'), completed.filter((id) => !left.includes(id)));
  await page.getByText(`last Clean of completed by ${USER}: bullsweep removed 22 jobs under completed: remove beyond 10`).first().waitFor();
  await page.context().close();

  // Clean delayed on `mixed`, whose policy has no rule for delayed jobs: refused, nothing done.
  const untouched = await keysOf(0, 'bull:mixed');
  page = await boardPage('/queues/queue/mixed?status=delayed');
  await cleanAll(page);
  await page.getByText('bullsweep: policy mixed has no rule for delayed jobs, so a sweep of them would act on none; nothing was done').first().waitFor();
  await page.context().close();
  assert.deepEqual(await keysOf(0, 'bull:mixed'), untouched, 'nothing changed');
  assert.equal((await queues.mixed.getJobCounts('delayed')).delayed, 3);

  const audit = await bullsweep([...args, '--json', 'audit', 'query', '--queue', 'orders']);
  const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.actor === `bull-board-app for ${USER}`);
  assert.deepEqual([...new Set(events.map((e) => `${e.state} ${e.action}`))], ['failed remove']);
  assert.equal(events.reduce((n, e) => n + e.jobCount, 0), 6);
});

// Issue 42, follow-up (invariant 119): Clean on a `failed: notify` state answered 200,
// removed nothing, POSTed a notice, and the description said "bullsweep acted on 161 jobs".
test('Clean of a state whose rule notifies says it noticed them and removed none, and the answer splits what it did by action (issue 42, invariant 119)', async () => {
  const failed = await idsOf('alerts', 'failed');
  assert.equal(failed.length, 8);
  const page = await boardPage('/queues/queue/alerts?status=failed');
  await cleanAll(page);
  await page.getByText(`last Clean of failed by ${USER}: bullsweep noticed 8 jobs, removed 0 under failed: notify after 1ms`).first().waitFor();
  await page.context().close();
  assert.deepEqual(await idsOf('alerts', 'failed'), failed, 'every failed job stays');
  assert.deepEqual(notices.map((n) => n.jobs.map((j) => j.id).sort()), [[...failed].sort()], 'one notice named the eight');
  // Two more failures: the daemon's answer counts them under `notify`, and removed none.
  await finishJobs(queues.alerts, redis.connection(0), 2, { fail: () => true });
  const integration = bullsweepBoard({ daemon: { url: daemonUrl, token: OPS } });
  const alerts = integration.adapt(new BullMQAdapter(queues.alerts));
  await integration.refresh();
  const swept = await new Promise((resolve, reject) => {
    integration.express()({ user: USER }, {}, (e) => (e ? reject(e) : alerts.clean('failed', 5000).then(resolve, reject)));
  });
  assert.deepEqual([swept.state, swept.done, swept.doneByAction], ['failed', 2, { notify: 2 }], JSON.stringify(swept));
  assert.equal((await counts('alerts')).failed, 10);
  assert.match(alerts.getDescription(), new RegExp(`last Clean of failed by ${USER}: bullsweep noticed 2 jobs, removed 0 under failed: notify`));
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
  const swept = await new Promise((resolve, reject) => {
    integration.express()({ user }, {}, (e) => (e ? reject(e) : billing.clean('completed', 5000).then(resolve, reject)));
  });
  assert.equal(swept.state, 'completed');
  assert.equal(swept.done, 5, 'the daemon says what it did');
  // A name the audit could not hold exactly is refused before anything is sent.
  await finishJobs(queues.billing, redis.connection(0), 3);
  for (const sneaky of ['b\u200bob', 'x'.repeat(129)]) {
    const refused = await new Promise((resolve) => {
      integration.express()({ user: sneaky }, {}, () => billing.clean('completed', 5000).then(() => null, resolve));
    });
    assert.equal(refused && refused.statusCode, 400, String(refused));
    assert.match(refused.message, /cannot be audited with it; nothing was done/);
  }
  assert.equal((await counts('billing')).completed, 13, 'nothing was swept');
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
