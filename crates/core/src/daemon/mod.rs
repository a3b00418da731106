//! `bullsweep daemon`: governs queues around the clock. Each queue is swept on its policy's
//! schedule, from a `lastRunAt` kept in Redis (so restarts and replicas neither reset nor
//! double it), under a per-queue lock; queues with `mode: event` or `both` are also served
//! from their events stream (see `events`). A failed run leaves a retry record with
//! exponential backoff. SIGTERM finishes the batch in progress, releases the locks and exits
//! 0; SIGHUP reloads the policy file, keeping the old one when the new one is invalid.
//!
//! The daemon is a few tasks, each a struct that owns its state, all stopped by one
//! cancellation token ([`Cancel`]): the signals (`signals`), the schedule with discovery and
//! the health tick (`schedule`, `discovery`, `health`), the events reader (`events`), the
//! expiry watch (`expiry_watch`), and the HTTP listeners (`listeners`). The first three run
//! on the caller's runtime; the expiry watch has a thread of its own, so that nothing the
//! schedule does holds it back, and so have the listeners, for the reason [`http`] gives.

mod config;
mod descriptors;
mod discovery;
mod doctor_run;
mod doctor_series;
mod due_round;
mod events;
mod events_bull;
mod events_held;
mod events_read;
mod events_shared;
mod expiry_watch;
mod exposition;
mod health;
pub mod http;
mod listeners;
pub mod metrics;
mod postgres_governor;
mod postgres_metrics;
mod process;
mod queue_labels;
mod queue_run;
mod queue_series;
mod run_observer;
mod scan;
mod schedule;
mod signals;
mod slot;

pub use config::DaemonConfig;

use crate::cancel::Cancel;
use crate::error::Error;
use crate::ops::load_policy_file;
use bullsweep_base::log::log;
use events::EventsReader;
use events_shared::EventShared;
use expiry_watch::ExpiryWatch;
use listeners::Listeners;
use metrics::DaemonMetrics;
use postgres_governor::PostgresGovernor;
use postgres_metrics::PgSweepMetrics;
use process::connect_with_backoff;
use schedule::{Settings, Wiring};
use signals::Signals;
use std::sync::Arc;

/// The schedule task, as `queue_run` extends it.
use schedule::Daemon;
/// A random delay, as `queue_run` adds it.
use slot::jitter;

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(cfg: DaemonConfig) -> Result<(), Error> {
    let set = load_policy_file(&cfg.config)?;
    let mut metrics = DaemonMetrics::default();
    metrics
        .redis_governed
        .store(cfg.redis, std::sync::atomic::Ordering::Relaxed);
    metrics.postgres_up = cfg.postgres.as_ref().map(|_| Arc::default());
    let metrics = Arc::new(metrics);
    let shutdown = Cancel::new();
    let http = Listeners::bind(&cfg)?.serve(&metrics, shutdown.clone())?;
    let (signals, reload) = Signals::install(shutdown.clone())?;
    tokio::spawn(signals.run());
    let postgres = govern_postgres(&cfg, set.clone(), &shutdown, &metrics);
    if !cfg.redis {
        log("info", "daemon started for BullMQ on PostgreSQL");
        postgres.await;
        if let Some(http) = http {
            let _ = tokio::task::spawn_blocking(move || http.join()).await;
        }
        log("info", "stopped");
        return Ok(());
    }

    let Some(mut con) =
        connect_with_backoff(&cfg.target, "bullsweep-daemon", &shutdown, &metrics).await
    else {
        return Ok(());
    };
    // A user who may not write bullsweep's own keys could change nothing safely: say so now.
    crate::ops::access::check_own_keys(&mut con, cfg.target.url(), "governing").await?;
    let owner = format!(
        "{}-{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "bullsweep".into()),
        std::process::id()
    );
    let events = Arc::new(EventShared::default());
    let settings = Settings {
        url: cfg.target.url().to_string(),
        env: cfg.env.clone(),
        config: cfg.config.clone(),
        queue_glob: cfg.queue_glob.clone(),
        discover_every: cfg.discover_every,
        metrics_max_queues: cfg.metrics_max_queues,
        serving: cfg.listen.is_some() || cfg.metrics_listen.is_some(),
        per_primary: !cfg.one_primary_at_a_time,
    };
    let reader = EventsReader::run(
        cfg.target.clone(),
        events.clone(),
        metrics.clone(),
        shutdown.clone(),
        owner.clone(),
    );
    let watch = ExpiryWatch::spawn(
        cfg.target.clone(),
        events.clone(),
        metrics.clone(),
        shutdown.clone(),
        owner.clone(),
    )?;
    let wiring = Wiring {
        shutdown,
        reload,
        events,
        metrics,
    };
    let mut daemon = Daemon::new(settings, set, con, owner, wiring);
    log("info", &format!("daemon started as {}", daemon.runs.owner));
    // The reader stops after its round in progress and releases its locks, the watch (on its
    // thread) after its walk, the schedule after the batch in progress.
    tokio::join!(daemon.run(), reader, watch, postgres);
    daemon.ship_audit().await;
    // The requests being answered finish (the `http` thread ends with the last of them).
    if let Some(http) = http {
        let _ = tokio::task::spawn_blocking(move || http.join()).await;
    }
    log("info", "stopped");
    Ok(())
}

/// The daemon's part for BullMQ on PostgreSQL (`--postgres`), done at once without it.
fn govern_postgres(
    cfg: &DaemonConfig,
    set: bullsweep_policy::PolicySet,
    shutdown: &Cancel,
    metrics: &Arc<DaemonMetrics>,
) -> impl std::future::Future<Output = ()> + use<> {
    let governor = cfg.postgres.clone().map(|target| PostgresGovernor {
        target,
        config: cfg.config.clone(),
        env: cfg.env.clone(),
        queue_glob: cfg.queue_glob.clone(),
        discover_every: cfg.discover_every,
        shutdown: shutdown.clone(),
        up: metrics.postgres_up.clone().unwrap_or_default(),
        metrics: PgSweepMetrics::new(metrics.clone()),
    });
    async move {
        if let Some(governor) = governor {
            governor.run(set).await;
        }
    }
}
