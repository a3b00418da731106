// Where the package learns a queue's policy and sweeps it: the daemon's JSON API, or the
// `bullsweep` binary's `explain --json` (read-only: it cannot sweep).
'use strict';
const { execFile } = require('node:child_process');

/**
 * A queue as bullsweep reports it (the API's Queue object).
 * @typedef {object} QueueView
 * @property {string} key the key base, e.g. `bull:acme:billing`
 * @property {'governed'|'uncovered'|'unmanaged'|'tie'} status
 * @property {string|null} policy the policy that governs it
 * @property {object|null} effective the effective policy as `bullsweep explain --json` prints it
 * @property {string|null} dashboardUrl the queue's dashboard page, absolute when known
 */

/** An error bull-board turns into its answer: `statusCode` is the HTTP status it sends. */
class BullsweepError extends Error {
  /**
   * @param {number} statusCode
   * @param {string} message
   */
  constructor(statusCode, message) {
    super(message);
    this.name = 'BullsweepError';
    this.statusCode = statusCode;
  }
}

/** How long one read from the daemon or the binary may take before it counts as failed. */
const DEFAULT_TIMEOUT_MS = 10000;
/** How long a sweep may take: up to 5 s waiting for the queue's lock, then the sweep. */
const DEFAULT_SWEEP_TIMEOUT_MS = 120000;

/**
 * Logs what went wrong for the app's operators; bull-board's users are told less (an address
 * or a command line may hold credentials).
 * @param {string} what
 * @param {unknown} detail
 */
function logDetail(what, detail) {
  console.error(`@bullsweep/bull-board: ${what}:`, detail);
}

/**
 * The daemon's API (`bullsweep daemon --dashboard`): reads with GET /api/v1/queue, sweeps one
 * state with POST /api/v1/queue/sweep?state= on behalf of a user.
 */
class DaemonSource {
  /**
   * @param {{url: string, token: string, timeoutMs?: number}} daemon
   * @param {string} dashboardUrl where the daemon's pages are seen by people
   */
  constructor(daemon, dashboardUrl) {
    if (!daemon.url || !daemon.token) throw new TypeError('daemon needs { url, token }');
    const parsed = new URL(daemon.url);
    if (parsed.username || parsed.password) {
      throw new TypeError('daemon.url may not hold a user or password: the token is the credential');
    }
    this.url = daemon.url.replace(/\/+$/, '');
    this.token = daemon.token;
    this.timeoutMs = daemon.timeoutMs || DEFAULT_TIMEOUT_MS;
    this.sweepTimeoutMs = daemon.sweepTimeoutMs || DEFAULT_SWEEP_TIMEOUT_MS;
    this.dashboardUrl = dashboardUrl.replace(/\/+$/, '');
    this.canSweep = true;
  }

  /** @returns {Promise<{status: number, body: any}>} */
  async call(method, path, headers = {}, timeoutMs = this.timeoutMs) {
    let res;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.token}`, accept: 'application/json', ...headers },
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      logDetail(`${method} ${this.url}${path}`, e);
      const late = e.name === 'TimeoutError'
        ? `did not answer within ${Math.round(timeoutMs / 1000)} s${method === 'POST' ? ' (a sweep may still be running)' : ''}`
        : 'cannot be reached';
      throw new BullsweepError(503, `bullsweep ${late}; the app's log says more`);
    }
    const text = await res.text();
    let body;
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      body = { error: text.slice(0, 200) };
    }
    return { status: res.status, body };
  }

  /**
   * The queue of key base `key`, with its effective policy; null when the token does not see
   * it.
   * @param {string} key
   * @returns {Promise<QueueView|null>}
   */
  async queue(key) {
    const { status, body } = await this.call('GET', `/api/v1/queue?key=${encodeURIComponent(key)}`);
    if (status === 404) return this.unmanaged(key);
    if (status !== 200) throw new BullsweepError(502, `bullsweep answered ${status}: ${body.error || ''}`);
    const page = body.dashboardUrl || `/queue?key=${encodeURIComponent(key)}`;
    return { ...body, dashboardUrl: /^https?:/.test(page) ? page : `${this.dashboardUrl}${page}` };
  }

  /**
   * The queue as the list of every queue names it, for one GET /api/v1/queue does not answer:
   * an unmanaged queue (no layout names it) is listed there; null when it is not listed either.
   * @param {string} key
   * @returns {Promise<QueueView|null>}
   */
  async unmanaged(key) {
    const { status, body } = await this.call('GET', '/api/v1/queues');
    if (status !== 200) throw new BullsweepError(502, `bullsweep answered ${status}: ${body.error || ''}`);
    const found = (body.queues || []).find((q) => q.key === key && q.status === 'unmanaged');
    return found ? { ...found, effective: null, dashboardUrl: null } : null;
  }

  /**
   * One bounded, audited sweep of state `state` of `key` under the policy's rule for it, on
   * behalf of `user` (as a header value): the daemon's answer (`done`, the jobs acted on,
   * and `doneByAction`, the same by action);
   * null when the queue is not governed (409), so there is nothing to sweep by. An error,
   * with nothing done, when the policy has no rule for the state (409 naming it), when
   * another sweep holds the queue's lock (423), or when the daemon refuses the request.
   * @param {string} key
   * @param {string} user
   * @param {string} state
   * @returns {Promise<{state: string, done: number, policy: string, report: any}|null>}
   */
  async sweep(key, user, state) {
    const query = `key=${encodeURIComponent(key)}&state=${encodeURIComponent(state)}`;
    const { status, body } = await this.call('POST', `/api/v1/queue/sweep?${query}`,
      { 'x-bullsweep-on-behalf-of': user }, this.sweepTimeoutMs);
    if (status === 409 && body.state) throw new BullsweepError(409, `bullsweep: ${body.error}`);
    if (status === 409) return null;
    if (status === 423) throw new BullsweepError(409, `not swept: ${body.error || 'another sweep holds the queue'}`);
    if (status === 400) throw new BullsweepError(400, `bullsweep refused the Clean: ${body.error || ''}`);
    if (status !== 200) throw new BullsweepError(status === 403 ? 403 : 502, `bullsweep refused the sweep (${status}): ${body.error || ''}`);
    return body;
  }
}

/** The binary: `bullsweep --config FILE [args] explain --json KEY`. It reads; it never sweeps. */
class ExplainSource {
  /**
   * @param {{bin?: string, config: string, args?: string[], timeoutMs?: number}} explain
   * @param {string|undefined} dashboardUrl
   */
  constructor(explain, dashboardUrl) {
    if (!explain.config) throw new TypeError('explain needs { config } (the policy file)');
    this.bin = explain.bin || 'bullsweep';
    this.args = ['--config', explain.config, ...(explain.args || [])];
    this.timeoutMs = explain.timeoutMs || DEFAULT_TIMEOUT_MS;
    this.dashboardUrl = dashboardUrl && dashboardUrl.replace(/\/+$/, '');
    this.canSweep = false;
  }

  /**
   * @param {string} key
   * @param {'bullmq'|'bull'} backend
   * @returns {Promise<QueueView>}
   */
  queue(key, backend) {
    const args = [...this.args, 'explain', '--json', '--backend', backend, key];
    return new Promise((resolve, reject) => {
      execFile(this.bin, args, { timeout: this.timeoutMs }, (err, stdout, stderr) => {
        // A tie exits 2 with its JSON on stdout; any other failure is told by its exit alone
        // (the command line may hold a Redis URL, stderr its host), with the rest in the log.
        let effective;
        try {
          effective = JSON.parse(stdout);
        } catch {
          effective = null;
        }
        if (!effective || typeof effective !== 'object') {
          logDetail(`${this.bin} explain ${key}`, (stderr || (err && err.message) || 'no JSON').trim());
          const how = err && err.killed ? 'timed out' : `failed${err && err.code !== undefined ? ` (exit ${err.code})` : ''}`;
          reject(new BullsweepError(503, `bullsweep explain ${how}; the app's log says why`));
          return;
        }
        const tie = Array.isArray(effective.tie);
        resolve({
          key,
          status: tie ? 'tie' : effective.policy ? 'governed' : 'uncovered',
          policy: effective.policy || null,
          effective: effective.policy ? effective : null,
          dashboardUrl: this.dashboardUrl ? `${this.dashboardUrl}/queue?key=${encodeURIComponent(key)}` : null,
        });
      });
    });
  }
}

module.exports = { BullsweepError, DaemonSource, ExplainSource };
