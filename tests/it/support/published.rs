//! Records the size of every endpoint set a subscription publishes, so a test can say that
//! no empty set (or none smaller than some bound) ever went out, not merely that the last
//! one is right.

use std::sync::{Arc, Mutex};

use introspect::SubscriptionHandle;
use tokio::task::JoinHandle;

/// See the module docs. Stops recording when dropped.
pub struct Published {
    sizes: Arc<Mutex<Vec<usize>>>,
    task: JoinHandle<()>,
}

impl Published {
    /// Records the current set of `handle` and every one published after it.
    pub fn record(handle: &SubscriptionHandle) -> Published {
        let mut sets = handle.watch();
        let sizes = Arc::new(Mutex::new(vec![sets.borrow_and_update().len()]));
        let recorded = sizes.clone();
        let task = tokio::spawn(async move {
            while sets.changed().await.is_ok() {
                let size = sets.borrow_and_update().len();
                recorded.lock().unwrap().push(size);
            }
        });
        Published { sizes, task }
    }

    /// The smallest set published so far.
    pub fn smallest(&self) -> usize {
        self.sizes().into_iter().min().unwrap_or(0)
    }

    /// Every size published so far, in order.
    pub fn sizes(&self) -> Vec<usize> {
        self.sizes.lock().unwrap().clone()
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.task.abort();
    }
}
