// The checks made after every operation, while traffic runs:
// - invariant 1: every id in a live state has its job hash, with data (one atomic script per
//   queue, so no race with a worker); a live hash carrying an expiry is a suspect, named in the
//   evidence if it is lost later;
// - invariant 3 (sends): no webhook post carries the tag of a read;
// - invariant 6: each repeatable job and job scheduler registered in a queue's `repeat` set has
//   its next iteration in a live state (missed twice, 2.5 s apart, to pass Bull's own gap
//   between scheduling and adding the next one).
'use strict';
const { QUEUES, LIVE } = require('./world');
const { AuditTrail } = require('./audit');

// ARGV: base, the number of list states, the list states, the set states. Returns flat
// triples {state, id, finding}: `missing:<type>`, `nodata`, or `ttl:<ms>`.
const LIVE_SCRIPT = `
local base = ARGV[1]
local nl = tonumber(ARGV[2])
local out = {}
local function check(state, id)
  local k = base .. ':' .. id
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'hash' then
    out[#out + 1] = state; out[#out + 1] = id; out[#out + 1] = 'missing:' .. t
    return
  end
  local d = redis.call('HGET', k, 'data')
  if not d or d == '' or d == '{}' or d == 'null' then
    out[#out + 1] = state; out[#out + 1] = id; out[#out + 1] = 'nodata'
  end
  local ttl = redis.call('PTTL', k)
  if ttl >= 0 then
    out[#out + 1] = state; out[#out + 1] = id; out[#out + 1] = 'ttl:' .. ttl
  end
end
for i = 3, 2 + nl do
  for _, id in ipairs(redis.call('LRANGE', base .. ':' .. ARGV[i], 0, -1)) do check(ARGV[i], id) end
end
for i = 3 + nl, #ARGV do
  for _, id in ipairs(redis.call('ZRANGE', base .. ':' .. ARGV[i], 0, -1)) do check(ARGV[i], id) end
end
return out
`;

// ARGV: base. Returns flat triples {member, score, 1 when an iteration due at score is live}.
const CHAIN_SCRIPT = `
local base = ARGV[1]
local live = {}
local function note(id)
  if string.sub(id, 1, 7) == 'repeat:' then
    local ms = string.match(id, ':(%d+)$')
    if ms then live[ms] = true end
  end
end
for _, s in ipairs({'wait', 'paused', 'active'}) do
  for _, id in ipairs(redis.call('LRANGE', base .. ':' .. s, 0, -1)) do note(id) end
end
for _, s in ipairs({'delayed', 'prioritized'}) do
  for _, id in ipairs(redis.call('ZRANGE', base .. ':' .. s, 0, -1)) do note(id) end
end
local out = {}
local entries = redis.call('ZRANGE', base .. ':repeat', 0, -1, 'WITHSCORES')
for i = 1, #entries, 2 do
  out[#out + 1] = entries[i]; out[#out + 1] = entries[i + 1]; out[#out + 1] = live[entries[i + 1]] and 1 or 0
end
return out
`;

const CHAIN_GRACE_MS = 2500;

class LiveChecks {
  constructor({ client, journal, audit, webhook, reads, losses }) {
    this.client = client;
    this.journal = journal;
    this.losses = losses;
    this.audit = audit;
    this.webhook = webhook;
    this.reads = reads;
    this.suspects = new Map();
    this.chainMisses = new Map();
    this.postsSeen = 0;
  }

  async check() {
    for (const q of QUEUES) {
      const { lists, sets } = LIVE[q.lib];
      const found = await this.client.eval(LIVE_SCRIPT, 0, q.base, lists.length, ...lists, ...sets);
      this.journal.checked();
      for (let i = 0; i < found.length; i += 3) this.finding(q, found[i], found[i + 1], found[i + 2]);
      if (q.repeat) await this.chains(q);
    }
    this.sends();
  }

  finding(q, state, id, what) {
    const key = `${q.base}:${id}`;
    if (what.startsWith('ttl:')) {
      if (!this.suspects.has(key)) {
        this.suspects.set(key, { op: this.journal.opIndex, state, pttl: Number(what.slice(4)) });
        this.journal.note(`live job ${key} in ${state} carries an expiry (${what.slice(4)} ms left)`);
      }
      return;
    }
    this.losses.report(q, id, `${key}:${what}`,
      `job ${id} in ${q.base}'s ${state} ${what === 'nodata' ? 'has lost its data' : 'has no job hash'}`,
      { queue: q.base, state, jobId: id, finding: what, expirySeenOnLiveJob: this.suspects.get(key) || null,
        auditEventsNamingIt: this.audit.mentioning(q.base, id) });
  }

  async chains(q) {
    const found = await this.client.eval(CHAIN_SCRIPT, 0, q.base);
    this.journal.checked();
    const now = Date.now();
    const missing = new Set();
    for (let i = 0; i < found.length; i += 3) {
      if (found[i + 2] === 1) continue;
      const key = `${q.base}|${found[i]}|${found[i + 1]}`;
      missing.add(key);
      const first = this.chainMisses.get(key);
      if (!first) { this.chainMisses.set(key, now); continue; }
      if (now - first < CHAIN_GRACE_MS) continue;
      const due = Number(found[i + 1]);
      this.audit.refresh();
      this.journal.violation(6, key, `the repeatable job ${found[i]} of ${q.base} has no next iteration (due ${new Date(due).toISOString()})`,
        { queue: q.base, library: q.lib, repeatEntry: found[i], dueMs: due, missingSinceMs: now - first,
          auditEventsNamingIt: this.audit.events.filter((e) => e.queueKey === q.base
            && (e.jobIds || []).some((id) => id.startsWith('repeat:') && id.endsWith(`:${due}`)))
            .map((e) => ({ seq: e.seq, action: e.action, state: e.state, jobIds: e.jobIds, policy: e.policyName })) });
    }
    for (const key of this.chainMisses.keys()) if (key.startsWith(`${q.base}|`) && !missing.has(key)) this.chainMisses.delete(key);
  }

  // Invariant 3's sends: a post tagged with a read's tag.
  sends() {
    const posts = this.webhook.posts.slice(this.postsSeen);
    this.postsSeen = this.webhook.posts.length;
    this.journal.checked();
    for (const p of posts) {
      const read = this.reads.get(p.tag);
      if (!read) continue;
      const body = p.body || {};
      this.journal.violation(3, `send:${p.tag}`, `the read \`${read}\` (${p.tag}) posted a notice to the webhook`,
        { command: read, tag: p.tag, notice: { queueKey: body.queueKey, state: body.state, action: body.action, count: body.count,
          jobIds: (body.jobs || []).slice(0, 10).map((j) => j.id) } });
    }
  }
}

module.exports = { LiveChecks, AuditTrail };
