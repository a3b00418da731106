//! A private PostgreSQL for the audit-store and source tests: testkit's server (shared with
//! `bench --strategy source`), started or the test fails, with SQL helpers on it.

use std::ops::Deref;

/// testkit's private PostgreSQL, which a test cannot do without.
pub struct PrivatePostgres(bullsweep_testkit::PrivatePostgres);

impl PrivatePostgres {
    pub fn start() -> Self {
        PrivatePostgres(
            bullsweep_testkit::PrivatePostgres::start()
                .expect("a private PostgreSQL starts (apt-get install -y postgresql)"),
        )
    }

    /// Runs SQL as the superuser.
    pub fn admin(&self, sql: &str) -> Result<(), String> {
        run_sql(&self.url("postgres"), sql)
    }
}

impl Deref for PrivatePostgres {
    type Target = bullsweep_testkit::PrivatePostgres;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Runs `f` on a fresh connection as `url`'s user; the server's message on failure.
fn with_client<T>(
    url: &str,
    f: impl AsyncFnOnce(&tokio_postgres::Client) -> Result<T, tokio_postgres::Error>,
) -> Result<T, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        f(&client).await.map_err(|e| {
            e.as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_string())
        })
    })
}

/// Runs SQL statements.
pub fn run_sql(url: &str, sql: &str) -> Result<(), String> {
    with_client(url, async |c| c.batch_execute(sql).await)
}

/// Runs a query; rows as text columns.
pub fn query(url: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    let messages = with_client(url, async |c| c.simple_query(sql).await)?;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
            }
            _ => None,
        })
        .collect())
}
