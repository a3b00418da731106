//! Glob patterns on queue and tenant names, with the specificity order used to pick a winner
//! and an exact test of whether two patterns can match one name.

use globset::{Glob, GlobMatcher};
use std::cmp::Ordering;

/// How specific a name pattern is. Greater is more specific.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Specificity {
    /// A pattern with no literal character, such as `*`.
    CatchAll,
    /// A glob; more literal characters rank higher.
    Glob {
        /// Number of literal characters in the pattern.
        literals: usize,
    },
    /// A plain name with no glob character.
    Exact,
}

impl Specificity {
    fn rank(self) -> (u8, usize) {
        match self {
            Specificity::CatchAll => (0, 0),
            Specificity::Glob { literals } => (1, literals),
            Specificity::Exact => (2, 0),
        }
    }
}

impl Ord for Specificity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for Specificity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A compiled glob on a single name (queue or tenant).
#[derive(Clone, Debug)]
pub struct NamePattern {
    text: String,
    /// The glob's matcher, for a pattern with classes, alternations, escapes or `**`; `None`
    /// for a name and for a pattern of literals, `*` and `?`, which [`wildcard`] matches as the
    /// matcher would. Why: a compiled matcher is a regex of about 4 KB, so a file of 50,000
    /// one-queue policies held 220 MB of them.
    matcher: Option<Box<GlobMatcher>>,
    specificity: Specificity,
}

const GLOB_CHARS: &[char] = &['*', '?', '[', ']', '{', '}', '\\', '!'];

impl NamePattern {
    /// Compiles a pattern; the error text is fit for a user.
    pub fn new(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("pattern is empty; use `*` to match every name".into());
        }
        let glob = Glob::new(text).map_err(|e| format!("invalid glob `{text}`: {}", e.kind()))?;
        let literals = literal_count(text);
        let specificity = if !text.contains(GLOB_CHARS) {
            Specificity::Exact
        } else if literals == 0 {
            Specificity::CatchAll
        } else {
            Specificity::Glob { literals }
        };
        let plain = !text.contains(['[', ']', '{', '}', '\\']) && !text.contains("**");
        Ok(NamePattern {
            text: text.to_string(),
            matcher: (!plain).then(|| Box::new(glob.compile_matcher())),
            specificity,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match (&self.matcher, self.specificity) {
            (_, Specificity::Exact) => self.text == name,
            (Some(m), _) => m.is_match(name),
            (None, _) => wildcard(self.text.as_bytes(), name.as_bytes()),
        }
    }

    /// How specific the pattern is.
    pub fn specificity(&self) -> Specificity {
        self.specificity
    }

    /// Whether some name could match both patterns. Character classes and alternations are
    /// treated as "any one character", which can only over-report overlap.
    pub fn may_overlap(&self, other: &NamePattern) -> bool {
        globs_intersect(&tokens(&self.text), &tokens(&other.text))
    }
}

/// Whether `name` matches `pattern`, whose only special bytes are `*` (any bytes) and `?` (one
/// byte), as the glob's matcher reads them (a regex over bytes).
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // The last star seen, and where in `name` its match currently ends.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                // Let the last star take one more byte, and try again after it.
                Some((after, end)) => {
                    star = Some((after, end + 1));
                    p = after;
                    n = end + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Literal characters outside of `[...]` and `{...}` groups.
fn literal_count(text: &str) -> usize {
    let mut depth = 0usize;
    let mut count = 0;
    for c in text.chars() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth = depth.saturating_sub(1),
            '*' | '?' | '\\' => {}
            _ if depth == 0 => count += 1,
            _ => {}
        }
    }
    count
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Star,
    AnyOne,
    Char(char),
}

fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
            }
            '?' => out.push(Token::AnyOne),
            '[' => {
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                }
                out.push(Token::AnyOne);
            }
            '{' => {
                // An alternation can stand for any text; treat it as a star to stay conservative.
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                out.push(Token::Star);
            }
            '\\' => out.push(Token::Char(chars.next().unwrap_or('\\'))),
            c => out.push(Token::Char(c)),
        }
    }
    out
}

/// Dynamic programming over both patterns: `reach[i][j]` says whether some string brings
/// pattern `a` to position `i` and pattern `b` to position `j` at the same time.
fn globs_intersect(a: &[Token], b: &[Token]) -> bool {
    let (n, m) = (a.len(), b.len());
    let mut reach = vec![vec![false; m + 1]; n + 1];
    reach[0][0] = true;
    for i in 0..=n {
        for j in 0..=m {
            if !reach[i][j] {
                continue;
            }
            // A star may match the empty string.
            if i < n && a[i] == Token::Star {
                reach[i + 1][j] = true;
            }
            if j < m && b[j] == Token::Star {
                reach[i][j + 1] = true;
            }
            // Both consume one character.
            if i < n && j < m {
                let ok = match (a[i], b[j]) {
                    (Token::Char(x), Token::Char(y)) => x == y,
                    _ => true,
                };
                if ok {
                    let ni = if a[i] == Token::Star { i } else { i + 1 };
                    let nj = if b[j] == Token::Star { j } else { j + 1 };
                    if (ni, nj) != (i, j) {
                        reach[ni][nj] = true;
                    }
                }
            }
        }
    }
    reach[n][m]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> NamePattern {
        NamePattern::new(text).expect("valid pattern")
    }

    #[test]
    fn specificity_orders_exact_glob_catch_all() {
        assert!(p("billing").specificity() > p("billing*").specificity());
        assert!(p("billing*").specificity() > p("bill*").specificity());
        assert!(p("bill*").specificity() > p("*").specificity());
        assert_eq!(p("*").specificity(), Specificity::CatchAll);
        assert_eq!(p("**").specificity(), Specificity::CatchAll);
    }

    #[test]
    fn matching() {
        assert!(p("billing*").matches("billing-export"));
        assert!(!p("billing*").matches("bill"));
        assert!(p("*").matches("anything"));
        assert!(p("a?c").matches("abc"));
    }

    #[test]
    fn overlap_is_exact_for_stars_and_question_marks() {
        assert!(p("billing*").may_overlap(&p("*export")));
        assert!(p("a*").may_overlap(&p("*b")));
        assert!(!p("a*").may_overlap(&p("b*")));
        assert!(!p("abc").may_overlap(&p("abd")));
        assert!(p("a?c").may_overlap(&p("abc")));
        assert!(!p("a?c").may_overlap(&p("abcd")));
        assert!(p("*x*").may_overlap(&p("*y*")));
        assert!(!p("x*x").may_overlap(&p("y*")));
    }

    #[test]
    fn plain_patterns_match_as_the_globs_matcher_does() {
        let patterns = [
            "billing", "billing*", "*export", "b*l*g", "a?c", "*", "?", "a*b*c", "caf?", "caf??",
            "*-*-*", "x*x", "a/*", "*?", "??*", "é*", "*é",
        ];
        let names = [
            "",
            "billing",
            "billing-export",
            "bill",
            "abc",
            "ac",
            "abbc",
            "café",
            "cafe",
            "a-b-c",
            "xx",
            "xax",
            "x",
            "a/b/c",
            "é",
            "aé",
            "éa",
            "a*b*c",
            "aXbYc",
            "bilg",
        ];
        for text in patterns {
            let pattern = p(text);
            assert!(
                pattern.matcher.is_none(),
                "{text} is matched without a regex"
            );
            let glob = Glob::new(text).expect("glob").compile_matcher();
            for name in names {
                assert_eq!(
                    pattern.matches(name),
                    glob.is_match(name),
                    "`{text}` on `{name}`"
                );
            }
        }
        for text in ["[ab]c", "{a,b}*", "a**", "a\\*b"] {
            assert!(p(text).matcher.is_some(), "{text} keeps the glob's matcher");
        }
    }

    #[test]
    fn invalid_glob_is_an_error() {
        assert!(NamePattern::new("[abc").is_err());
        assert!(NamePattern::new("").is_err());
    }
}
