// Who is using bull-board: bull-board's route handlers are given the request's params and
// headers but not the request, so the app's authenticated user is taken from the request by a
// middleware (Express) or a hook (Fastify) before bull-board's route runs, and carried to the
// adapter's `clean` call in an AsyncLocalStorage.
'use strict';
const { AsyncLocalStorage } = require('node:async_hooks');

/**
 * The user most auth middlewares leave on the request: Passport's and @fastify/jwt's
 * `req.user` (a string, or its `username`, `email`, `name` or `id`), or express-basic-auth's
 * `req.auth.user`.
 * @param {any} req
 * @returns {string|undefined}
 */
function defaultUserOf(req) {
  const user = req.user;
  if (typeof user === 'string') return user;
  if (user && typeof user === 'object') {
    const name = user.username || user.email || user.name || user.id;
    if (name != null) return String(name);
  }
  if (req.auth && typeof req.auth.user === 'string') return req.auth.user;
  return undefined;
}

/** Carries the user from the request to the adapter. */
class UserContext {
  /** @param {(req: any) => string|undefined|Promise<string|undefined>} userOf */
  constructor(userOf) {
    this.userOf = userOf || defaultUserOf;
    this.storage = new AsyncLocalStorage();
  }

  /** The user of the request being handled, if a middleware or hook found one. */
  current() {
    const store = this.storage.getStore();
    return store ? store.user : undefined;
  }

  /**
   * Runs `next` with the user of `req` in context; an error of `userOf` goes to `fail`.
   * @param {any} req
   * @param {() => void} next
   * @param {(e: Error) => void} fail
   */
  enter(req, next, fail) {
    let user;
    try {
      user = this.userOf(req);
    } catch (e) {
      fail(e);
      return;
    }
    if (user && typeof user.then === 'function') {
      user.then((u) => this.storage.run({ user: clean(u) }, next), fail);
    } else {
      this.storage.run({ user: clean(user) }, next);
    }
  }
}

/** A user name as text, or undefined for none. */
function clean(user) {
  if (user == null) return undefined;
  const text = String(user).trim();
  return text === '' ? undefined : text;
}

module.exports = { UserContext, defaultUserOf };
