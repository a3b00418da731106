// Invariant 1's judge: a lost live job (its hash or data gone, or a worker that saw it go) is a
// violation, unless it is what README "Expiring keys" states remains of a `ttl`: a finished job
// retried while no daemon watched its queue, or less than about a second before Redis expired
// it, is deleted by Redis; and an id Redis left dangling that a retry put back in a live state
// is taken by a worker as a job with no data, even once the producer added the id again. Such
// a loss is noted and counted, not judged: the soak holds the daemon to ending a retried job's
// expiry, and every run to giving a job added again under a reused id no expiry.
'use strict';

// How long the daemon must have run before a retry, and the retry have preceded the loss, for
// the loss to fall inside what the daemon guarantees (it ends retried jobs' expiries within a
// second).
const DAEMON_BEFORE_MS = 1000;
const RETRY_BEFORE_MS = 3000;

class Losses {
  constructor({ journal, audit }) {
    this.journal = journal;
    this.audit = audit;
    this.traffic = null;
    this.sweeps = null;
    this.documented = 0;
    // Jobs whose loss was excused, by key, with when: what follows from it (a worker's error,
    // the id left in its state, a run removing the hash a worker made again, doctor's finding)
    // is the same loss, until the id is added again.
    this.excusedAt = new Map();
  }

  // Whether job `id` of queue `base` was lost within the documented limit. Once the id is
  // added again, what remains of that loss (its id left in `active` or a list, which a worker
  // takes as a job with no data once the new job is gone) is still that loss, unless bullsweep
  // acted on the id after it was added again (its audit names the id since).
  isExcused(base, id) {
    const at = this.excusedAt.get(`${base}:${id}`);
    if (at === undefined) return false;
    if (!this.traffic.readdedAfter({ base }, id, at)) return true;
    const readdAt = this.traffic.readds.get(`${base}:${id}`);
    return !this.audit.mentioning(base, id).some((e) => e.at >= readdAt);
  }

  // Judges the loss of job `id` of queue `q`.
  report(q, id, key, summary, evidence) {
    if (id !== null && this.isExcused(q.base, String(id))) return;
    const why = id === null ? null : this.excused(q, String(id));
    if (why) {
      this.documented += 1;
      this.excusedAt.set(`${q.base}:${id}`, Date.now());
      this.journal.note(`${summary} (not judged: ${why})`);
      return;
    }
    this.journal.violation(1, key, summary, evidence);
  }

  // Why the loss is the documented limit of `ttl`, or null.
  excused(q, id) {
    const expiries = this.audit.mentioning(q.base, id).filter((e) => e.action === 'expire');
    if (!expiries.length) return null;
    // Added again after an earlier expiry, with a retry between: "Retry all" put the id Redis
    // left dangling back in a live state, and that stale entry runs whatever job holds the id
    // later, even one given an expiry of its own once it finished (README "Expiring keys",
    // its limit).
    const readdAt = this.traffic.readds.get(`${q.base}:${id}`);
    const before = readdAt === undefined ? [] : expiries.filter((e) => e.at < readdAt);
    if (before.length && this.traffic.retriedAfter(q, Math.max(...before.map((e) => e.at))) !== null) {
      return 'a retry after a ttl expired its job put the dangling id back in a live state, and the id was added again (README, "Expiring keys": its limit)';
    }
    // Added again while the expired job's id still sat in `completed` or `failed` (Redis
    // deletes keys, not ids; the next sweep drops the id), and lost with no bullsweep action
    // naming the id since: BullMQ's own removal through that entry (`removeOnComplete` or
    // `removeOnFail` with a count, `clean`) deletes whatever hash the id names, the new job's.
    // README "Expiring keys", its limit.
    const overDangling = this.traffic.readdsOverDangling.get(`${q.base}:${id}`);
    if (overDangling !== undefined && overDangling >= Math.max(...expiries.map((e) => e.at))
      && !this.audit.mentioning(q.base, id).some((e) => e.at >= overDangling)) {
      return 'added again while its expired job\'s id still sat in a finished set, where BullMQ\'s own removal reaches the new job (README, "Expiring keys": its limit)';
    }
    const since = Math.max(...expiries.map((e) => e.at));
    const retried = this.traffic.retriedAfter(q, since);
    if (retried === null) return null;
    // Added again after the last expiry bullsweep gave the id (so bullsweep gave the new job
    // none: break 2 would show an expiry after the add), with a retry since: "Retry all" put
    // the id Redis left dangling back in a live state, and a worker took that stale entry.
    // README "Expiring keys", its limit; no daemon closes it (the watch ends expiries, and
    // dangling ids go at the queue's next sweep).
    if (this.traffic.readdedAfter(q, id, since)) {
      return 'added again after a ttl expired its job, and a retry put the dangling id back in a live state (README, "Expiring keys": its limit)';
    }
    const daemon = this.sweeps.daemonSince;
    if (daemon !== null && daemon <= retried - DAEMON_BEFORE_MS && Date.now() - retried >= RETRY_BEFORE_MS) return null;
    return daemon === null || daemon > retried - DAEMON_BEFORE_MS
      ? 'retried while no daemon watched the queue, after a ttl gave it an expiry (README, "Expiring keys": what remains)'
      : 'retried less than a few seconds before it was found lost, after a ttl gave it an expiry (README, "Expiring keys": what remains)';
  }
}

module.exports = { Losses };
