// Test harness: a private server (BULLSWEEP_REDIS_SERVER, TLS with BULLSWEEP_TEST_TLS=1, the
// README role users created) on a free port in its own temp dir, a full keyspace
// dump for comparisons, and a runner for the bullsweep binary.
'use strict';
const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const IORedis = require('ioredis');

const ROOT = path.resolve(__dirname, '..', '..', '..');
const BIN = process.env.BULLSWEEP_BIN || path.join(ROOT, 'target', 'debug', 'bullsweep');
// The harness's facts (role users, certificates) come from the Rust testkit, their one home.
const TESTKIT = process.env.BULLSWEEP_TESTKIT_BIN || path.join(path.dirname(BIN), 'bullsweep-testkit');
// The server binary: BULLSWEEP_REDIS_SERVER (the matrix), or redis-server on PATH.
const SERVER = process.env.BULLSWEEP_REDIS_SERVER || 'redis-server';
// BULLSWEEP_TEST_TLS=1: every server speaks only TLS, with mutual TLS, and every client and
// bullsweep run use it.
const TLS = process.env.BULLSWEEP_TEST_TLS === '1';
// The BullMQ prefixes the suites use; the role users may touch these and bullsweep:*.
const PREFIXES = ['bull', '{app}', 'outer-bundled-string-prefix', '{bull}', '{orders}', 'legacy'];

let certs = null;
function tlsFiles() {
  if (!certs) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-compat-certs-'));
    const { execFileSync } = require('node:child_process');
    certs = JSON.parse(execFileSync(TESTKIT, ['certs', dir], { encoding: 'utf8' }));
  }
  return certs;
}

// ioredis options for the `default` user (the harness's own reads and writes).
function clientOptions(port, db) {
  const base = { host: TLS ? 'localhost' : '127.0.0.1', port, db };
  if (!TLS) return base;
  const c = tlsFiles();
  return { ...base, tls: { ca: fs.readFileSync(c.ca), cert: fs.readFileSync(c.clientCert), key: fs.readFileSync(c.clientKey), servername: 'localhost' } };
}

// The role users, as the README defines them, for a server of this major version.
function roles(major) {
  const { execFileSync } = require('node:child_process');
  return JSON.parse(execFileSync(TESTKIT, ['roles', String(major), ...PREFIXES], { encoding: 'utf8' }));
}

async function createRoleUsers(port) {
  const c = new IORedis({ ...clientOptions(port, 0), maxRetriesPerRequest: 3 });
  const info = await c.info('server');
  const version = (info.match(/valkey_version:(\d+)/) || info.match(/redis_version:(\d+)/) || [])[1];
  const r = roles(Number(version || 7));
  for (const u of r.users) await c.call('ACL', 'SETUSER', u.user, ...u.rules);
  c.disconnect();
  return r;
}

// The URL bullsweep runs with: `--redis` of the harness's own form gets the role user of the
// subcommand in `args`, so that every suite runs bullsweep as the README's roles.
function asRole(args) {
  const i = args.indexOf('--redis');
  if (i < 0 || !roleTable) return args;
  const url = args[i + 1];
  const m = url.match(/^(rediss?|redis\+cluster):\/\/((?:127\.0\.0\.1|localhost):\d+(?:,(?:127\.0\.0\.1|localhost):\d+)*)(\/\d+)?$/);
  if (!m) return args;
  const sub = args.find((a, j) => !a.startsWith('-') && j !== i + 1 && args[j - 1] !== '--config' && args[j - 1] !== '--redis');
  const user = roleTable.commands[sub] || roleTable.commands.run;
  const out = [...args];
  out[i + 1] = `${m[1]}://${user}:${roleTable.password}@${m[2]}${m[3] || ''}`;
  return out;
}
let roleTable = null;

// TLS files for bullsweep, through its environment.
function tlsEnv() {
  if (!TLS) return {};
  const c = tlsFiles();
  return { BULLSWEEP_TLS_CA_CERT: c.ca, BULLSWEEP_TLS_CERT: c.clientCert, BULLSWEEP_TLS_KEY: c.clientKey };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitForRedis(port) {
  const deadline = Date.now() + 10000;
  for (;;) {
    try {
      const c = new IORedis({ ...clientOptions(port, 0), lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      await c.connect();
      await c.ping();
      c.disconnect();
      break;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`redis-server did not start: ${err.message}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

// A private redis-server. With `persist`, it keeps an append-only file that `restart` reloads;
// `extra` are more server arguments (a cluster node's).
async function startRedis({ persist = false, extra = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-compat-'));
  const port = await freePort();
  const c = TLS ? tlsFiles() : null;
  const listen = TLS
    ? ['--port', '0', '--tls-port', String(port), '--tls-cert-file', c.serverCert, '--tls-key-file', c.serverKey,
      '--tls-ca-cert-file', c.ca, '--tls-auth-clients', 'yes']
    : ['--port', String(port)];
  const args = [...listen, '--bind', '127.0.0.1', '--save', '', '--dir', dir,
    ...(persist ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no'])];
  let proc = spawn(SERVER, [...args, ...extra], { stdio: 'ignore' });
  await waitForRedis(port);
  roleTable = await createRoleUsers(port);
  const clients = [];
  return {
    port,
    url: (db = 0) => (TLS ? `rediss://localhost:${port}/${db}` : `redis://127.0.0.1:${port}/${db}`),
    connection: (db = 0) => clientOptions(port, db),
    client: (db = 0) => {
      const c = new IORedis({ ...clientOptions(port, db), maxRetriesPerRequest: 3 });
      clients.push(c);
      return c;
    },
    // Stops the server (SIGTERM: the append-only file is complete), waits `downMs`, and starts
    // it again on the same port and directory.
    restart: async (downMs) => {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
      await new Promise((r) => setTimeout(r, downMs));
      proc = spawn(SERVER, [...args, ...extra], { stdio: 'ignore' });
      await waitForRedis(port);
      // ACL users live in memory, not in the append-only file.
      await createRoleUsers(port);
    },
    stop: () => {
      for (const c of clients) c.disconnect();
      proc.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// Every key of one database with its type and full value; streams and bullsweep's own keys
// (its audit stream, counter and checkpoint under `bullsweep:`) are excluded.
async function dumpKeyspace(client) {
  const keys = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  keys.sort();
  const out = {};
  for (const key of keys) {
    if (key.startsWith('bullsweep:')) continue;
    const type = await client.type(key);
    let value;
    switch (type) {
      case 'string': value = await client.get(key); break;
      case 'hash': value = Object.fromEntries(Object.entries(await client.hgetall(key)).sort()); break;
      case 'list': value = await client.lrange(key, 0, -1); break;
      case 'set': value = (await client.smembers(key)).sort(); break;
      case 'zset': value = await client.zrange(key, 0, -1, 'WITHSCORES'); break;
      case 'stream': continue;
      default: value = `<${type}>`;
    }
    const ttl = await client.pttl(key);
    out[key] = { type, value, expires: ttl >= 0 };
  }
  return out;
}

// Copies every key of database `from` into database `to` (values and expiry).
async function copyDatabase(client, from, to) {
  await client.select(from);
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'COUNT', 1000);
    for (const key of batch) await client.copy(key, key, 'DB', to, 'REPLACE');
    cursor = next;
  } while (cursor !== '0');
}

// Runs bullsweep with arguments; resolves {code, stdout, stderr}.
// Runs in `cwd`, or a fresh temporary directory, where its default audit file goes.
function bullsweep(args, env = {}, { cwd } = {}) {
  cwd = cwd || fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-run-'));
  return new Promise((resolve) => {
    execFile(BIN, asRole(args), { cwd, env: { ...process.env, ...tlsEnv(), ...env }, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

function writePolicy(text) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-policy-'));
  const file = path.join(dir, 'bullsweep.yaml');
  fs.writeFileSync(file, text);
  return file;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls `check` until it resolves true; fails after `ms` (15 s), naming `what` it waited for.
async function waitFor(what, check, ms = 15000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

// Starts `bullsweep daemon` with arguments in its own temporary directory (where its default
// audit file goes, unless `cwd` is given). Its stderr is kept; `exited` resolves to
// {code, signal} when it ends.
const daemons = new Set();

// Kills every daemon still running (SIGKILL), so a failed test never leaves one behind to
// keep the test process alive.
function stopDaemons() {
  for (const proc of daemons) proc.kill('SIGKILL');
  daemons.clear();
}

function startDaemon(args, { cwd, env = {} } = {}) {
  const dir = cwd || fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-daemon-'));
  const proc = spawn(BIN, asRole(['daemon', '--discover-every', '200ms', ...args]), {
    cwd: dir, env: { ...process.env, ...tlsEnv(), ...env }, stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  daemons.add(proc);
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => {
    daemons.delete(proc);
    resolve({ code, signal });
  }));
  return {
    proc,
    dir,
    exited,
    log: () => stderr,
    kill: (signal = 'SIGTERM') => { proc.kill(signal); return exited; },
  };
}

// GETs a path from a daemon's --listen address; resolves {status, body}.
async function httpGet(port, urlPath) {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`);
  return { status: res.status, body: await res.text() };
}

module.exports = {
  TLS,
  startRedis, dumpKeyspace, copyDatabase, bullsweep, writePolicy, sleep, waitFor, BIN, TESTKIT, startDaemon, stopDaemons,
  httpGet, freePort,
};
