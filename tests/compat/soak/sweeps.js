// bullsweep as the soak drives it: every invocation as the README's role user for its command
// (the harness's), with its own rendering of the policy in force (whose webhook header is the
// invocation's tag), the daemon started, reloaded and stopped, and Redis restarted under all.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { bullsweep, startDaemon } = require('../lib/harness');
const { randomPolicies, render, writeRendering } = require('./policy');
const { SoakBug } = require('./journal');

// Reads by command name: what invariant 3 holds to changing and sending nothing.
const READS = new Set(['plan', 'report', 'alerts', 'explain', 'doctor']);
// Keys a read may write: `alerts` saves its readings (README, "Permissions" and "Alerts").
const READ_WRITES = new Set(['bullsweep:readings']);

class Sweeps {
  constructor({ redis, dirs, webhook, journal, sources = null }) {
    this.redis = redis;
    this.sources = sources;
    this.dirs = dirs;
    this.webhook = webhook;
    this.journal = journal;
    this.policies = [];
    this.reads = new Map();
    this.daemon = null;
    // Since when the daemon has run without a stop (null while it does not run).
    this.daemonSince = null;
    this.counts = {};
  }

  // A new random policy set, checked by `bullsweep check` (a soak bug if it is refused).
  async newPolicies(rng) {
    this.policies = randomPolicies(rng);
    const out = await this.invoke('check', ['check'], { tag: `op${this.journal.opIndex}-check` });
    if (out.code !== 0) throw new SoakBug(`the soak generated a policy file check refuses:\n${out.stderr}`);
    return this.policies.map((p) => `${p.queueNamePattern}${p.tenant ? `@${p.tenant}` : ''}{${Object.entries(p.rules)
      .map(([s, r]) => `${s}:${Object.entries(r).map(([k, v]) => `${k}=${v}`).join(',')}`).join(' ')}${p.source
      ? ` source:${p.source.name},keepFor=${p.source.keepFor}${p.source.action ? `,${p.source.action}` : ''}` : ''}}`).join(' ');
  }

  // The policy file of one invocation.
  file(tag, { subjects = false } = {}) {
    return writeRendering(this.dirs.policies, render(this.policies, { tag, dirs: this.dirs, webhookUrl: this.webhook.url, subjects, sources: this.sources }), tag);
  }

  // Runs `bullsweep --redis …/<db> --config <its rendering> --json <args>`; resolves {code,
  // stdout, stderr, json}. A read's tag is remembered, so any notice it posts is caught.
  async invoke(command, args, { tag = `op${this.journal.opIndex}-${command}`, subjects = false, db = 0 } = {}) {
    if (READS.has(command) && !args.includes('--repair')) this.reads.set(tag, `bullsweep ${args.join(' ')}`);
    const config = this.file(tag, { subjects });
    this.counts[command] = (this.counts[command] || 0) + 1;
    const out = await bullsweep(['--redis', this.redis.url(db), '--config', config, '--json', ...args], {}, { cwd: this.dirs.cwd });
    fs.rmSync(config, { force: true });
    let json = null;
    try { json = JSON.parse(out.stdout); } catch { /* not one JSON document */ }
    return { ...out, json, tag };
  }

  // The daemon's API (bull-board's integration calls it; board.js), on a port fixed for the run.
  listenOn(port, tokensFile) {
    this.daemonPort = port;
    this.tokensFile = tokensFile;
  }

  get daemonUrl() { return `http://127.0.0.1:${this.daemonPort}`; }

  // Starts the daemon on the policy in force (it sweeps every 5 s, and by events where a policy
  // says `mode: event`), serving its API and dashboard when `listenOn` gave it a port.
  startDaemon() {
    const tag = `daemon-op${this.journal.opIndex}`;
    this.daemonFile = path.join(this.dirs.policies, 'daemon.yaml');
    fs.writeFileSync(this.daemonFile, render(this.policies, { tag, dirs: this.dirs, webhookUrl: this.webhook.url, schedule: '5s', sources: this.sources }));
    const listen = this.daemonPort ? ['--listen', `127.0.0.1:${this.daemonPort}`, '--dashboard', '--dashboard-tokens', this.tokensFile] : [];
    this.daemon = startDaemon(['--redis', this.redis.url(), '--config', this.daemonFile, '--json', ...listen], { cwd: this.dirs.cwd });
    this.daemonSince = Date.now();
    return tag;
  }

  // Gives the running daemon the policy in force (SIGHUP).
  reloadDaemon() {
    const tag = `daemon-op${this.journal.opIndex}`;
    fs.writeFileSync(this.daemonFile, render(this.policies, { tag, dirs: this.dirs, webhookUrl: this.webhook.url, schedule: '5s', sources: this.sources }));
    this.daemon.proc.kill('SIGHUP');
    return tag;
  }

  // Stops the daemon (SIGTERM); resolves its exit, noting one that is not clean.
  async stopDaemon() {
    if (!this.daemon) return null;
    const d = this.daemon;
    this.daemon = null;
    this.daemonSince = null;
    const exit = await Promise.race([d.kill('SIGTERM'), new Promise((r) => setTimeout(() => r(null), 15000))]);
    if (!exit) {
      d.kill('SIGKILL');
      this.journal.note('the daemon did not stop within 15 s of SIGTERM');
    } else if (exit.code !== 0) {
      this.journal.note(`the daemon exited ${exit.code}: ${d.log().split('\n').slice(-5).join(' | ')}`);
    }
    return exit;
  }
}

module.exports = { Sweeps, READS, READ_WRITES };
