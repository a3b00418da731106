// The audit trail as the soak reads it: the JSON-lines file every generated policy names,
// read as it grows, and the events that name a job.
'use strict';
const fs = require('node:fs');

class AuditTrail {
  constructor(file) {
    this.file = file;
    this.offset = 0;
    this.events = [];
    this.bad = [];
  }

  // Reads the lines appended since the last call; returns how many events there are now.
  refresh() {
    if (!fs.existsSync(this.file)) return this.events.length;
    const text = fs.readFileSync(this.file);
    if (text.length <= this.offset) return this.events.length;
    const chunk = text.subarray(this.offset).toString('utf8');
    const end = chunk.lastIndexOf('\n');
    if (end < 0) return this.events.length;
    this.offset += Buffer.byteLength(chunk.slice(0, end + 1));
    for (const line of chunk.slice(0, end).split('\n')) {
      if (!line.trim()) continue;
      try { this.events.push(JSON.parse(line)); } catch { this.bad.push(line); }
    }
    return this.events.length;
  }

  // Events from index `from` on.
  since(from) { this.refresh(); return this.events.slice(from); }

  // Whether an event names job `id` of queue `base`: in its ids (its own queue), in its related
  // jobs, or as a full key in any list of strings it holds (fields added later included).
  static names(e, base, id) {
    const key = `${base}:${id}`;
    if (e.queueKey === base && (e.jobIds || []).includes(id)) return true;
    if ((e.relatedJobs || []).some((r) => r.key === key)) return true;
    return Object.values(e).some((v) => Array.isArray(v) && v.some((x) => x === key || (x && x.key === key)));
  }

  // Every event that names the job, in short form, for evidence.
  mentioning(base, id) {
    this.refresh();
    return this.events.filter((e) => AuditTrail.names(e, base, id)).map((e) => ({
      seq: e.seq, action: e.action, state: e.state, queueKey: e.queueKey, executionId: e.executionId,
      policy: e.policyName, repairKind: e.repairKind, at: e.timestamp,
    }));
  }
}

module.exports = { AuditTrail };
