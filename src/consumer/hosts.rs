//! Host names shared by every endpoint a resolver builds.
//!
//! A consumer of several interfaces builds endpoints of the same instances once per
//! interface (and again on every one-shot resolve). Without sharing, each set holds its own
//! copy of every instance's host; with it, one host is one allocation however many sets
//! hold it. The table keeps the names still in use: when it has doubled since its last
//! sweep, the names nothing else holds are dropped, so it stays within about twice the
//! hosts in use.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Sweeps start once the table holds this many names.
const FIRST_SWEEP: usize = 1024;

/// See the module docs.
#[derive(Default)]
pub(crate) struct HostNames {
    table: Mutex<Table>,
}

/// The names, locked once for a batch of endpoints.
#[derive(Default)]
pub(crate) struct Table {
    names: HashSet<Arc<str>>,
    /// The size at which the next insert sweeps first.
    sweep_at: usize,
}

impl HostNames {
    /// The table, for a batch of lookups.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Table {
    /// The shared copy of `host`.
    pub(crate) fn get(&mut self, host: &str) -> Arc<str> {
        if let Some(known) = self.names.get(host) {
            return Arc::clone(known);
        }
        if self.names.len() >= self.sweep_at.max(FIRST_SWEEP) {
            self.names.retain(|name| Arc::strong_count(name) > 1);
            self.sweep_at = self.names.len() * 2;
        }
        let name: Arc<str> = Arc::from(host);
        self.names.insert(Arc::clone(&name));
        name
    }

    /// How many names the table holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_is_one_allocation() {
        let hosts = HostNames::default();
        let a = hosts.lock().get("10.0.0.1");
        let b = hosts.lock().get("10.0.0.1");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*hosts.lock().get("10.0.0.2"), "10.0.0.2");
    }

    #[test]
    fn names_no_longer_held_are_swept() {
        let hosts = HostNames::default();
        let mut table = hosts.lock();
        let kept: Vec<Arc<str>> = (0..10).map(|i| table.get(&format!("kept-{i}"))).collect();
        // Names nobody holds: the table grows to the first sweep, then sweeps them.
        for i in 0..FIRST_SWEEP * 3 {
            drop(table.get(&format!("gone-{i}")));
            assert!(table.len() <= FIRST_SWEEP + 1, "the table stays bounded");
        }
        for name in &kept {
            assert!(
                Arc::ptr_eq(name, &table.get(name)),
                "held names survive sweeps"
            );
        }
    }
}
