//! The responses clients rejected (NACKs), counted per node, and exported as the metric
//! [`NACKS_METRIC`] (labels `node` and `type`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The counter of rejected responses, by node id and resource type.
pub const NACKS_METRIC: &str = "introspect_xds_nacks_total";

/// The most nodes counted apart: a node id is the client's own word, so past this many the
/// rest are counted together, under [`OTHER_NODES`].
pub const MAX_COUNTED_NODES: usize = 1_000;

/// Where the NACKs of nodes past [`MAX_COUNTED_NODES`] are counted.
pub const OTHER_NODES: &str = "(other nodes)";

/// The longest node id kept as it is (in bytes); a longer one is cut there, so a client
/// cannot make a metric label or a log line of any size.
pub const MAX_NODE_ID: usize = 128;

/// `node` cut to [`MAX_NODE_ID`] bytes at a character boundary, `…` marking a cut.
fn bounded(node: &str) -> String {
    if node.len() <= MAX_NODE_ID {
        return node.to_owned();
    }
    let mut end = MAX_NODE_ID;
    while !node.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &node[..end])
}

/// The NACKs of a server's clients, per node id (a handle: clones count together).
#[derive(Clone, Debug, Default)]
pub struct NackCounts {
    by_node: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl NackCounts {
    /// NACKs in all.
    pub fn total(&self) -> u64 {
        self.lock().values().sum()
    }

    /// NACKs per node id (an empty id: a client that sent none).
    pub fn by_node(&self) -> BTreeMap<String, u64> {
        self.lock().clone()
    }

    /// Counts a NACK of `type_url` from `node`.
    pub(crate) fn count(&self, node: &str, type_url: &str) {
        let node = bounded(node);
        let node = {
            let mut by_node = self.lock();
            let node = if by_node.contains_key(&node) || by_node.len() < MAX_COUNTED_NODES {
                node
            } else {
                OTHER_NODES.to_owned()
            };
            *by_node.entry(node.clone()).or_default() += 1;
            node
        };
        let kind = type_url.rsplit('.').next().unwrap_or(type_url).to_owned();
        metrics::counter!(NACKS_METRIC, "node" => node, "type" => kind).increment(1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u64>> {
        self.by_node.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_past_the_bound_are_counted_together() {
        let counts = NackCounts::default();
        for i in 0..MAX_COUNTED_NODES + 5 {
            counts.count(&format!("node-{i}"), "type.googleapis.com/x.Cluster");
        }
        counts.count("node-0", "type.googleapis.com/x.Cluster");
        let by_node = counts.by_node();
        assert_eq!(by_node.len(), MAX_COUNTED_NODES + 1);
        assert_eq!(by_node["node-0"], 2);
        assert_eq!(by_node[OTHER_NODES], 5);
        assert_eq!(counts.total(), MAX_COUNTED_NODES as u64 + 6);
    }

    #[test]
    fn a_huge_node_id_is_cut() {
        let counts = NackCounts::default();
        let id = "é".repeat(1_000);
        counts.count(&id, "type.googleapis.com/x.Cluster");
        let key = counts.by_node().into_keys().next().unwrap();
        assert!(key.len() <= MAX_NODE_ID + '…'.len_utf8(), "{}", key.len());
        assert!(key.ends_with('…'));
    }
}
