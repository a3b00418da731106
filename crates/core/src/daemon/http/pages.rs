//! The `pages` thread: each request for the [`Handler`] is answered in a task of its own on
//! a runtime that serves nothing else, so that a page being built (a report, an audit file
//! read) never delays the `http` thread and the health checks it answers.

use super::{Handler, Request, Response};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Requests waiting for the pages thread at most; past it the `http` thread waits too.
const WAITING: usize = 64;

/// One request for the pages thread, and where its answer goes.
pub(super) struct Job {
    /// The request.
    pub req: Request,
    /// Its answer.
    pub reply: oneshot::Sender<Response>,
}

/// Starts the pages thread for `handler`; requests are sent to what it returns.
pub(super) fn spawn(handler: Arc<dyn Handler>) -> std::io::Result<mpsc::Sender<Job>> {
    let (queue, mut jobs) = mpsc::channel::<Job>(WAITING);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("pages".into())
        .spawn(move || {
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                while let Some(job) = jobs.recv().await {
                    let handler = handler.clone();
                    tokio::task::spawn_local(async move {
                        let response = handler.handle(job.req).await;
                        let _ = job.reply.send(response);
                    });
                }
            });
        })?;
    Ok(queue)
}
