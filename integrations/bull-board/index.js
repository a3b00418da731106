// @bullsweep/bull-board: bullsweep's governance inside bull-board.
// - Each queue's description in bull-board shows its effective bullsweep policy (or that none
//   applies) and the address of its page in bullsweep's dashboard; each job links there too.
// - On a queue a bullsweep policy governs, bull-board's "Clean" of a state (which calls
//   `Queue.clean(grace, Number.MAX_SAFE_INTEGER, status)`: one unbounded call) becomes one
//   bounded, audited bullsweep sweep of that state alone, under the policy's rule for it, on
//   behalf of the signed-in user, or is blocked; a state the policy has no rule for is
//   refused, and nothing is done. Queues no policy governs keep bull-board's own Clean.
// The app's bull-board adapters are given to `adapt`; nothing of bull-board is required here,
// so the app's own bull-board version is used.
'use strict';
const { BullsweepError, DaemonSource, ExplainSource } = require('./lib/source');
const { describe, cleanText } = require('./lib/describe');
const { UserContext, defaultUserOf } = require('./lib/user');

/** How long a queue's description is shown before its policy is read again. */
const DEFAULT_REFRESH_MS = 60000;

/**
 * @typedef {object} Options
 * @property {{url: string, token: string, timeoutMs?: number}} [daemon] the daemon's address
 *   (`--listen` with `--dashboard`) and a dashboard token of role operator (viewer is enough
 *   for `clean: 'block'`)
 * @property {{bin?: string, config: string, args?: string[], timeoutMs?: number}} [explain]
 *   instead of a daemon: the `bullsweep` binary and the policy file, read with
 *   `explain --json` (only `clean: 'block'` then)
 * @property {string} [dashboardUrl] where people open bullsweep's dashboard; default the
 *   daemon's URL
 * @property {'sweep'|'block'} [clean] what Clean does on a governed queue; default `'sweep'`
 * @property {(req: any) => string|undefined|Promise<string|undefined>} [userOf] the signed-in
 *   user of a request (default: `req.user`'s name, or `req.auth.user`)
 * @property {(queue: any) => string} [keyOf] a queue's key base (default: BullMQ's
 *   `qualifiedName`, Bull's `keyPrefix:name`)
 * @property {number} [refreshMs] how long a description is kept; default 60 s
 */

/**
 * The key base of a BullMQ or Bull queue: `<prefix>:<name>`.
 * @param {any} queue
 * @returns {string}
 */
function defaultKeyOf(queue) {
  if (typeof queue.qualifiedName === 'string') return queue.qualifiedName;
  const prefix = queue.keyPrefix || (queue.opts && queue.opts.prefix) || 'bull';
  return `${prefix}:${queue.name}`;
}

/**
 * A character a user name may not hold, as the daemon judges it: control characters (a line
 * break would end the header), and those that do not print or change how the text around
 * them reads (`b\u200bob` would be audited as one reads `bob`).
 */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]/;
/** The longest user name the daemon takes, in characters. */
const USER_MAX = 128;

/**
 * Why `user` cannot be sent to the daemon as it is (a name changed on the way could be
 * audited as another's), or null.
 * @param {string} user
 * @returns {string|null}
 */
function unsendable(user) {
  if (UNPRINTABLE.test(user)) return 'holds a character that does not print or that changes how the name reads';
  const length = [...user.trim()].length;
  if (length > USER_MAX) return `is ${length} characters long (${USER_MAX} at most)`;
  return null;
}

/**
 * A user name as a header value: its UTF-8 bytes, one character each (fetch sends a header's
 * characters as bytes; the daemon reads the bytes as UTF-8).
 * @param {string} user
 */
function headerValue(user) {
  return Buffer.from(user, 'utf8').toString('latin1');
}

/**
 * Creates the integration.
 * @param {Options} options
 */
function bullsweepBoard(options = {}) {
  const mode = options.clean || 'sweep';
  if (mode !== 'sweep' && mode !== 'block') throw new TypeError(`clean must be 'sweep' or 'block', not ${mode}`);
  let source;
  if (options.daemon) {
    source = new DaemonSource(options.daemon, options.dashboardUrl || options.daemon.url);
  } else if (options.explain) {
    source = new ExplainSource(options.explain, options.dashboardUrl);
    if (mode === 'sweep') throw new TypeError("clean: 'sweep' needs a daemon; with explain, use clean: 'block'");
  } else {
    throw new TypeError('give daemon: { url, token } or explain: { bin, config }');
  }
  const users = new UserContext(options.userOf);
  const keyOf = options.keyOf || defaultKeyOf;
  const refreshMs = options.refreshMs || DEFAULT_REFRESH_MS;
  /** @type {Map<any, {key: string, backend: string, text: string, lastClean: string|null, view: any, at: number, pending: Promise<void>|null}>} */
  const queues = new Map();

  /** Reads one adapter's policy again and remakes its description. */
  function refreshOne(entry) {
    if (!entry.pending) {
      entry.pending = source.queue(entry.key, entry.backend)
        .then((view) => { entry.view = view; entry.text = describe(view, null); },
          (e) => { entry.text = describe(null, e.message); })
        .finally(() => { entry.at = Date.now(); entry.pending = null; });
    }
    return entry.pending;
  }

  /**
   * The adapter's `clean` for a governed queue: the daemon's sweep of `status` alone, which
   * resolves with the daemon's answer (`done`: the jobs it acted on; `doneByAction`: by
   * action) and shows it, action by action, in the queue's description; bull-board's own
   * `clean` on a queue no policy governs.
   */
  function governClean(adapter, entry, own) {
    return async function clean(status, graceMs) {
      const view = await source.queue(entry.key, entry.backend);
      if (!view) {
        throw new BullsweepError(403, `bullsweep cannot tell whether it governs ${entry.key} (the token does not see it), so Clean is refused`);
      }
      entry.view = view;
      entry.text = describe(view, null);
      const page = view.dashboardUrl ? ` See ${view.dashboardUrl}` : '';
      if (view.status === 'tie') {
        throw new BullsweepError(409, `two bullsweep policies tie on this queue: Clean is refused until one is more specific.${page}`);
      }
      if (view.status !== 'governed') return own(status, graceMs);
      if (mode === 'block') {
        throw new BullsweepError(409, `bullsweep's policy ${view.policy} governs this queue: Clean is blocked, and its jobs go as the policy says.${page}`);
      }
      const user = users.current();
      if (!user) {
        throw new BullsweepError(401, 'Clean on a queue bullsweep governs is audited with the signed-in user, and bull-board names none (see userOf).');
      }
      const why = unsendable(user);
      if (why) {
        throw new BullsweepError(400, `the signed-in user's name ${why}, so Clean cannot be audited with it; nothing was done`);
      }
      // The daemon sweeps this state alone, under the policy's rule for it; a state the
      // policy has no rule for is refused (409) and nothing is done.
      const swept = await source.sweep(entry.key, headerValue(user), status);
      // Not governed any more (the policy file changed since it was read): bull-board's own.
      if (!swept) return own(status, graceMs);
      entry.lastClean = cleanText(swept, user, view);
      return swept;
    };
  }

  return {
    /**
     * Governs a bull-board queue adapter (BullMQAdapter, BullAdapter): its description, its
     * jobs' link to bullsweep, its Clean. Returns the same adapter.
     * @template T
     * @param {T} adapter
     * @returns {T}
     */
    adapt(adapter) {
      const queue = adapter.queue;
      const entry = {
        key: keyOf(queue),
        backend: adapter.type === 'bull' ? 'bull' : 'bullmq',
        text: 'bullsweep: reading the policy…',
        lastClean: null,
        view: null,
        at: 0,
        pending: null,
      };
      queues.set(adapter, entry);
      const own = adapter.getDescription.bind(adapter);
      adapter.getDescription = () => {
        if (Date.now() - entry.at > refreshMs) refreshOne(entry);
        const mine = own();
        const text = entry.lastClean ? `${entry.text} · ${entry.lastClean}` : entry.text;
        return mine ? `${mine} · ${text}` : text;
      };
      if (typeof adapter.externalJobUrl !== 'function') {
        adapter.externalJobUrl = () => (entry.view && entry.view.dashboardUrl
          ? { href: entry.view.dashboardUrl, displayText: 'bullsweep' }
          : undefined);
      }
      adapter.clean = governClean(adapter, entry, adapter.clean.bind(adapter));
      refreshOne(entry);
      return adapter;
    },

    /** Reads every adapted queue's policy now; resolves when all are read. */
    async refresh() {
      await Promise.all([...queues.values()].map((entry) => { entry.at = 0; return refreshOne(entry); }));
    },

    /** What bullsweep said of an adapted queue when last asked (null before the first answer). */
    viewOf(adapter) {
      const entry = queues.get(adapter);
      return entry ? entry.view : null;
    },

    /**
     * Express middleware, mounted before bull-board's router on the same path (after the
     * app's authentication): it finds the request's user for Clean's audit.
     */
    express() {
      return (req, _res, next) => users.enter(req, () => next(), next);
    },

    /**
     * A Fastify `preHandler` hook (it runs after the body is read, just before bull-board's
     * route): `app.addHook('preHandler', board.fastify())`.
     */
    fastify() {
      return (request, _reply, done) => users.enter(request, () => done(), done);
    },
  };
}

module.exports = { bullsweepBoard, defaultUserOf, defaultKeyOf, BullsweepError };
