//! A hundred instances, two revisions, two metadata fetches, on the embedded store.
//!
//! `cargo run --example demo`

use std::sync::Arc;

use introspect::MemoryStore;
use introspect::demo::{DemoOptions, run};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let report = run(
        Arc::new(MemoryStore::new()),
        DemoOptions::default(),
        &mut std::io::stdout(),
    )
    .await?;
    assert_eq!(
        report.fetches as usize, report.revisions,
        "one fetch per revision"
    );
    Ok(())
}
