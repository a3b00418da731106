//! Where a bench's databases are, on the private PostgreSQL it starts.

/// The URL of database `db` on the server of `admin_url` (whose path is `/postgres`).
pub(crate) fn db_url(admin_url: &str, db: &str) -> String {
    match admin_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{db}"),
        None => admin_url.to_string(),
    }
}
