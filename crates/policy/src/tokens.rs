//! The dashboard's token file (`--dashboard-tokens`): who may see and do what. Each token has
//! a name (shown in audit events), a role (`viewer`, `operator`, `admin`) and optionally one
//! tenant it is confined to; the secret is stored as its SHA-256 (`tokenSha256`), or in clear
//! (`token`, for tests). Pure: the text in, a [`TokenSet`] or every problem located.

use crate::compile::syntax::syntax_error;
use crate::compile::{ConfigError, ConfigErrors, pos};
use serde::Deserialize;
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Read everything in its scope, job data redacted through the `pii:` rules.
    Viewer,
    /// Also sweep a queue now, and restore archived jobs.
    Operator,
    /// Also erasure requests, and job data unredacted.
    Admin,
}

/// What a request asks to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permission {
    /// See pages and data, redacted.
    Read,
    /// See job data as stored, and the policy file's credentials.
    ReadRaw,
    /// Sweep a queue now.
    SweepNow,
    /// Restore an archived job.
    Restore,
    /// Start an erasure (`forget`).
    Erase,
}

impl Role {
    /// Its name in the token file.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// Whether the role allows `p`.
    pub fn allows(self, p: Permission) -> bool {
        let least = match p {
            Permission::Read => Role::Viewer,
            Permission::SweepNow | Permission::Restore => Role::Operator,
            Permission::ReadRaw | Permission::Erase => Role::Admin,
        };
        self >= least
    }
}

/// One token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// Its name, shown in audit events.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The one tenant it may see, if confined.
    pub tenant: Option<String>,
    digest: [u8; 32],
}

impl Token {
    /// Whether a queue of `tenant` is in this token's scope.
    pub fn sees(&self, tenant: Option<&str>) -> bool {
        self.tenant.as_deref().is_none_or(|t| Some(t) == tenant)
    }

    /// Its name, role, tenant and digest on one line: what a session of this token is bound
    /// to, so that a session ends when any of them changes in the file.
    pub fn fingerprint(&self) -> String {
        let digest: String = self.digest.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}\t{:?}\t{:?}\t{digest}",
            self.name, self.role, self.tenant
        )
    }
}

/// Every token of the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenSet {
    /// In file order.
    pub tokens: Vec<Token>,
}

impl TokenSet {
    /// The token whose secret is `presented`, compared by digest in constant time.
    pub fn authenticate(&self, presented: &str) -> Option<&Token> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for t in &self.tokens {
            let differs = t
                .digest
                .iter()
                .zip(digest.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if differs == 0 {
                found = Some(t);
            }
        }
        found
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    tokens: Option<Spanned<Vec<Spanned<RawToken>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawToken {
    name: Option<Spanned<String>>,
    token: Option<Spanned<String>>,
    token_sha256: Option<Spanned<String>>,
    role: Option<Spanned<String>>,
    tenant: Option<Spanned<String>>,
}

/// Reads a token file; `file` names it in messages.
pub fn compile_tokens(file: &str, text: &str) -> Result<TokenSet, ConfigErrors> {
    let failed = |errors: Vec<ConfigError>| ConfigErrors {
        file: file.to_string(),
        errors,
    };
    let raw: RawFile = serde_saphyr::from_str(text).map_err(|e| failed(vec![syntax_error(&e)]))?;
    let Some(list) = raw.tokens.filter(|l| !l.value.is_empty()) else {
        return Err(failed(vec![ConfigError {
            pos: Default::default(),
            path: "tokens".into(),
            message: "the token file has no `tokens:`; the dashboard would let nobody in".into(),
            hint: Some("tokens: [{ name: alice-ops, tokenSha256: \"…\", role: viewer }]".into()),
        }]));
    };
    let mut problems = Problems::default();
    let mut out = TokenSet::default();
    for (i, t) in list.value.iter().enumerate() {
        let at = format!("tokens[{i}]");
        if let Some(token) = compile_token(&at, t, &out.tokens, &mut problems) {
            out.tokens.push(token);
        }
    }
    if problems.0.is_empty() {
        Ok(out)
    } else {
        Err(failed(problems.0))
    }
}

/// The problems found in a token file, in the order found.
#[derive(Default)]
struct Problems(Vec<ConfigError>);

impl Problems {
    /// Notes a problem at `loc`, under the key path `path`.
    fn add(&mut self, loc: &serde_saphyr::Location, path: String, message: String) {
        self.0.push(ConfigError {
            pos: pos(loc),
            path,
            message,
            hint: None,
        })
    }
}

/// The token at `at` (`tokens[i]`), if it is whole; `known` are the ones before it, each
/// name and secret being allowed once. Its problems are noted in `problems`.
fn compile_token(
    at: &str,
    t: &Spanned<RawToken>,
    known: &[Token],
    problems: &mut Problems,
) -> Option<Token> {
    let loc = &t.referenced;
    let raw = &t.value;
    let name = token_name(at, t, problems)?;
    let tenant = token_tenant(at, raw, &name, problems)?;
    if known.iter().any(|o| o.name == name) {
        problems.add(
            loc,
            format!("{at}.name"),
            format!("duplicate token name `{name}`"),
        );
    }
    let digest = token_digest(at, t, &name, problems);
    let role = token_role(at, t, &name, problems);
    let (digest, role) = (digest?, role?);
    if known.iter().any(|o| o.digest == digest) {
        problems.add(
            loc,
            at.to_string(),
            format!("token `{name}` has the same secret as another"),
        );
    }
    Some(Token {
        name,
        role,
        tenant,
        digest,
    })
}

/// A token's `name`: present, not blank, and printable (it goes into audit events and logs).
fn token_name(at: &str, t: &Spanned<RawToken>, problems: &mut Problems) -> Option<String> {
    match &t.value.name {
        Some(n) if n.value.chars().any(crate::unprintable) => {
            problems.add(
                &n.referenced,
                format!("{at}.name"),
                "a token's name may not hold a line break, a control character or an \
                 invisible one (a direction mark, a zero-width space): it is written into \
                 audit events and logs"
                    .into(),
            );
            None
        }
        Some(n) if !n.value.trim().is_empty() => Some(n.value.clone()),
        _ => {
            problems.add(
                &t.referenced,
                at.to_string(),
                "a token needs a `name`".into(),
            );
            None
        }
    }
}

/// A token's `tenant`: `Some(None)` when it sees every tenant, `None` when the tenant is
/// blank or unprintable (a problem noted).
fn token_tenant(
    at: &str,
    raw: &RawToken,
    name: &str,
    problems: &mut Problems,
) -> Option<Option<String>> {
    match &raw.tenant {
        Some(t) if t.value.trim().is_empty() || t.value.chars().any(crate::unprintable) => {
            problems.add(
                &t.referenced,
                format!("{at}.tenant"),
                format!(
                    "token `{name}` has an empty or unprintable `tenant`; name the tenant, \
                     or leave `tenant` out for a token that sees every tenant"
                ),
            );
            None
        }
        Some(t) => Some(Some(t.value.clone())),
        None => Some(None),
    }
}

/// A token's secret as its SHA-256: from `tokenSha256`, or hashed from `token`; exactly one.
fn token_digest(
    at: &str,
    t: &Spanned<RawToken>,
    name: &str,
    problems: &mut Problems,
) -> Option<[u8; 32]> {
    let loc = &t.referenced;
    match (&t.value.token, &t.value.token_sha256) {
        (Some(clear), None) if !clear.value.is_empty() => {
            Some(Sha256::digest(clear.value.as_bytes()).into())
        }
        (None, Some(hex)) => match parse_hex(&hex.value) {
            Some(d) => Some(d),
            None => {
                problems.add(
                    &hex.referenced,
                    format!("{at}.tokenSha256"),
                    "tokenSha256 must be 64 hexadecimal digits (`sha256sum` of the token)".into(),
                );
                None
            }
        },
        (Some(_), Some(_)) => {
            problems.add(
                loc,
                at.to_string(),
                format!("token `{name}` has both `token` and `tokenSha256`; keep one"),
            );
            None
        }
        _ => {
            problems.add(
                loc,
                at.to_string(),
                format!("token `{name}` needs `tokenSha256` (or `token`)"),
            );
            None
        }
    }
}

/// A token's `role`: viewer, operator or admin.
fn token_role(
    at: &str,
    t: &Spanned<RawToken>,
    name: &str,
    problems: &mut Problems,
) -> Option<Role> {
    match t.value.role.as_ref().map(|r| (r, r.value.as_str())) {
        Some((_, "viewer")) => Some(Role::Viewer),
        Some((_, "operator")) => Some(Role::Operator),
        Some((_, "admin")) => Some(Role::Admin),
        Some((r, other)) => {
            problems.add(
                &r.referenced,
                format!("{at}.role"),
                format!("role `{other}` is not one of viewer, operator, admin"),
            );
            None
        }
        None => {
            problems.add(
                &t.referenced,
                at.to_string(),
                format!("token `{name}` needs a `role`"),
            );
            None
        }
    }
}

/// 64 hexadecimal digits as 32 bytes.
fn parse_hex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"tokens:
  - { name: alice-ops, tokenSha256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", role: operator }
  - { name: acme-view, token: "acme-secret", role: viewer, tenant: acme }
  - { name: root, token: "root-secret", role: admin }
"#;

    #[test]
    fn tokens_authenticate_by_digest_and_carry_role_and_tenant() {
        let set = compile_tokens("t.yaml", FILE).expect("valid");
        // sha256("foo") is the first token's digest.
        let alice = set.authenticate("foo").expect("alice");
        assert_eq!(
            (alice.name.as_str(), alice.role),
            ("alice-ops", Role::Operator)
        );
        assert!(alice.sees(Some("acme")) && alice.sees(None));
        let acme = set.authenticate("acme-secret").expect("acme");
        assert!(acme.sees(Some("acme")) && !acme.sees(Some("globex")) && !acme.sees(None));
        assert!(set.authenticate("nope").is_none());
        assert!(set.authenticate("").is_none());
        assert!(Role::Viewer.allows(Permission::Read));
        assert!(!Role::Viewer.allows(Permission::SweepNow));
        assert!(Role::Operator.allows(Permission::Restore));
        assert!(!Role::Operator.allows(Permission::Erase));
        assert!(!Role::Operator.allows(Permission::ReadRaw));
        assert!(Role::Admin.allows(Permission::Erase));
    }

    #[test]
    fn mistakes_are_located() {
        for (text, want) in [
            (
                "tokens:\n  - { name: a, role: viewer }\n",
                "t.yaml:2:5: token `a` needs `tokenSha256`",
            ),
            (
                "tokens:\n  - { name: a, token: x, role: boss }\n",
                "t.yaml:2:32: role `boss` is not one of",
            ),
            (
                "tokens:\n  - { name: a, tokenSha256: abc, role: viewer }\n",
                "t.yaml:2:29: tokenSha256 must be 64",
            ),
            (
                "tokens:\n  - { name: a, token: x, role: viewer }\n  - { name: a, token: y, role: viewer }\n",
                "duplicate token name `a`",
            ),
            (
                "tokens:\n  - { name: a, token: x, role: viewer }\n  - { name: b, token: x, role: viewer }\n",
                "same secret as another",
            ),
            (
                "tokens:\n  - { name: a, token: x, rol: viewer }\n",
                "unknown field `rol`",
            ),
            ("tokens: []\n", "has no `tokens:`"),
            (
                "tokens:\n  - { name: a, token: x, role: viewer, tenant: \"\" }\n",
                "t.yaml:2:48: token `a` has an empty or unprintable `tenant`",
            ),
            (
                "tokens:\n  - { name: a, token: x, role: viewer, tenant: \"  \" }\n",
                "t.yaml:2:48: token `a` has an empty",
            ),
            (
                "tokens:\n  - { name: \"alice\\nadmin\", token: x, role: viewer }\n",
                "t.yaml:2:13: a token's name may not hold a line break",
            ),
            (
                "tokens:\n  - name: |\n      alice\n      admin\n    token: x\n    role: viewer\n",
                "t.yaml:3:7: a token's name may not hold a line break",
            ),
        ] {
            let e = compile_tokens("t.yaml", text).expect_err(text).to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
