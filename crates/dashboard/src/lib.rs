//! The web dashboard `bullsweep daemon --dashboard` serves next to `/metrics`: server-rendered
//! pages (overview, effectiveness, policies, audit, archive, erasure, sweep errors) over the same
//! `ops` functions as the command line, behind the tokens of `--dashboard-tokens`.
//!
//! Every request is authenticated ([`auth`]); every action is a POST carrying the caller's
//! CSRF token, allowed by its role, and audited with its name; a tenant token sees only its
//! tenant's queues, events and archive.
#![deny(missing_docs)]

mod actions;
mod api;
mod assets;
mod auth;
mod charts;
mod format;
mod layout;
mod links;
mod pages;
mod scope;

use auth::{Auth, COOKIE, Caller, SESSION_SECS, SessionKey};
pub use auth::{TOKEN_LOGGED, TokensFrom};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::{Conn, Target};
use bullsweep_core::daemon::http::{Handler, Request, Response};
use bullsweep_core::ops;
use bullsweep_core::{Error, ErrorKind};
use bullsweep_policy::{PolicySet, TokenSet};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// How long a session key read from Redis is used before it is read again: a deleted key
/// (a rotation) ends every replica's sessions within this time.
const SHARED_KEY_FOR: Duration = Duration::from_secs(60);

/// How long a page may take: past it (Redis stalled, a script running long) the caller gets
/// a 504 page saying so instead of a browser left waiting. Actions (POST) run to their end:
/// an erasure or a sweep cut in the middle would leave its receipt or audit unwritten.
const PAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the dashboard serves and from where.
pub struct DashboardConfig {
    /// The Redis the daemon governs.
    pub target: Target,
    /// The policy file (read again for every page, so a reload shows at once).
    pub config: PathBuf,
    /// The environment in force.
    pub env: Option<String>,
    /// Who may sign in.
    pub tokens: TokenSet,
    /// Where `tokens` come from, for the sign-in page.
    pub tokens_from: TokensFrom,
    /// The secret sessions are signed with (`--dashboard-secret-file`,
    /// `BULLSWEEP_DASHBOARD_SECRET`); `None`: the one kept in Redis, made by the first replica.
    pub secret: Option<String>,
}

/// Where the session key comes from.
enum KeySource {
    /// A secret given to this process.
    Given(SessionKey),
    /// The secret in Redis, as last read and when.
    Shared(tokio::sync::Mutex<Option<(SessionKey, Instant)>>),
}

/// The dashboard, answering every path the daemon does not.
pub struct Dashboard {
    auth: Auth,
    tokens_from: TokensFrom,
    key: KeySource,
    target: Target,
    config: PathBuf,
    env: Option<String>,
    con: tokio::sync::Mutex<Option<Conn>>,
    measures: std::sync::Mutex<Option<pages::overview::Measures>>,
}

/// What a page or action is given: the caller, the policy file in force and a connection.
pub(crate) struct Ctx<'a> {
    /// Who asks.
    pub caller: &'a Caller,
    /// The policy file, as read for this request.
    pub set: PolicySet,
    /// Its text, the one `set` was compiled from, for the policies page.
    pub policy_text: String,
    /// The environment in force.
    pub env: Option<String>,
    /// Redis: read-only for a GET.
    pub con: Conn,
    /// Redis's URL, for messages.
    pub url: String,
    /// The policy file's path.
    pub config: &'a std::path::Path,
    /// The overview's last measures, shared by every caller.
    pub measures: &'a std::sync::Mutex<Option<pages::overview::Measures>>,
}

impl Dashboard {
    /// A dashboard over `cfg`.
    pub fn new(cfg: DashboardConfig) -> Self {
        Dashboard {
            auth: Auth::new(cfg.tokens),
            tokens_from: cfg.tokens_from,
            key: match cfg.secret {
                Some(secret) => KeySource::Given(SessionKey::from_secret(secret.as_bytes())),
                None => KeySource::Shared(tokio::sync::Mutex::new(None)),
            },
            target: cfg.target,
            config: cfg.config,
            env: cfg.env,
            con: tokio::sync::Mutex::new(None),
            measures: std::sync::Mutex::new(None),
        }
    }

    async fn connection(&self) -> Result<Conn, Error> {
        let mut held = self.con.lock().await;
        if let Some(con) = held.as_ref() {
            return Ok(con.clone());
        }
        let con = self.target.connect("bullsweep-dashboard").await?;
        *held = Some(con.clone());
        Ok(con)
    }

    /// The key sessions are signed with: the given secret's, or the one in Redis (read again
    /// after [`SHARED_KEY_FOR`]).
    async fn session_key(&self) -> Result<SessionKey, Error> {
        let held = match &self.key {
            KeySource::Given(key) => return Ok(key.clone()),
            KeySource::Shared(held) => held,
        };
        let mut held = held.lock().await;
        if let Some((key, at)) = held.as_ref()
            && at.elapsed() < SHARED_KEY_FOR
        {
            return Ok(key.clone());
        }
        let mut con = self.connection().await?;
        let secret = match ops::secret::shared_session_secret(&mut con, self.target.url()).await {
            Ok(secret) => secret,
            Err(e) => {
                *self.con.lock().await = None;
                return Err(e);
            }
        };
        let key = SessionKey::from_secret(secret.as_bytes());
        *held = Some((key.clone(), Instant::now()));
        Ok(key)
    }

    /// The session key if it is at hand without waiting: the given secret's, or the one read
    /// from Redis while it is fresh; `None` while another task holds it or it is stale.
    fn cached_session_key(&self) -> Option<SessionKey> {
        match &self.key {
            KeySource::Given(key) => Some(key.clone()),
            KeySource::Shared(held) => held
                .try_lock()
                .ok()
                .and_then(|held| held.as_ref().cloned())
                .filter(|(_, at)| at.elapsed() < SHARED_KEY_FOR)
                .map(|(key, _)| key),
        }
    }

    /// [`Self::answer`], a GET bounded by [`PAGE_TIMEOUT`]: past it, the connection (which may
    /// be stalled) is dropped for the next request and a 504 page (a JSON error under
    /// `/api/`) says what happened.
    async fn answer_within(&self, req: Request) -> Response {
        if req.method != "GET" {
            return self.answer(req).await;
        }
        let path = req.path.clone();
        match tokio::time::timeout(PAGE_TIMEOUT, self.answer(req)).await {
            Ok(r) => r,
            Err(_) => {
                if let Ok(mut held) = self.con.try_lock() {
                    *held = None;
                }
                bullsweep_base::log::log_repeated(
                    "dashboard-timeout",
                    "error",
                    &format!(
                        "dashboard: {path} took over {} s; Redis did not answer in time",
                        PAGE_TIMEOUT.as_secs()
                    ),
                );
                if path.starts_with("/api/") {
                    let message = format!(
                        "Redis did not answer within {} s; the request was stopped",
                        PAGE_TIMEOUT.as_secs()
                    );
                    return api::error(504, &message);
                }
                layout::html(504, layout::timed_out(&path, PAGE_TIMEOUT.as_secs()))
            }
        }
    }

    async fn answer(&self, req: Request) -> Response {
        if let Some(asset) = assets::serve(&req.path) {
            return asset;
        }
        let now_s = now_ms() / 1000;
        if req.path.starts_with("/api/") {
            return self.api(req).await;
        }
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/login") => return layout::html(200, layout::login(None, self.tokens_from)),
            ("POST", "/login") => {
                if let Err(refused) = same_origin(&req) {
                    return refused;
                }
                return match self.session_key().await {
                    Ok(key) => self.login(&key, &req, now_s),
                    Err(e) => self.unavailable(e),
                };
            }
            _ => {}
        }
        let key = match self.session_key().await {
            Ok(key) => key,
            Err(e) => return self.unavailable(e),
        };
        let Some(caller) = self.auth.caller(
            &key,
            req.header("authorization"),
            req.header("cookie"),
            now_s,
        ) else {
            let page = layout::login(
                Some("Sign in with a dashboard token to see this page."),
                self.tokens_from,
            );
            return layout::html(401, page).with("www-authenticate", "Bearer realm=\"bullsweep\"");
        };
        if req.method == "POST" {
            if let Err(refused) = check_post(&req, &caller) {
                return refused;
            }
            if req.path == "/logout" {
                return Response::text(303, "signed out\n")
                    .with("location", "/login")
                    .with(
                        "set-cookie",
                        format!("{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"),
                    );
            }
        } else if req.method != "GET" {
            return Response::text(405, "only GET and POST\n");
        }
        let ctx = match self.context(&caller, &req.method).await {
            Ok(ctx) => ctx,
            Err(e) => {
                bullsweep_base::log::log_repeated(
                    "dashboard-context",
                    "error",
                    &format!("dashboard: {}", e.clone().with_hint_inline()),
                );
                return error_page(&caller, &e, true);
            }
        };
        let result = match req.method.as_str() {
            "POST" => actions::route(ctx, &req).await,
            _ => pages::route(ctx, &req).await,
        };
        match result {
            Ok(r) => r,
            Err(e) => {
                if e.kind != ErrorKind::Config {
                    *self.con.lock().await = None;
                }
                error_page(&caller, &e, false)
            }
        }
    }

    /// A request under `/api/`: the OpenAPI document for anybody, the rest for a bearer
    /// token only (never a session cookie, so no CSRF token is needed), answered in JSON.
    /// Nothing but the token is looked at before the caller is known.
    async fn api(&self, req: Request) -> Response {
        if req.path == api::OPENAPI_PATH {
            return match req.method.as_str() {
                "GET" => Response::new(200, "application/json", api::OPENAPI),
                _ => api::error(405, "only GET").with("allow", "GET"),
            };
        }
        let presented = req
            .header("authorization")
            .and_then(|a| a.strip_prefix("Bearer "));
        let Some(token) = presented.and_then(|p| self.auth.login(p)) else {
            return api::error(401, "send a dashboard token: Authorization: Bearer <token>")
                .with("www-authenticate", "Bearer realm=\"bullsweep\"");
        };
        let caller = Caller {
            token: token.clone(),
            csrf: String::new(),
        };
        let tenant_view = caller.token.tenant.is_some();
        let ctx = match self.context(&caller, &req.method).await {
            Ok(ctx) => ctx,
            Err(e) => return api::unavailable(&e, tenant_view),
        };
        match api::route(ctx, &req).await {
            Ok(r) => r,
            Err(e) => {
                if e.kind != ErrorKind::Config {
                    *self.con.lock().await = None;
                }
                api::failure(&e, tenant_view)
            }
        }
    }

    /// What a request of `method` by `caller` is given: a GET reads, so its connection is
    /// read-only (a command that could change data is refused before it is sent); only a
    /// POST (an action, with its permission checked) may change anything.
    async fn context<'a>(&'a self, caller: &'a Caller, method: &str) -> Result<Ctx<'a>, Error> {
        let (set, policy_text) = ops::read_policy_file(&self.config)?;
        let con = match method {
            "POST" => self.connection().await?,
            _ => self.connection().await?.read_only(),
        };
        Ok(Ctx {
            caller,
            set,
            policy_text,
            env: self.env.clone(),
            con,
            url: self.target.url().to_string(),
            config: &self.config,
            measures: &self.measures,
        })
    }

    fn login(&self, key: &SessionKey, req: &Request, now_s: i64) -> Response {
        let form = req.form();
        let presented = bullsweep_core::daemon::http::first(&form, "token").unwrap_or_default();
        match self.auth.login(presented) {
            Some(token) => Response::text(303, "signed in\n")
                .with("location", "/")
                .with(
                    "set-cookie",
                    format!(
                        "{COOKIE}={}; Path=/; Max-Age={SESSION_SECS}; HttpOnly; SameSite=Strict",
                        Auth::session(key, token, now_s)
                    ),
                ),
            None => layout::html(
                401,
                layout::login(
                    Some(layout::wrong_token(self.tokens_from)),
                    self.tokens_from,
                ),
            ),
        }
    }

    /// 503 while the session key cannot be read: nobody can be told apart, so nothing is
    /// shown but that; the cause goes to the log (once a minute while it lasts).
    fn unavailable(&self, e: Error) -> Response {
        bullsweep_base::log::log_repeated(
            "dashboard-session-key",
            "error",
            &format!("dashboard: no session key: {}", e.with_hint_inline()),
        );
        layout::html(
            503,
            layout::login(
                Some(
                    "The dashboard cannot check sessions now (Redis is unreachable or did not answer in time); try again shortly.",
                ),
                self.tokens_from,
            ),
        )
    }
}

impl Handler for Dashboard {
    fn handle<'a>(&'a self, req: Request) -> Pin<Box<dyn Future<Output = Response> + 'a>> {
        Box::pin(async move { layout::secure(self.answer_within(req).await) })
    }

    /// The metrics name every tenant's queues: only a token that sees every tenant reads them.
    fn metrics_access(&self, req: &Request) -> Result<(), Response> {
        let now_s = now_ms() / 1000;
        let authorization = req.header("authorization");
        // The tenant of the caller, if it is one: a session needs the key at hand without
        // waiting (this runs on the `http` thread); a bearer token needs no key.
        let tenant = match self.cached_session_key() {
            Some(key) => self
                .auth
                .caller(&key, authorization, req.header("cookie"), now_s)
                .map(|caller| caller.token.tenant),
            None => authorization
                .and_then(|a| a.strip_prefix("Bearer "))
                .and_then(|presented| self.auth.login(presented))
                .map(|token| token.tenant.clone()),
        };
        match tenant {
            None => Err(Response::text(
                401,
                "the metrics name every tenant's queues: send a dashboard token (Authorization: Bearer), or scrape --metrics-listen\n",
            )
            .with("www-authenticate", "Bearer realm=\"bullsweep\"")),
            Some(Some(_)) => Err(Response::text(
                403,
                "the metrics name every tenant's queues: a tenant's token may not read them\n",
            )),
            Some(None) => Ok(()),
        }
    }
}

/// A POST must come from this origin when the browser says where it comes from.
fn same_origin(req: &Request) -> Result<(), Response> {
    if let (Some(origin), Some(host)) = (req.header("origin"), req.header("host")) {
        let from = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        if from != host {
            return Err(Response::text(
                403,
                "refused: the request comes from another origin\n",
            ));
        }
    }
    Ok(())
}

/// A POST must carry the caller's CSRF token, and come from this origin.
fn check_post(req: &Request, caller: &Caller) -> Result<(), Response> {
    same_origin(req)?;
    let form = req.form();
    let sent = bullsweep_core::daemon::http::first(&form, "csrf").unwrap_or_default();
    if !auth::same(sent, &caller.csrf) {
        return Err(Response::text(
            403,
            "refused: the form's CSRF token is missing or wrong; reload the page\n",
        ));
    }
    Ok(())
}

/// A page saying what went wrong and what to try: 400 for what the request asked (a bad
/// filter, an erasure without a subject), 500 for the rest. A hint may name what the whole
/// database and policy file hold (every tenant, another tenant's key bases: "did you mean
/// `bull:globex:mail`"), so a token with a tenant is shown the message alone, as
/// [`scope::told`] words it (`reading_policy`: the policy file in force could not be read).
fn error_page(caller: &Caller, e: &Error, reading_policy: bool) -> Response {
    let status = if e.kind == ErrorKind::Config {
        400
    } else {
        500
    };
    let tenant_view = caller.token.tenant.is_some();
    let hint = e.hint.as_ref().filter(|_| !tenant_view);
    let message = scope::told(e, tenant_view, reading_policy);
    let body = maud::html! {
        p.notice.bad role="alert" { (message) }
        @if let Some(hint) = hint { p { (hint) } }
    };
    layout::html(
        status,
        layout::page("Something went wrong", "", caller, None, body),
    )
}
