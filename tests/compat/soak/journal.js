// The soak's record: the op log (every operation with its index and parameters, written to a
// file as it happens), the count of invariant checks made, and the violations, each printed
// with its seed, op index, invariant, evidence and how to reproduce it.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

// The soak's invariants, by number.
const INVARIANTS = {
  1: 'a job in a live state keeps its hash and its data; no worker sees a missing job or a payload no producer made',
  2: 'nothing is removed, changed or sent beyond what the plan made from the same state shows; a queue it leaves alone is left alone; every queue is governed as its own library',
  3: 'a read (plan, report, alerts, explain, doctor without --repair) changes nothing and sends nothing',
  4: 'every change is in the audit trail under the right action; the trail verifies; a removed parent is never recorded as released',
  5: 'doctor finds nothing bullsweep made',
  6: "a registered repeatable job or job scheduler always has its next iteration",
};

class Journal {
  constructor({ seed, minutes, dir, keepGoing }) {
    this.seed = seed;
    this.minutes = minutes;
    this.keepGoing = keepGoing;
    this.file = path.join(dir, `soak-${seed}.log`);
    this.jsonFile = path.join(dir, `soak-${seed}.violations.jsonl`);
    fs.writeFileSync(this.file, `# bullsweep soak, seed ${seed}, ${minutes} min\n`);
    fs.writeFileSync(this.jsonFile, '');
    this.ops = [];
    this.opIndex = -1;
    this.checks = 0;
    this.violations = [];
    this.notes = [];
    this.seen = new Set();
  }

  // Records operation `name` with its parameters; returns its index.
  op(name, detail = '') {
    this.opIndex += 1;
    const line = `#${this.opIndex} ${name}${detail ? ` ${detail}` : ''}`;
    this.ops.push(line);
    fs.appendFileSync(this.file, `${line}\n`);
    return this.opIndex;
  }

  // Adds to the current operation's line what it found or did.
  result(text) {
    const line = `   -> ${text}`;
    this.ops.push(line);
    fs.appendFileSync(this.file, `${line}\n`);
  }

  // Counts `n` invariant checks made.
  checked(n = 1) { this.checks += n; }

  // Something worth knowing that is not a violation (an operation that failed, a
  // worker error right after a Redis restart).
  note(text) {
    this.notes.push(`#${this.opIndex} ${text}`);
    fs.appendFileSync(this.file, `   !! ${text}\n`);
  }

  // Records a violation of invariant `inv` (once per `key`); `evidence` is an object or text.
  violation(inv, key, summary, evidence) {
    if (this.seen.has(`${inv}:${key}`)) return;
    this.seen.add(`${inv}:${key}`);
    const v = { seed: this.seed, op: this.opIndex, invariant: inv, summary, evidence };
    this.violations.push(v);
    fs.appendFileSync(this.file, `   XX invariant ${inv}: ${summary}\n`);
    fs.appendFileSync(this.jsonFile, `${JSON.stringify({ ...v, at: new Date().toISOString() })}\n`);
    process.stderr.write(`${this.format(v)}\n`);
  }

  // Whether the run must stop (a violation, unless asked to go on).
  get stop() { return this.violations.length > 0 && !this.keepGoing; }

  format(v) {
    const evidence = typeof v.evidence === 'string' ? v.evidence : JSON.stringify(v.evidence, null, 2);
    const tail = this.ops.filter((l) => l.startsWith('#') && Number(l.slice(1, l.indexOf(' '))) <= v.op).slice(-25);
    return [
      `\n=== VIOLATION (seed ${v.seed}, op #${v.op}) of invariant ${v.invariant}: ${INVARIANTS[v.invariant]}`,
      v.summary,
      'evidence:',
      evidence.split('\n').map((l) => `  ${l}`).join('\n').slice(0, 6000),
      'reproduction:',
      `  ${process.env.BULLSWEEP_BIN ? `BULLSWEEP_BIN=${process.env.BULLSWEEP_BIN} ` : ''}make soak SEED=${v.seed} MINUTES=${this.minutes} SOAK_STOP_AFTER=${v.op}`,
      `  op log up to op #${v.op}: ${this.file} (its last operations:)`,
      ...tail.map((l) => `    ${l}`),
    ].join('\n');
  }
}

// An error of the soak itself (a policy `check` refuses, arguments bullsweep refuses): the run
// stops, as its results could not be trusted.
class SoakBug extends Error {}

module.exports = { Journal, INVARIANTS, SoakBug };
