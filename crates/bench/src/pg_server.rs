//! The private PostgreSQL a PostgreSQL bench starts, with its databases: one `seed` database
//! holding BullMQ's schema and completed jobs (`bench/pg_seed.js`), copied for each contender.

use super::node::node_json;
use bullsweep_core::Error;
use bullsweep_testkit::PrivatePostgres;
use std::path::Path;

/// The server, its `postgres` database's URL, and a session on it.
pub(crate) struct BenchServer {
    _pg: PrivatePostgres,
    /// The URL of its `postgres` database.
    pub admin_url: String,
    admin: tokio_postgres::Client,
}

impl BenchServer {
    /// Starts the server, with `jobs` completed jobs of `bytes` each, made by BullMQ, in its
    /// `seed` database.
    pub(crate) async fn seeded(compat: &Path, jobs: u64, bytes: usize) -> Result<Self, Error> {
        let pg = PrivatePostgres::start()
            .map_err(|e| Error::runtime(format!("cannot start a private PostgreSQL: {e}")))?;
        let admin_url = pg.url("postgres");
        let admin = bullsweep_core::postgres::connect(&admin_url)
            .await
            .map_err(|e| Error::runtime(format!("the bench's PostgreSQL: {e}")))?;
        let server = BenchServer {
            _pg: pg,
            admin_url,
            admin,
        };
        server.sql("CREATE DATABASE seed").await?;
        eprintln!("seeding {jobs} completed jobs with BullMQ");
        let seed = [server.db_url("seed"), jobs.to_string(), bytes.to_string()];
        node_json(
            compat,
            "bench/pg_seed.js",
            &seed.each_ref().map(String::as_str),
        )?;
        Ok(server)
    }

    /// Runs `text` on the `postgres` database.
    pub(crate) async fn sql(&self, text: &str) -> Result<(), Error> {
        self.admin
            .batch_execute(text)
            .await
            .map_err(|e| Error::runtime(format!("{text}: {e}")))
    }

    /// A fresh copy of the seed, named `db`; its URL.
    pub(crate) async fn copy(&self, db: &str) -> Result<String, Error> {
        self.sql(&format!("CREATE DATABASE {db} TEMPLATE seed"))
            .await?;
        Ok(self.db_url(db))
    }

    /// Drops a copy, whoever is still connected to it.
    pub(crate) async fn drop_copy(&self, db: &str) -> Result<(), Error> {
        self.sql(&format!("DROP DATABASE {db} WITH (FORCE)")).await
    }

    /// The URL of database `db`.
    pub(crate) fn db_url(&self, db: &str) -> String {
        match self.admin_url.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{db}"),
            None => self.admin_url.clone(),
        }
    }
}
