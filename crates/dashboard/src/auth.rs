//! Who is asking: a bearer token (`Authorization: Bearer …`) or the session cookie the login
//! form gives for one, checked on every request; and the CSRF token every form carries.
//!
//! A session cookie is `<name>.<expiry>.<mac>`: the token's name, when the session ends (s
//! since the epoch) and an HMAC-SHA-256 of both under a key derived from the token file, so
//! that every replica reading the same file accepts it, and a token removed from the file
//! ends its sessions. The CSRF token is an HMAC of the session's name and expiry (or of the
//! bearer token's name) under the same key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bullsweep_policy::{Token, TokenSet};
use sha2::{Digest, Sha256};

/// The session cookie's name.
pub const COOKIE: &str = "bullsweep_session";
/// How long a session lasts.
pub const SESSION_SECS: i64 = 12 * 3600;

/// The tokens, and the key sessions and CSRF tokens are signed with.
pub struct Auth {
    tokens: TokenSet,
    key: [u8; 32],
}

/// The caller of one request.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The token it presented.
    pub token: Token,
    /// The CSRF token its forms must carry.
    pub csrf: String,
}

impl Auth {
    /// Signs with a key derived from every token's digest.
    pub fn new(tokens: TokenSet) -> Self {
        let key =
            Sha256::digest(format!("bullsweep-dashboard-v1\n{}", tokens.fingerprint())).into();
        Auth { tokens, key }
    }

    /// The caller, from the bearer token or the session cookie; `None` for neither (or a
    /// bad or expired one).
    pub fn caller(
        &self,
        authorization: Option<&str>,
        cookie: Option<&str>,
        now_s: i64,
    ) -> Option<Caller> {
        if let Some(presented) = authorization.and_then(|a| a.strip_prefix("Bearer ")) {
            let token = self.tokens.authenticate(presented.trim())?.clone();
            let csrf = self.mac(&format!("csrf\n{}\nbearer", token.name));
            return Some(Caller { token, csrf });
        }
        let value = cookie?
            .split(';')
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == COOKIE)?
            .1;
        let (name_b64, rest) = value.split_once('.')?;
        let (expiry, mac) = rest.split_once('.')?;
        let name = String::from_utf8(URL_SAFE_NO_PAD.decode(name_b64).ok()?).ok()?;
        let expires: i64 = expiry.parse().ok()?;
        if expires <= now_s || !same(&self.mac(&format!("session\n{name}\n{expires}")), mac) {
            return None;
        }
        let token = self.tokens.tokens.iter().find(|t| t.name == name)?.clone();
        let csrf = self.mac(&format!("csrf\n{name}\n{expires}"));
        Some(Caller { token, csrf })
    }

    /// The token whose secret is `presented`, for the login form.
    pub fn login(&self, presented: &str) -> Option<&Token> {
        self.tokens.authenticate(presented.trim())
    }

    /// A session cookie's value for `token`, valid from `now_s` for [`SESSION_SECS`].
    pub fn session(&self, token: &Token, now_s: i64) -> String {
        let expires = now_s + SESSION_SECS;
        let mac = self.mac(&format!("session\n{}\n{expires}", token.name));
        format!(
            "{}.{expires}.{mac}",
            URL_SAFE_NO_PAD.encode(token.name.as_bytes())
        )
    }

    fn mac(&self, message: &str) -> String {
        URL_SAFE_NO_PAD.encode(hmac_sha256(&self.key, message.as_bytes()))
    }
}

/// Whether two texts are equal, compared in time that does not depend on where they differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key` (at most 64 bytes).
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        let file = "tokens:\n  - name: alice\n    token: s3cret\n    role: viewer\n";
        Auth::new(bullsweep_policy::compile_tokens("t.yaml", file).expect("valid"))
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2_shape() {
        // RFC 4231 test case 2 uses a 4-byte key; ours are 32 bytes, zero-padded the same way.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let mac = hmac_sha256(&key, b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_session_is_accepted_until_it_expires_and_not_when_altered() {
        let a = auth();
        let token = a.login("s3cret").expect("token").clone();
        let cookie = format!("x=1; {COOKIE}={}", a.session(&token, 1_000));
        assert_eq!(
            a.caller(None, Some(&cookie), 1_001).map(|c| c.token.name),
            Some("alice".into())
        );
        assert!(
            a.caller(None, Some(&cookie), 1_000 + SESSION_SECS)
                .is_none()
        );
        let forged = cookie.replace(".4", ".5");
        assert!(forged == cookie || a.caller(None, Some(&forged), 1_001).is_none());
        let tampered = format!(
            "{COOKIE}={}.99999999.{}",
            URL_SAFE_NO_PAD.encode("bob"),
            "x"
        );
        assert!(a.caller(None, Some(&tampered), 1_001).is_none());
    }

    #[test]
    fn bearer_tokens_are_checked() {
        let a = auth();
        assert!(a.caller(Some("Bearer s3cret"), None, 0).is_some());
        assert!(a.caller(Some("Bearer wrong"), None, 0).is_none());
        assert!(a.caller(None, None, 0).is_none());
    }
}
