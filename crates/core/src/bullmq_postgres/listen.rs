//! BullMQ's wake-ups on PostgreSQL: every event BullMQ publishes is announced by
//! `NOTIFY bullmq_events, '<queue>'` (coalesced under load); a session that `LISTEN`s hears
//! the queue names.

use super::connection::{PgTarget, pg_error};
use crate::error::Result;
use futures_util::future::poll_fn;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client};

/// The channel BullMQ announces its events on.
pub const EVENTS_CHANNEL: &str = "bullmq_events";

impl PgTarget {
    /// A session listening on [`EVENTS_CHANNEL`]: the client (dropping it ends the session)
    /// and the names of the queues announced, as they arrive. The receiver ends when the
    /// connection does.
    pub async fn listen_events(&self) -> Result<(Client, mpsc::UnboundedReceiver<String>)> {
        let (client, mut connection) = self.connect_raw().await?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
                match message {
                    Ok(AsyncMessage::Notification(n)) => {
                        if tx.send(n.payload().to_string()).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {EVENTS_CHANNEL}"))
            .await
            .map_err(|e| pg_error(&e))?;
        Ok((client, rx))
    }
}
