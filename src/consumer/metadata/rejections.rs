//! Servers the identity check refused, wherever they were found (a MetadataService call, a
//! balanced channel's endpoint): counted per app and logged once per cause, the app
//! expected and the names presented in the line, through one aggregator for the resolver,
//! so that a rogue found by both a metadata fetch and a channel is one line.

use std::sync::Arc;

use crate::consumer::stats::Counters;
use crate::error::Error;
use crate::warnings::{Aggregator, aggregated};

/// See the module docs.
pub(crate) struct Rejections {
    counters: Arc<Counters>,
    warnings: Aggregator,
}

impl Rejections {
    /// Counting into `counters`.
    pub fn new(counters: Arc<Counters>) -> Arc<Self> {
        Arc::new(Rejections {
            counters,
            warnings: Aggregator::default(),
        })
    }

    /// Counts and logs `refusal`, an [`Error::IdentityRejected`] (other errors are no
    /// refusal and are ignored). The cause of the line is the app, what is wrong and the
    /// names presented: one line per rogue, not per call.
    pub fn record(&self, refusal: &Error) {
        let Error::IdentityRejected {
            address,
            app,
            expected,
            presented,
            cause,
        } = refusal
        else {
            return;
        };
        self.counters.count_rejection(app);
        let subject = format!("{app}\n{cause}\n{presented}");
        aggregated!(warn, self.warnings,
            "server refused: its certificate does not pass the identity check of its app",
            &subject, %app, %address, %expected, %presented, %cause);
    }
}
