//! Secrets bullsweep makes: random tokens, and the dashboard's session secret when none is
//! given, kept in Redis ([`DASHBOARD_SECRET`]) so that every replica signs sessions alike.

use super::Conn;
use crate::bullmq::keys::DASHBOARD_SECRET;
use crate::error::Error;
use std::io::Read;

/// Bytes a made secret has (64 hexadecimal digits).
const SECRET_BYTES: usize = 32;

/// The fewest bytes a given secret may have: a shorter one could be guessed offline from one
/// session cookie.
pub const MIN_SECRET_BYTES: usize = 32;

/// 32 random bytes from the system's generator, as hexadecimal digits.
pub fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; SECRET_BYTES];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The session secret every replica shares: the one in Redis, or, when there is none yet, a
/// new random one set only if no other replica set one first (`SET NX`), then read back.
pub async fn shared_session_secret(con: &mut Conn, url: &str) -> Result<String, Error> {
    let fresh = random_hex()
        .map_err(|e| Error::runtime(format!("cannot make a session secret: /dev/urandom: {e}")))?;
    let (secret,): (Option<String>,) = redis::pipe()
        .cmd("SET")
        .arg(DASHBOARD_SECRET)
        .arg(&fresh)
        .arg("NX")
        .ignore()
        .cmd("GET")
        .arg(DASHBOARD_SECRET)
        .query_async(con)
        .await
        .map_err(|e| Error::redis(url, &e))?;
    secret
        .filter(|s| s.len() >= MIN_SECRET_BYTES)
        .ok_or_else(|| {
            Error::runtime(format!(
                "{DASHBOARD_SECRET} holds no usable session secret (fewer than {MIN_SECRET_BYTES} bytes)"
            ))
            .with_hint(format!(
                "delete it (`DEL {DASHBOARD_SECRET}`) and a new one is made, or give --dashboard-secret-file"
            ))
        })
}
