//! The longest open transaction of a PostgreSQL bench's contender ([`Sampler`]), sampled from
//! `pg_stat_activity` every 2 ms, with the statement it was running then.

use bullsweep_core::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Samples the longest open transaction of a client (not autovacuum's) in one database, and
/// the statement it was running then.
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    longest: Arc<Mutex<(u64, String)>>,
}

impl Sampler {
    /// Starts sampling database `db` through the server's `admin_url`.
    pub(crate) async fn start(admin_url: &str, db: &str) -> Result<Self, Error> {
        let client = bullsweep_core::postgres::connect(admin_url)
            .await
            .map_err(|e| Error::runtime(format!("{e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let longest = Arc::new(Mutex::new((0, String::new())));
        let (s, l, db) = (stop.clone(), longest.clone(), db.to_string());
        tokio::spawn(async move {
            let q = "SELECT (extract(epoch FROM clock_timestamp() - xact_start) * 1e6)::bigint, left(query, 160) \
                     FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' \
                     AND application_name <> 'bench-load' \
                     AND xact_start IS NOT NULL AND state <> 'idle' ORDER BY xact_start LIMIT 1";
            while !s.load(Ordering::Relaxed) {
                if let Ok(Some(row)) = client.query_opt(q, &[&db]).await {
                    let us = row.get::<_, i64>(0).max(0) as u64;
                    if let Ok(mut l) = l.lock()
                        && us > l.0
                    {
                        *l = (us, row.get(1));
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        });
        Ok(Sampler { stop, longest })
    }

    /// Stops sampling; the longest transaction seen (ms) and its statement then.
    pub(crate) fn stop(self) -> (f64, String) {
        self.stop.store(true, Ordering::Relaxed);
        let l = self.longest.lock().map(|l| l.clone()).unwrap_or_default();
        (l.0 as f64 / 1_000.0, l.1)
    }
}
