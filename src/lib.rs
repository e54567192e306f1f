//! Introspect: application-level service discovery ("service introspection") for Rust RPC
//! services.

#![warn(missing_docs)]

pub mod error;
pub mod limits;
pub mod model;
pub mod store;

pub use error::{Error, Result};
pub use limits::Limits;
