//! One cancellation token ([`Cancel`]) that a whole process, a run or a task stops on: the
//! daemon's shutdown, a dashboard's "stop", a run's budget. Checked between batches (never
//! inside one) with [`Cancel::is_cancelled`], or awaited by a task with [`Cancel::cancelled`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// A cloneable token: every clone sees the one `cancel`, and a child sees its parent's.
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    own: Arc<Flag>,
    parent: Option<Arc<Flag>>,
}

#[derive(Debug, Default)]
struct Flag {
    set: AtomicBool,
    woken: Notify,
}

impl Flag {
    fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    async fn wait(&self) {
        loop {
            let woken = self.woken.notified();
            tokio::pin!(woken);
            // Registered before the check, so a `cancel` between the two still wakes us.
            woken.as_mut().enable();
            if self.is_set() {
                return;
            }
            woken.await;
        }
    }
}

impl Cancel {
    /// A token nobody has cancelled yet.
    pub fn new() -> Self {
        Cancel::default()
    }

    /// A token cancelled by its own `cancel` or by this one's; cancelling it leaves this one
    /// running (one queue's stop does not stop the daemon).
    pub fn child(&self) -> Cancel {
        Cancel {
            own: Arc::default(),
            parent: Some(self.own.clone()),
        }
    }

    /// Cancels this token, its clones and its children; wakes every task awaiting it.
    pub fn cancel(&self) {
        self.own.set.store(true, Ordering::Release);
        self.own.woken.notify_waiters();
    }

    /// Whether this token (or its parent) was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.own.is_set() || self.parent.as_ref().is_some_and(|p| p.is_set())
    }

    /// Returns once this token (or its parent) is cancelled.
    pub async fn cancelled(&self) {
        match &self.parent {
            None => self.own.wait().await,
            Some(parent) => {
                tokio::select! {
                    _ = self.own.wait() => {}
                    _ = parent.wait() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_cancel_wakes_waiters_and_reaches_children_not_parents() {
        let root = Cancel::new();
        let child = root.child();
        let waiter = tokio::spawn({
            let child = child.clone();
            async move { child.cancelled().await }
        });
        assert!(!root.is_cancelled() && !child.is_cancelled());
        root.cancel();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter wakes")
            .expect("the waiter ends");
        assert!(child.is_cancelled());

        let parent = Cancel::new();
        let own = parent.child();
        own.cancel();
        assert!(own.is_cancelled());
        assert!(
            !parent.is_cancelled(),
            "a child's cancel stays with the child"
        );
    }
}
