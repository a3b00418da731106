// A private Redis Cluster: six cluster-enabled servers (each a harness server, with the role
// users), joined as three primaries with a replica each by `redis-cli --cluster create`.
'use strict';
const { execFile } = require('node:child_process');
const IORedis = require('ioredis');
const { startRedis, sleep } = require('./harness');

async function startCluster() {
  const nodes = [];
  for (let i = 0; i < 6; i++) {
    nodes.push(await startRedis({ extra: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'] }));
  }
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  await new Promise((resolve, reject) => {
    execFile('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '1', '--cluster-yes'], (err, stdout) => {
      if (err) reject(new Error(`redis-cli --cluster create failed: ${stdout}`));
      else resolve();
    });
  });
  const deadline = Date.now() + 30000;
  for (;;) {
    const states = await Promise.all(nodes.map(async (n) => {
      const info = await n.client(0).cluster('INFO');
      return info.includes('cluster_state:ok') && info.includes('cluster_known_nodes:6');
    }));
    if (states.every(Boolean)) break;
    if (Date.now() > deadline) throw new Error('the cluster did not reach cluster_state:ok');
    await sleep(100);
  }
  const seeds = nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  const clusters = [];
  const connect = () => {
    const c = new IORedis.Cluster(seeds, { redisOptions: { maxRetriesPerRequest: null } });
    // Nodes stopped at the end refuse reconnections; that is not a test failure.
    c.on('error', () => {});
    clusters.push(c);
    return c;
  };
  return {
    // bullsweep's URL: every node a seed.
    url: () => `redis+cluster://${addresses.join(',')}`,
    // A cluster connection for BullMQ and the harness.
    connection: connect,
    // The nodes, for clients made another way (Bull's createClient).
    seeds,
    // Keeps a connection made elsewhere, to close it with the cluster.
    adopt: (c) => { c.on('error', () => {}); clusters.push(c); return c; },
    client: connect,
    // A direct client of each primary (for SCAN, which sees one node's keys).
    primaries: async () => {
      const out = [];
      for (const n of nodes) {
        const c = n.client(0);
        const role = await c.call('ROLE');
        if (role[0] === 'master') out.push(c);
      }
      return out;
    },
    stop: () => {
      for (const c of clusters) c.disconnect();
      for (const n of nodes) n.stop();
    },
  };
}

module.exports = { startCluster };
