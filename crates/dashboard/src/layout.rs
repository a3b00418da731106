//! The page shell every page shares: the navigation, who is signed in, and the headers every
//! response carries.

use crate::assets;
use crate::auth::{Caller, TokensFrom};
use bullsweep_core::daemon::http::Response;
use maud::{DOCTYPE, Markup, html};

/// The pages, in the navigation's order: path and title.
pub const PAGES: [(&str, &str); 7] = [
    ("/", "Overview"),
    ("/effectiveness", "Effectiveness"),
    ("/policies", "Policies"),
    ("/audit", "Audit"),
    ("/archive", "Archive"),
    ("/erasure", "Erasure"),
    ("/failures", "Sweep errors"),
];

/// The content security policy: only the dashboard's own files, no inline script, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// A full page: `current` is the navigation entry it belongs to; `refresh` reloads its data
/// every so many seconds where script runs.
pub fn page(
    title: &str,
    current: &str,
    caller: &Caller,
    refresh: Option<u32>,
    body: Markup,
) -> Markup {
    let t = &caller.token;
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, true))
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/" { "bullsweep" }
                    nav aria-label="Pages" {
                        ul {
                            @for (path, name) in PAGES {
                                li {
                                    @if path == current {
                                        a href=(path) aria-current="page" { (name) }
                                    } @else {
                                        a href=(path) { (name) }
                                    }
                                }
                            }
                        }
                    }
                    div.who {
                        span { (t.name) " · " (t.role.as_str())
                            @if let Some(tenant) = &t.tenant { " · tenant " (tenant) } }
                        form.inline method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(caller.csrf);
                            button.plain type="submit" { "Sign out" }
                        }
                    }
                }
                @match refresh {
                    Some(s) => main id="main" data-refresh=(s) { h1 { (title) } (body) },
                    None => main id="main" { h1 { (title) } (body) },
                }
            }
        }
    }
}

/// The sign-in page, saying where a token is found: the `--dashboard-tokens` file, or (a
/// loopback daemon without one) the line of the daemon's log that holds this run's token.
pub fn login(error: Option<&str>, tokens: TokensFrom) -> Markup {
    bare(
        "Sign in",
        html! {
            h1 { "bullsweep dashboard" }
            @if let Some(e) = error { p.notice.bad role="alert" { (e) } }
            form.stack method="post" action="/login" {
                label { "Token" input type="password" name="token" autocomplete="current-password" required autofocus; }
                button type="submit" { "Sign in" }
            }
            @match tokens {
                TokensFrom::File => p.muted id="tokens-from" { "Tokens come from the daemon's --dashboard-tokens file; whoever runs the daemon gives them out." },
                TokensFrom::Log => p.muted id="tokens-from" {
                    "This daemon runs without --dashboard-tokens, so it made one admin token for this run and wrote it to its log only, on the line "
                    code { (crate::auth::TOKEN_LOGGED) " …" }
                    ". A new one is made at every start; to keep tokens, start the daemon with --dashboard-tokens FILE."
                },
            }
        },
    )
}

/// What the sign-in page says of a token that does not sign in.
pub fn wrong_token(tokens: TokensFrom) -> &'static str {
    match tokens {
        TokensFrom::File => "That token is not in the token file.",
        TokensFrom::Log => "That is not this run's token; the daemon's log holds it.",
    }
}

/// A page without the navigation or the script, for one who is not (or not yet known to be)
/// signed in.
fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, false))
            body { main.login id="main" { (body) } }
        }
    }
}

fn head(title: &str, script: bool) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · bullsweep" }
            link rel="stylesheet" href=(assets::css());
            @if script { script src=(assets::js()) defer {} }
        }
    }
}

/// The page a GET of `path` answers when it took over `secs` seconds: what happened and what
/// to try, without the navigation (who asked is not known by then).
pub fn timed_out(path: &str, secs: u64) -> Markup {
    // Only a path on this site: `//host` and `/\host` would lead a browser elsewhere.
    let again = if path.starts_with('/') && !path[1..].starts_with(['/', '\\']) {
        path
    } else {
        "/"
    };
    bare(
        "Timed out",
        html! {
            h1 { "The page timed out" }
            p.notice.bad role="alert" data-timeout=(secs) { "Redis did not answer within " (secs) " s, so this page was stopped rather than left waiting. Redis may be busy (a long script, a large command, a paused client) or unreachable; the daemon's log says which." }
            p { a href=(again) { "Try again" } " · " a href="/" { "Overview" } }
        },
    )
}

/// A 404 page under `current` saying `what` is not in view.
pub fn not_found(caller: &Caller, current: &str, what: &str) -> Response {
    let body = html! { p { (what) } };
    html(404, page("Not found", current, caller, None, body))
}

/// An HTML response.
pub fn html(status: u16, markup: Markup) -> Response {
    Response::new(status, "text/html; charset=utf-8", markup.into_string())
}

/// Adds the headers every response carries: no framing, no sniffing, no referrer to other sites, the
/// content security policy, and no caching (assets set their own).
pub fn secure(mut r: Response) -> Response {
    let cached = r.headers.iter().any(|(k, _)| k == "cache-control");
    r = r
        .with("content-security-policy", CSP)
        .with("x-frame-options", "DENY")
        .with("x-content-type-options", "nosniff")
        .with("referrer-policy", "same-origin");
    if !cached {
        r = r.with("cache-control", "no-store");
    }
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_timeout_page_links_only_to_this_site() {
        for (path, link) in [
            ("/audit", "href=\"/audit\""),
            ("//evil.example", "href=\"/\""),
            ("/\\evil.example", "href=\"/\""),
        ] {
            let page = super::timed_out(path, 10).into_string();
            assert!(page.contains(link), "{path}: {page}");
        }
    }
}
