//! `bullBoard:`: an http(s) URL and a queue name template with known placeholders only.

use super::Checker;
use crate::bull_board::{BullBoard, NAME_PLACEHOLDERS};
use crate::raw::RawPolicyFile;

impl Checker {
    /// `bullBoard.url` and `bullBoard.queueName`, if the file has `bullBoard:`.
    pub(super) fn bull_board(&mut self, raw: &RawPolicyFile) -> Option<BullBoard> {
        let b = raw.bull_board.as_ref()?;
        let url = b.url.value.trim().trim_end_matches('/');
        let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
        if !scheme_ok
            || url
                .split_once("://")
                .is_none_or(|(_, rest)| rest.is_empty())
        {
            self.error_hint(
                &b.url.referenced,
                "bullBoard.url",
                format!("bull-board url `{}` is not an http(s) URL", b.url.value),
                "give the address bull-board's UI is mounted at, e.g. https://ops.example.com/queues",
            );
            return None;
        }
        let queue_name = match &b.queue_name {
            None => "{queue}".to_string(),
            Some(t) => match unknown_placeholder(&t.value) {
                Some(bad) => {
                    self.error_hint(
                        &t.referenced,
                        "bullBoard.queueName",
                        format!("unknown placeholder `{{{bad}}}`"),
                        "use {queue}, {tenant}, {env} and {prefix}",
                    );
                    return None;
                }
                None => t.value.clone(),
            },
        };
        Some(BullBoard {
            url: url.to_string(),
            queue_name,
        })
    }
}

/// The first `{name}` in `template` that is not a known placeholder.
fn unknown_placeholder(template: &str) -> Option<String> {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Some(after.to_string());
        };
        let name = &after[..close];
        if !NAME_PLACEHOLDERS.contains(&name) {
            return Some(name.to_string());
        }
        rest = &after[close + 1..];
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::compile;

    fn errors(text: &str) -> Vec<String> {
        match compile("p.yaml", &format!("version: 1\n{text}")) {
            Ok(_) => Vec::new(),
            Err(e) => e.errors.into_iter().map(|e| e.path).collect(),
        }
    }

    #[test]
    fn bull_board_reads_its_url_and_name_template() {
        let set = compile(
            "p.yaml",
            "version: 1\nbullBoard: { url: 'https://ops.example.com/queues/', queueName: '{tenant}:{queue}' }\n",
        )
        .unwrap();
        let b = set.bull_board.unwrap();
        assert_eq!(b.url, "https://ops.example.com/queues");
        assert_eq!(b.queue_name, "{tenant}:{queue}");
        let set = compile("p.yaml", "version: 1\nbullBoard: { url: 'http://h/q' }\n").unwrap();
        assert_eq!(set.bull_board.unwrap().queue_name, "{queue}");
        assert!(
            compile("p.yaml", "version: 1\n")
                .unwrap()
                .bull_board
                .is_none()
        );
    }

    #[test]
    fn bull_board_refuses_other_schemes_and_unknown_placeholders() {
        assert_eq!(
            errors("bullBoard: { url: 'ftp://h/q' }\n"),
            ["bullBoard.url"]
        );
        assert_eq!(
            errors("bullBoard: { url: 'https://' }\n"),
            ["bullBoard.url"]
        );
        assert_eq!(
            errors("bullBoard: { url: 'https://h/q', queueName: '{tenant}/{name}' }\n"),
            ["bullBoard.queueName"]
        );
        assert_eq!(
            errors("bullBoard: { url: 'https://h/q', queueName: '{queue' }\n"),
            ["bullBoard.queueName"]
        );
    }
}
