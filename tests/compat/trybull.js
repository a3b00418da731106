const { startRedis, bullsweep, writePolicy } = require('./lib/harness');
const { buildBull, BULL_LAYOUTS } = require('./lib/bull_dataset');
(async () => {
  const redis = await startRedis();
  const release = await buildBull(redis.connection(0));
  const pol = writePolicy(['version: 1', 'discovery:', '  layouts:', ...BULL_LAYOUTS.map((l) => `    - "${l}"`), 'policies:', '  - { name: all, queueNamePattern: "*", rules: { completed: { maxAge: 1ms }, failed: { maxAge: 1ms }, waiting: { maxAge: 1ms }, delayed: { maxAge: 1ms } } }', ''].join('\n'));
  for (const args of [['report'], ['--json', 'report'], ['alerts'], ['doctor'], ['explain', 'bull:legacy-mail']]) {
    const p = await bullsweep(['--redis', redis.url(0), '--config', pol, ...args]);
    console.log('$', args.join(' '), '->', p.code, '\n', p.stdout.slice(0, 2500), p.stderr.slice(0, 800));
  }
  await release();
  redis.stop();
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });
