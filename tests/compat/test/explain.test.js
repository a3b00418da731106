// What `explain` tells about queues real Bull and BullMQ wrote, beside what `plan` does with
// them: asked about a Bull queue without `--backend bull`, explain (which reads no Redis)
// names the Bull policy `plan` governs the queue with and the flag that shows it; and
// bull-board's description, read from `explain --json`, says when a notify rule reminds.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Queue } = require('../lib/bullmq');
const { BullMQAdapter } = require('@bull-board/api/bullMQAdapter');
const { bullQueue } = require('../lib/bull_dataset');
const { startRedis, bullsweep, writePolicy, BIN } = require('../lib/harness');
const { bullsweepBoard } = require('../../../integrations/bull-board');

let redis;
before(async () => { redis = await startRedis(); });
after(() => redis.stop());

const POLICY = `version: 1
notify: { log: true }
policies:
  - name: legacy
    queueNamePattern: legacy
    backend: bull
    rules: { completed: { maxAge: 1d } }
  - name: reminders
    queueNamePattern: reminders
    rules: { delayed: { maxAge: 2d, action: notify, remindEvery: 1d } }
`;

test('explain of a Bull queue without --backend names the policy plan governs it with', async () => {
  await redis.client(0).flushall();
  const legacy = bullQueue(redis.connection(0), { prefix: 'bull', name: 'legacy' });
  await legacy.add('send', { n: 1 });
  await legacy.close();
  const policy = writePolicy(POLICY);
  const run = (...args) => bullsweep(['--redis', redis.url(0), '--config', policy, ...args]);

  const plan = await run('--json', 'plan');
  assert.equal(plan.code, 0, plan.stderr);
  const governed = JSON.parse(plan.stdout).queues.find((q) => q.key === 'bull:legacy');
  assert.deepEqual([governed.backend, governed.policy], ['bull', 'legacy'], plan.stdout);

  const text = await run('explain', 'bull:legacy');
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^policy: none; the queue is uncovered and left alone$/m);
  assert.match(text.stdout, /^hint: as a legacy Bull queue, policy `legacy` \(backend bull\) would govern it; pass `--backend bull`/m);
  const json = await run('--json', 'explain', 'bull:legacy');
  assert.deepEqual(JSON.parse(json.stdout).otherBackend, { backend: 'bull', policy: 'legacy' });
  // With the flag, explain says what plan does, and has nothing more to hint.
  const asBull = await run('--json', 'explain', '--backend', 'bull', 'bull:legacy');
  const v = JSON.parse(asBull.stdout);
  assert.deepEqual([v.policy, v.otherBackend], ['legacy', null]);
});

test("bull-board's description names a notify rule's remindEvery", async () => {
  await redis.client(0).flushall();
  const queue = new Queue('reminders', { connection: redis.connection(0) });
  await queue.add('remind', { n: 1 }, { delay: 86400000 });
  const policy = writePolicy(POLICY);
  const integration = bullsweepBoard({ explain: { bin: BIN, config: policy, args: ['--redis', redis.url(0)] }, clean: 'block' });
  const adapter = integration.adapt(new BullMQAdapter(queue));
  await integration.refresh();
  assert.match(adapter.getDescription(), /^bullsweep policy reminders \(every 1h\): delayed: notify after 2d, remind every 1d$/);
  await queue.close();
});
