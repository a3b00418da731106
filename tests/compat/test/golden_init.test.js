// `bullsweep test --init` on queues real BullMQ and real Bull wrote: every case of the starter
// file passes on its first run, as written, with no flag `--init` was not given: a Bull
// queue's case says `backend: bull` (a Bull-only policy governs it), a queue under a tenant
// override names its policy as `plan` and `explain` do, and `--env` is kept in the file.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Queue } = require('../lib/bullmq');
const { bullQueue } = require('../lib/bull_dataset');
const { startRedis, bullsweep, writePolicy } = require('../lib/harness');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

const POLICY = `version: 1
discovery: { layouts: ["bull:{tenant}:{queue}", "legacy:{queue}"] }
policies:
  - name: billing
    queueNamePattern: billing
    rules: { completed: { maxAge: 7d, maxCount: 10 }, failed: { maxAge: 30d } }
  - name: mail
    queueNamePattern: mail
    rules: { completed: { maxAge: 3d } }
  - name: legacy-mail
    queueNamePattern: mail
    backend: bull
    rules: { completed: { maxCount: 0 }, failed: { maxAge: 1d } }
  - name: legacy-reports
    queueNamePattern: reports
    backend: bull
    rules: { completed: { maxAge: 12h } }
tenants:
  - tenantId: trial
    overrides: { completed: { maxAge: 1d } }
`;

// The queues: BullMQ's `bull:acme:billing` and `bull:trial:billing` (under trial's override),
// Bull's `bull:acme:mail` (a Bull-only policy beats the policy for both libraries) and
// `legacy:reports` (covered by a Bull-only policy alone).
async function seed() {
  await redis.client(0).flushall();
  for (const prefix of ['bull:acme', 'bull:trial']) {
    const q = new Queue('billing', { connection: redis.connection(0), prefix });
    await q.add('charge', { n: 1 });
    await q.close();
  }
  for (const spec of [{ prefix: 'bull:acme', name: 'mail' }, { prefix: 'legacy', name: 'reports' }]) {
    const q = bullQueue(redis.connection(0), spec);
    await q.add('send', { n: 1 });
    await q.close();
  }
}

// `test --init` (with `extra` global flags), written beside the policy file, then `test` on
// it with no flag but `--config`: the starter's text and the run's JSON report.
async function initThenTest(extra = []) {
  const policy = writePolicy(POLICY);
  const init = await bullsweep(['--redis', redis.url(0), '--config', policy, ...extra, 'test', '--init']);
  assert.equal(init.code, 0, init.stderr);
  const file = path.join(path.dirname(policy), 'bullsweep.test.yaml');
  fs.writeFileSync(file, init.stdout);
  const run = await bullsweep(['--config', policy, '--json', 'test', file]);
  assert.equal(run.code, 0, `the starter file fails as written:\n${init.stdout}\n${run.stdout}\n${run.stderr}`);
  return { starter: init.stdout, report: JSON.parse(run.stdout) };
}

test('test --init: every case it writes for BullMQ and Bull queues passes on its first run', async () => {
  await seed();
  const { starter, report } = await initThenTest();
  assert.equal(report.failed, 0);
  assert.equal(report.passed, 4, `one case per queue:\n${starter}`);
  // Each Bull queue's case names its library, and resolves to the Bull-only policy.
  for (const [base, policy] of [['bull:acme:mail', 'legacy-mail'], ['legacy:reports', 'legacy-reports']]) {
    const at = starter.indexOf(`- queue: "${base}"`);
    assert.ok(at >= 0, `a case for ${base}:\n${starter}`);
    const c = starter.slice(at).split('\n  - ')[0];
    assert.match(c, /\n {4}backend: bull\n/, `${base} is a Bull queue:\n${c}`);
    assert.match(c, new RegExp(`"policy": "${policy}"`), c);
  }
  const trial = starter.slice(starter.indexOf('- queue: "bull:trial:billing"')).split('\n  - ')[0];
  assert.match(trial, /"policy": "billing->override:trial"/, trial);
  assert.doesNotMatch(trial, /backend/, 'a BullMQ queue needs no backend line');
});

test('test --init --env: the file keeps the environment, so its cases pass without the flag', async () => {
  await seed();
  const { starter, report } = await initThenTest(['--env', 'staging']);
  assert.match(starter, /\nenv: "staging"\n/, starter);
  assert.equal(report.failed, 0);
  assert.equal(report.passed, 4);
  assert.match(starter, /"env": "staging"/, 'the cases expect the environment they were read in');
});
