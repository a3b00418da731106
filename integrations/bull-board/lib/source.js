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

/** How long one call to the daemon or the binary may take before it counts as failed. */
const DEFAULT_TIMEOUT_MS = 10000;

/**
 * The daemon's API (`bullsweep daemon --dashboard`): reads with GET /api/v1/queue, sweeps with
 * POST /api/v1/queue/sweep on behalf of a user.
 */
class DaemonSource {
  /**
   * @param {{url: string, token: string, timeoutMs?: number}} daemon
   * @param {string} dashboardUrl where the daemon's pages are seen by people
   */
  constructor(daemon, dashboardUrl) {
    if (!daemon.url || !daemon.token) throw new TypeError('daemon needs { url, token }');
    this.url = daemon.url.replace(/\/+$/, '');
    this.token = daemon.token;
    this.timeoutMs = daemon.timeoutMs || DEFAULT_TIMEOUT_MS;
    this.dashboardUrl = dashboardUrl.replace(/\/+$/, '');
    this.canSweep = true;
  }

  /** @returns {Promise<{status: number, body: any}>} */
  async call(method, path, headers = {}) {
    let res;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.token}`, accept: 'application/json', ...headers },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new BullsweepError(503, `bullsweep at ${this.url} did not answer: ${e.message}`);
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
   * One bounded, audited sweep of `key` under its policy, on behalf of `user`; null when the
   * queue is not governed (409), so there is nothing to sweep by.
   * @param {string} key
   * @param {string} user
   * @returns {Promise<{done: number}|null>}
   */
  async sweep(key, user) {
    const { status, body } = await this.call('POST', `/api/v1/queue/sweep?key=${encodeURIComponent(key)}`,
      { 'x-bullsweep-on-behalf-of': user });
    if (status === 409) return null;
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
        if (err) {
          reject(new BullsweepError(503, `bullsweep explain failed: ${(stderr || err.message).trim()}`));
          return;
        }
        let effective;
        try {
          effective = JSON.parse(stdout);
        } catch (e) {
          reject(new BullsweepError(502, `bullsweep explain printed no JSON: ${e.message}`));
          return;
        }
        resolve({
          key,
          status: effective.policy ? 'governed' : 'uncovered',
          policy: effective.policy || null,
          effective: effective.policy ? effective : null,
          dashboardUrl: this.dashboardUrl ? `${this.dashboardUrl}/queue?key=${encodeURIComponent(key)}` : null,
        });
      });
    });
  }
}

module.exports = { BullsweepError, DaemonSource, ExplainSource };
