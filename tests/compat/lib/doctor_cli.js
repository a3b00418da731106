// The doctor CLI as the compat suites run it: the BullMQ builds under test, a policy file for
// the audit trail, `doctor --json` against one database, and the findings of one kind.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { bullsweep, writePolicy } = require('./harness');

// The BullMQ builds under test: both, or the one BULLSWEEP_BULLMQ names.
const VERSIONS = (process.env.BULLSWEEP_BULLMQ ? [process.env.BULLSWEEP_BULLMQ] : ['bullmq', 'bullmq5'])
  .map((pkg) => {
    const version = require(`${pkg}/package.json`).version;
    return { pkg, mq: require(pkg), v5: version.startsWith('5.'), label: `BullMQ ${version}` };
  });

// A policy file whose only use is the audit trail (a file in a fresh directory).
function auditPolicy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bullsweep-doctor-'));
  const trail = path.join(dir, 'audit.jsonl');
  const file = writePolicy(`version: 1
audit: { url: "file://${trail}" }
policies:
  - { name: p, queueNamePattern: "*", rules: {} }
`);
  return { file, trail };
}

// Runs `doctor --json` (args after `doctor`) against database `db` of `redis`; resolves
// {code, report, stdout, stderr}, the report parsed when there is one.
async function runDoctor(redis, db, args = [], config = null) {
  const global = ['--redis', redis.url(db), ...(config ? ['--config', config] : []), '--json'];
  const r = await bullsweep([...global, 'doctor', ...args]);
  let report = null;
  try { report = JSON.parse(r.stdout); } catch { /* judged by the caller */ }
  return { code: r.code, report, stderr: r.stderr, stdout: r.stdout };
}

// The findings of one kind over every queue: {found, repaired, skipped, samples}.
function findingsOf(report, kind) {
  const out = { found: 0, repaired: 0, skipped: {}, samples: [] };
  for (const q of report.queues) {
    for (const f of q.findings || []) {
      if (f.kind !== kind) continue;
      out.found += f.found;
      out.repaired += f.repaired || 0;
      for (const [why, n] of Object.entries(f.skipped || {})) out.skipped[why] = (out.skipped[why] || 0) + n;
      out.samples.push(...(f.samples || []));
    }
  }
  return out;
}

// The trail's events of action `repair`.
function repairEvents(trail) {
  return fs.readFileSync(trail, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.action === 'repair');
}

module.exports = { VERSIONS, auditPolicy, runDoctor, findingsOf, repairEvents };
