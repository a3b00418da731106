//! `bullsweep daemon`: governs queues around the clock. Each queue is swept on its policy's
//! schedule, from a `lastRunAt` kept in Redis (so restarts and replicas neither reset nor
//! double it), under a per-queue lock; queues with `mode: event` or `both` are also served
//! from their events stream (see [`events`]). A failed run leaves a retry record with
//! exponential backoff. SIGTERM finishes the batch in progress, releases the locks and exits
//! 0; SIGHUP reloads the policy file, keeping the old one when the new one is invalid.

mod descriptors;
mod discovery;
pub mod events;
mod events_read;
mod exposition;
mod health;
pub mod http;
pub mod metrics;
mod process;
mod queue_run;
mod schedule;
mod wait;

use crate::error::Error;
use crate::ops::load_policy_file;
use bullsweep_base::connect::{Conn, Target};
use bullsweep_base::log::log;
use bullsweep_policy::{EffectivePolicy, Millis, NamePattern, PolicySet, QueueId};
use events::EventShared;
use metrics::{DaemonMetrics, QueueLabels};
use process::{connect_with_backoff, listen_for_signals};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use wait::wait_or_shutdown;

/// What the daemon governs and how.
#[derive(Clone)]
pub struct DaemonConfig {
    /// The Redis to govern.
    pub target: Target,
    /// The policy file, read at start and again on SIGHUP.
    pub config: PathBuf,
    /// The environment in force (see `--env`).
    pub env: Option<String>,
    /// Only queues whose name or key base matches this glob.
    pub queue_glob: Option<NamePattern>,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address, and the dashboard with
    /// `pages`.
    pub listen: Option<SocketAddr>,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address too, never the dashboard
    /// and never behind a token.
    pub metrics_listen: Option<SocketAddr>,
    /// Answers the paths other than the daemon's own on `listen` (the dashboard).
    pub pages: Option<Arc<dyn http::Handler>>,
    /// HTTP connections open at most, across both listeners (fewer when the descriptor
    /// limit asks it, see [`descriptors`]).
    pub max_connections: usize,
    /// Above this many governed queues, the smallest share `queue="other"` in the metrics.
    pub metrics_max_queues: usize,
    /// How often to look for new queues.
    pub discover_every: Millis,
}

/// One governed queue and when its next sweep is due.
struct Slot {
    queue: QueueId,
    policy: EffectivePolicy,
    /// Not before this (ms since the epoch), jitter included.
    due_ms: i64,
    /// The interval `schedule: auto` last computed.
    auto: Millis,
    /// A full sweep was asked for (a gap in the events stream, a first read) and is still
    /// owed, whatever the schedule says.
    owed: bool,
    /// When its last sweep succeeded (ms): from Redis at discovery, then from each sweep.
    last_success_ms: Option<i64>,
    /// Jobs by state, from the last count.
    counts: BTreeMap<String, i64>,
    /// Its last measure (see `health`), and when it was taken.
    measured: Option<(Instant, health::Measured)>,
}

/// The daemon's state between ticks.
struct Daemon {
    url: String,
    env: Option<String>,
    queue_glob: Option<NamePattern>,
    config: PathBuf,
    set: PolicySet,
    con: Conn,
    slots: BTreeMap<String, Slot>,
    /// When the last discovery pass ended.
    discovered_at: Option<Instant>,
    discover_every: Duration,
    /// The discovery pass in progress, if any.
    pass: Option<discovery::Pass>,
    /// When the known queues were last re-checked between passes.
    rechecked_at: Instant,
    /// The wait before the next discovery after one failed.
    discover_retry: Duration,
    shutdown: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    wake: Arc<Notify>,
    events: Arc<EventShared>,
    metrics: Arc<DaemonMetrics>,
    owner: String,
    last_ship: Instant,
    /// When the last health tick ran (heartbeat, Redis memory, audit backlog, queue series).
    last_health: Option<Instant>,
    /// The last minute whose history point was written or left to another replica.
    history_minute: i64,
    /// Each primary's evicted keys at the last tick, to count the new ones.
    evicted_seen: BTreeMap<String, u64>,
    /// See [`DaemonConfig::metrics_max_queues`].
    metrics_max_queues: usize,
    /// Whether metrics are served (queues are measured for them only then).
    serving: bool,
    /// The governed queues and their policies as last logged, `None` before the first pass.
    governed: Option<BTreeSet<(String, String)>>,
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(cfg: DaemonConfig) -> Result<(), Error> {
    let set = load_policy_file(&cfg.config)?;
    let url = cfg.target.url().to_string();
    let metrics = Arc::new(DaemonMetrics::default());
    serve_http(&cfg, &metrics)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(Notify::new());
    listen_for_signals(shutdown.clone(), reload.clone(), wake.clone())?;

    let Some(mut con) =
        connect_with_backoff(&cfg.target, "bullsweep-daemon", &shutdown, &metrics).await
    else {
        return Ok(());
    };
    // A user who may not write bullsweep's own keys could change nothing safely: say so now.
    crate::ops::access::check_own_keys(&mut con, &url).await?;
    let owner = format!(
        "{}-{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "bullsweep".into()),
        std::process::id()
    );
    let events = Arc::new(EventShared {
        queues: Mutex::new(Vec::new()),
        sweep_now: Mutex::new(BTreeSet::new()),
        wake: Notify::new(),
    });
    let reader = spawn_events_reader(
        cfg.target.clone(),
        events.clone(),
        metrics.clone(),
        shutdown.clone(),
        owner.clone(),
    )?;
    let mut daemon = Daemon {
        url,
        env: cfg.env.clone(),
        queue_glob: cfg.queue_glob.clone(),
        config: cfg.config.clone(),
        set,
        con,
        slots: BTreeMap::new(),
        discovered_at: None,
        pass: None,
        rechecked_at: Instant::now(),
        discover_every: Duration::from_millis(cfg.discover_every.as_millis()),
        discover_retry: schedule::DISCOVER_RETRY_MIN,
        shutdown: shutdown.clone(),
        reload,
        wake,
        events,
        metrics,
        owner,
        last_ship: Instant::now(),
        last_health: None,
        evicted_seen: BTreeMap::new(),
        history_minute: 0,
        metrics_max_queues: cfg.metrics_max_queues,
        serving: cfg.listen.is_some() || cfg.metrics_listen.is_some(),
        governed: None,
    };
    log("info", &format!("daemon started as {}", daemon.owner));
    daemon.main_loop().await;
    // The reader stops within one XREAD block (half a second).
    let _ = reader.join();
    daemon.ship_audit().await;
    log("info", "stopped");
    Ok(())
}

/// Binds `--listen` and `--metrics-listen` and serves them (see [`http`]). On a listener
/// the dashboard shares off loopback, `/metrics` (every tenant's queue names) needs a token.
fn serve_http(cfg: &DaemonConfig, metrics: &Arc<DaemonMetrics>) -> Result<(), Error> {
    let limit = descriptors::raise_limit();
    let cap = descriptors::connection_cap(cfg.max_connections, limit);
    let bind = |addr: SocketAddr| {
        std::net::TcpListener::bind(addr)
            .map_err(|e| Error::runtime(format!("cannot listen on {addr}: {e}")))
    };
    // The metrics listener keeps a share of its own when the dashboard's listener is served
    // too, so that no client of that one can take the probes' connections.
    let metrics_cap = match cfg.listen {
        Some(_) => http::metrics_share(cap),
        None => cap,
    };
    let listen_cap = match cfg.metrics_listen {
        Some(_) => cap - metrics_cap,
        None => cap,
    };
    let mut listeners = Vec::new();
    if let Some(addr) = cfg.listen {
        let pages = cfg.pages.is_some();
        let metrics_need_token = pages && !addr.ip().is_loopback();
        let what = match (pages, metrics_need_token) {
            (false, _) => "/metrics, /healthz and /readyz",
            (true, false) => "/metrics, /healthz, /readyz and the dashboard",
            (true, true) => "/healthz, /readyz, the dashboard and /metrics (to a token)",
        };
        log("info", &format!("serving {what} on {addr}"));
        listeners.push(http::Listener {
            socket: bind(addr)?,
            pages,
            metrics_need_token,
            cap: listen_cap,
        });
    }
    if let Some(addr) = cfg.metrics_listen {
        log(
            "info",
            &format!("serving /metrics, /healthz and /readyz on {addr}"),
        );
        listeners.push(http::Listener {
            socket: bind(addr)?,
            pages: false,
            metrics_need_token: false,
            cap: metrics_cap,
        });
    }
    if listeners.is_empty() {
        return Ok(());
    }
    let descriptors = limit.map_or(String::new(), |l| format!(" of {l} file descriptors"));
    let split = match (cfg.listen, cfg.metrics_listen) {
        (Some(listen), Some(metrics)) => {
            format!(" ({listen_cap} on {listen}, {metrics_cap} on {metrics})")
        }
        _ => String::new(),
    };
    log(
        "info",
        &format!(
            "http: at most {cap} connections{split}, keeping {} descriptors{descriptors} for the work",
            descriptors::RESERVED
        ),
    );
    let served = metrics.clone();
    http::spawn(
        listeners,
        move |req| metrics::answer(&served, req),
        cfg.pages.clone(),
    )
    .map_err(|e| Error::runtime(format!("cannot serve HTTP: {e}")))
}

/// Runs the events reader on a thread and runtime of its own, with its own connection, so
/// that nothing the main loop does (an audit file's fsync, a long sweep) delays removals.
fn spawn_events_reader(
    target: Target,
    shared: Arc<EventShared>,
    metrics: Arc<DaemonMetrics>,
    shutdown: Arc<AtomicBool>,
    owner: String,
) -> Result<std::thread::JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    log("error", &format!("events: cannot start a runtime: {e}"));
                    return;
                }
            };
            runtime.block_on(async {
                let Some(con) =
                    connect_with_backoff(&target, "bullsweep-events", &shutdown, &metrics).await
                else {
                    return;
                };
                let run_id = format!("daemon-{owner}");
                events::run(target, con, shared, metrics, shutdown, owner, run_id).await;
            });
        })
        .map_err(|e| Error::runtime(format!("cannot start the events reader: {e}")))
}

impl Daemon {
    /// How the metrics label a queue (see [`DaemonMetrics::labels`]).
    fn labels(&self, q: &QueueId) -> QueueLabels {
        self.metrics.labels(&q.base, q.tenant.as_deref())
    }
}

/// A random delay up to `max`.
fn jitter(max: Millis) -> i64 {
    if max.as_millis() == 0 {
        0
    } else {
        fastrand::i64(0..=max.as_millis() as i64)
    }
}
