// A queue's effective policy in one line of text, for bull-board's queue description (which
// bull-board shows as plain text under the queue's name).
'use strict';

const UNITS = [['d', 86400000], ['h', 3600000], ['m', 60000], ['s', 1000]];

/**
 * A duration in ms as bullsweep writes it: `7d`, `1h`, `90s`, `250ms`.
 * @param {number} ms
 * @returns {string}
 */
function duration(ms) {
  for (const [unit, size] of UNITS) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** A field of `explain --json`: `{value, from}`, or a bare value. */
const valueOf = (field) => (field && typeof field === 'object' && 'value' in field ? field.value : field);

/**
 * One state's rule: `completed: remove after 1h, beyond 100`; `delayed: notify after 2d,
 * remind every 1d`.
 * @param {string} state
 * @param {object} rule the state's entry of `explain --json`'s `states`
 * @returns {string}
 */
function ruleText(state, rule) {
  const parts = [];
  const maxAge = valueOf(rule.maxAgeMs);
  const maxCount = valueOf(rule.maxCount);
  const keepFor = valueOf(rule.keepForMs);
  const remindEvery = valueOf(rule.remindEveryMs);
  if (maxAge != null) parts.push(`after ${duration(maxAge)}`);
  if (maxCount != null) parts.push(`beyond ${maxCount}`);
  if (keepFor != null) parts.push(`archive kept ${duration(keepFor)}`);
  if (remindEvery != null) parts.push(`remind every ${duration(remindEvery)}`);
  return `${state}: ${valueOf(rule.action) || 'remove'}${parts.length ? ` ${parts.join(', ')}` : ''}`;
}

/** A schedule of `explain --json`'s `daemon.schedule`. */
function scheduleText(schedule) {
  if (!schedule) return null;
  if (schedule === 'auto') return 'auto';
  if (schedule.everyMs) return `every ${duration(schedule.everyMs)}`;
  if (schedule.cron) return `cron ${schedule.cron}`;
  return null;
}

/**
 * What bull-board shows of the queue: its policy and rules, or why none applies, and the link
 * back to bullsweep's page of the queue.
 * @param {import('./source').QueueView|null} view
 * @param {string|null} error why the policy could not be read
 * @returns {string}
 */
function describe(view, error) {
  if (error) return `bullsweep: policy unknown (${error})`;
  if (!view) return 'bullsweep: this queue is not in view of the token given to @bullsweep/bull-board';
  const link = view.dashboardUrl ? ` · ${view.dashboardUrl}` : '';
  if (view.status === 'tie') {
    return `bullsweep: two policies tie on this queue, so it is left alone and Clean is refused until one is more specific${link}`;
  }
  if (view.status !== 'governed' || !view.effective) {
    const why = view.status === 'unmanaged' ? 'bullsweep does not manage this queue' : 'no policy governs this queue';
    return `bullsweep: ${why}; Clean is bull-board's own${link}`;
  }
  const eff = view.effective;
  const schedule = scheduleText(eff.daemon && eff.daemon.schedule);
  const rules = Object.entries(eff.states || {}).map(([state, rule]) => ruleText(state, rule));
  const head = `bullsweep policy ${view.policy}${schedule ? ` (${schedule})` : ''}`;
  return `${head}: ${rules.join('; ') || 'no state rules'}${link}`;
}

/** How each action's jobs read after their count: `removed`, `noticed`, … */
const DONE = {
  remove: 'removed',
  archive: 'archived',
  anonymize: 'anonymized',
  notify: 'noticed',
  retry: 'retried',
  expire: 'given an expiry',
};

/** `1 job`, `5 jobs`. */
const jobs = (n) => (n === 1 ? '1 job' : `${n} jobs`);

/**
 * What a sweep did, action by action: `removed 5 jobs`, or `noticed 161 jobs, removed 0` (a
 * Clean that removed nothing says so); `acted on 5 jobs` from a daemon that does not split
 * its count.
 * @param {{done: number, doneByAction?: Object<string, number>}} swept the daemon's answer
 * @returns {string}
 */
function doneText(swept) {
  const by = swept.doneByAction;
  if (!by) return `acted on ${jobs(swept.done)}`;
  const counts = Object.entries(by);
  if (!('remove' in by)) counts.push(['remove', 0]);
  return counts
    .map(([action, n], i) => `${DONE[action] || action} ${i === 0 ? jobs(n) : n}`)
    .join(', ');
}

/**
 * What the last Clean of a state did, shown after the queue's description: `last Clean of
 * failed by bea: bullsweep removed 5 jobs under failed: remove beyond 3`, `… bullsweep noticed
 * 161 jobs, removed 0 under failed: notify` (removed 0 jobs when the rule keeps every job the
 * state holds).
 * @param {{state: string, done: number, doneByAction?: Object<string, number>}} swept the
 *   daemon's answer
 * @param {string} user who asked for it
 * @param {import('./source').QueueView|null} view what bullsweep said of the queue
 * @returns {string}
 */
function cleanText(swept, user, view) {
  const states = (view && view.effective && view.effective.states) || {};
  const rule = states[swept.state];
  return `last Clean of ${swept.state} by ${user}: bullsweep ${doneText(swept)}${rule ? ` under ${ruleText(swept.state, rule)}` : ''}`;
}

module.exports = { describe, cleanText, duration };
