//! Freeing large values off the path a caller waits on.
//!
//! A cold list frees what it read: the store's raw pages (a key and a record per instance)
//! and, in a one-shot resolve, the parsed list itself once its endpoints are built. For a
//! large app that is tens of thousands of allocations, milliseconds the caller would wait
//! for, with nothing left to compute. They are handed to the runtime's blocking pool
//! instead, which frees them beside the caller's next steps.

/// Values with fewer parts than this are freed in place: handing them over costs more.
pub(crate) const IN_PLACE_BELOW: usize = 1024;

/// Frees `value` on the runtime's blocking pool when `parts` (how many allocations it
/// holds, roughly) is at least [`IN_PLACE_BELOW`] and a runtime runs; in place otherwise.
pub(crate) fn drop_later<T: Send + 'static>(value: T, parts: usize) {
    if parts < IN_PLACE_BELOW {
        return;
    }
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn_blocking(move || drop(value));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn small_values_and_values_outside_a_runtime_are_freed_at_once() {
        let value = Arc::new(());
        drop_later(Arc::clone(&value), IN_PLACE_BELOW - 1);
        assert_eq!(Arc::strong_count(&value), 1);
        drop_later(Arc::clone(&value), IN_PLACE_BELOW);
        assert_eq!(Arc::strong_count(&value), 1, "no runtime: in place");
    }

    #[tokio::test]
    async fn large_values_are_freed_on_the_blocking_pool() {
        let here = std::thread::current().id();
        let (freed, on) = std::sync::mpsc::channel();
        struct Tell(std::sync::mpsc::Sender<std::thread::ThreadId>);
        impl Drop for Tell {
            fn drop(&mut self) {
                let _ = self.0.send(std::thread::current().id());
            }
        }
        drop_later(Tell(freed), IN_PLACE_BELOW);
        let thread = tokio::task::spawn_blocking(move || on.recv().unwrap())
            .await
            .unwrap();
        assert_ne!(thread, here, "freed on another thread");
    }
}
