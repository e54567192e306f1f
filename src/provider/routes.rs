//! Adding the provider's services to a tonic router the user built.

use std::panic::AssertUnwindSafe;

use tonic::transport::server::Router;

use crate::error::{Error, Result};

/// Adds one service to `router` with `add`, turning tonic's panic on a service the router
/// already serves into an error.
pub(super) fn add_once<L>(
    router: Router<L>,
    what: &str,
    add: impl FnOnce(Router<L>) -> Router<L>,
) -> Result<Router<L>> {
    std::panic::catch_unwind(AssertUnwindSafe(move || add(router))).map_err(|_| {
        Error::Misuse(format!(
            "the router already serves {what}: `Provider::serve` adds it itself (turn \
             reflection off with `reflection(false)` if yours serves its own)"
        ))
    })
}
