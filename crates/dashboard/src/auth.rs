//! Who is asking: a bearer token (`Authorization: Bearer …`) or the session cookie the login
//! form gives for one, checked on every request; and the CSRF token every form carries.
//!
//! A session cookie is `<name>.<expiry>.<mac>`: the token's name, when the session ends (s
//! since the epoch) and an HMAC-SHA-256 of both and of the token's entry in the file (its
//! digest, role and tenant), under a [`SessionKey`] made from a secret the token file never
//! implies (`--dashboard-secret-file`, `BULLSWEEP_DASHBOARD_SECRET`, or one kept in Redis for
//! every replica). Whoever reads the token file learns nothing that signs a session; a token
//! removed from the file, or given a new secret, role or tenant, ends its sessions. The CSRF
//! token is an HMAC of the session's name and expiry (or of the bearer token's name) under
//! the same key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bullsweep_policy::{Token, TokenSet};
use sha2::{Digest, Sha256};

/// Where the tokens that sign in come from, as the sign-in page tells whoever signs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokensFrom {
    /// The `--dashboard-tokens` file.
    File,
    /// One admin token made for this run (a loopback `--listen` without `--dashboard-tokens`),
    /// written to the daemon's log and nowhere else.
    Log,
}

/// The start of the log line that holds a token of [`TokensFrom::Log`], the token after it.
pub const TOKEN_LOGGED: &str = "dashboard: no --dashboard-tokens, so this run's admin token is";

/// The session cookie's name.
pub const COOKIE: &str = "bullsweep_session";
/// How long a session lasts.
pub const SESSION_SECS: i64 = 12 * 3600;

/// The key sessions and CSRF tokens are signed with.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl SessionKey {
    /// The key of a secret (the bytes of the secret file, the environment variable or the
    /// secret kept in Redis).
    pub fn from_secret(secret: &[u8]) -> Self {
        SessionKey(
            Sha256::new()
                .chain_update(b"bullsweep-dashboard-session-v2\n")
                .chain_update(secret)
                .finalize()
                .into(),
        )
    }

    fn mac(&self, message: &str) -> String {
        URL_SAFE_NO_PAD.encode(hmac_sha256(&self.0, message.as_bytes()))
    }
}

/// The tokens of the file.
pub struct Auth {
    tokens: TokenSet,
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
    /// Checks callers against `tokens`.
    pub fn new(tokens: TokenSet) -> Self {
        Auth { tokens }
    }

    /// The caller, from the bearer token or the session cookie signed under `key`; `None`
    /// for neither (or a bad or expired one).
    pub fn caller(
        &self,
        key: &SessionKey,
        authorization: Option<&str>,
        cookie: Option<&str>,
        now_s: i64,
    ) -> Option<Caller> {
        if let Some(presented) = authorization.and_then(|a| a.strip_prefix("Bearer ")) {
            let token = self.tokens.authenticate(presented.trim())?.clone();
            let csrf = key.mac(&format!("csrf\n{}\nbearer", token.fingerprint()));
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
        let token = self.tokens.tokens.iter().find(|t| t.name == name)?;
        let bound = token.fingerprint();
        if expires <= now_s || !same(&key.mac(&format!("session\n{bound}\n{expires}")), mac) {
            return None;
        }
        let csrf = key.mac(&format!("csrf\n{bound}\n{expires}"));
        Some(Caller {
            token: token.clone(),
            csrf,
        })
    }

    /// The token whose secret is `presented`, for the login form.
    pub fn login(&self, presented: &str) -> Option<&Token> {
        self.tokens.authenticate(presented.trim())
    }

    /// A session cookie's value for `token`, valid from `now_s` for [`SESSION_SECS`].
    pub fn session(key: &SessionKey, token: &Token, now_s: i64) -> String {
        let expires = now_s + SESSION_SECS;
        let mac = key.mac(&format!("session\n{}\n{expires}", token.fingerprint()));
        format!(
            "{}.{expires}.{mac}",
            URL_SAFE_NO_PAD.encode(token.name.as_bytes())
        )
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

    const FILE: &str = "tokens:\n  - name: alice\n    token: s3cret\n    role: viewer\n  - name: root\n    tokenSha256: \"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae\"\n    role: admin\n";

    fn tokens(file: &str) -> TokenSet {
        bullsweep_policy::compile_tokens("t.yaml", file).expect("valid")
    }

    fn key() -> SessionKey {
        SessionKey::from_secret(b"0123456789abcdef0123456789abcdef-test")
    }

    /// A cookie for `name` signed the way the dashboard signed them before it had a secret:
    /// under a key derived from the token file's digests alone, which anyone who reads the
    /// file can compute.
    fn forged_from_the_file(set: &TokenSet, name: &str, expires: i64) -> String {
        // The file's fingerprint then: each token's name, role, tenant and digest, a line each.
        let lines: String = set
            .tokens
            .iter()
            .map(|t| format!("{}\n", t.fingerprint()))
            .collect();
        let file_key: [u8; 32] = Sha256::digest(format!("bullsweep-dashboard-v1\n{lines}")).into();
        let mac = hmac_sha256(&file_key, format!("session\n{name}\n{expires}").as_bytes());
        format!(
            "{COOKIE}={}.{expires}.{}",
            URL_SAFE_NO_PAD.encode(name),
            URL_SAFE_NO_PAD.encode(mac)
        )
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
        let a = Auth::new(tokens(FILE));
        let token = a.login("s3cret").expect("token").clone();
        let cookie = format!("x=1; {COOKIE}={}", Auth::session(&key(), &token, 1_000));
        assert_eq!(
            a.caller(&key(), None, Some(&cookie), 1_001)
                .map(|c| c.token.name),
            Some("alice".into())
        );
        assert!(
            a.caller(&key(), None, Some(&cookie), 1_000 + SESSION_SECS)
                .is_none()
        );
        let later = cookie.replace(
            &format!(".{}.", 1_000 + SESSION_SECS),
            &format!(".{}.", 2_000 + SESSION_SECS),
        );
        assert_ne!(later, cookie);
        assert!(a.caller(&key(), None, Some(&later), 1_001).is_none());
        let renamed = cookie.replace(
            &URL_SAFE_NO_PAD.encode("alice"),
            &URL_SAFE_NO_PAD.encode("root"),
        );
        assert!(a.caller(&key(), None, Some(&renamed), 1_001).is_none());
    }

    #[test]
    fn a_session_forged_from_the_token_file_is_refused() {
        let set = tokens(FILE);
        let a = Auth::new(set.clone());
        let forged = forged_from_the_file(&set, "root", 99_999_999_999);
        assert!(a.caller(&key(), None, Some(&forged), 1_000).is_none());
        // Nor does any key the file implies sign a session: the file's own text as a secret.
        let from_text = SessionKey::from_secret(FILE.as_bytes());
        let root = set.tokens.iter().find(|t| t.name == "root").expect("root");
        let cookie = format!("{COOKIE}={}", Auth::session(&from_text, root, 1_000));
        assert!(a.caller(&key(), None, Some(&cookie), 1_001).is_none());
    }

    #[test]
    fn a_session_needs_the_same_secret_and_the_same_token_entry() {
        let set = tokens(FILE);
        let a = Auth::new(set.clone());
        let alice = set
            .tokens
            .iter()
            .find(|t| t.name == "alice")
            .expect("alice");
        let cookie = format!("{COOKIE}={}", Auth::session(&key(), alice, 1_000));
        let other = SessionKey::from_secret(b"another secret of thirty-two bytes!!");
        assert!(a.caller(&other, None, Some(&cookie), 1_001).is_none());
        // The same secret in another process accepts it: replicas share sessions.
        assert!(
            Auth::new(set)
                .caller(&key(), None, Some(&cookie), 1_001)
                .is_some()
        );
        // A new secret for alice in the file, or a new role, ends her sessions.
        for changed in [
            FILE.replace("token: s3cret", "token: n3w"),
            FILE.replace("role: viewer", "role: operator"),
        ] {
            let b = Auth::new(tokens(&changed));
            assert!(b.caller(&key(), None, Some(&cookie), 1_001).is_none());
        }
        // Removed from the file: refused.
        let without = "tokens:\n  - name: bob\n    token: b0b\n    role: viewer\n";
        let c = Auth::new(tokens(without));
        assert!(c.caller(&key(), None, Some(&cookie), 1_001).is_none());
    }

    #[test]
    fn bearer_tokens_are_checked_and_csrf_tokens_differ_by_key() {
        let a = Auth::new(tokens(FILE));
        let one = a
            .caller(&key(), Some("Bearer s3cret"), None, 0)
            .expect("alice");
        let other = SessionKey::from_secret(b"another secret of thirty-two bytes!!");
        let two = a
            .caller(&other, Some("Bearer s3cret"), None, 0)
            .expect("alice");
        assert_ne!(one.csrf, two.csrf);
        assert!(a.caller(&key(), Some("Bearer wrong"), None, 0).is_none());
        assert!(a.caller(&key(), None, None, 0).is_none());
    }
}
