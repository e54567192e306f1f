//! Writing rules through a backend's config part, as an operator's tool writes them:
//! compare-and-set against the version just read, in group `dubbo`.

use introspect::Backend;
use introspect::backend::{ConfigKey, ConfigWrite};

const GROUP: &str = "dubbo";

/// Writes `text` under `key`, over whatever is there.
pub async fn put_rule(backend: &Backend, key: &str, text: &str) {
    let config = backend.config();
    let current = config
        .get(&ConfigKey::new(key, GROUP).unwrap())
        .await
        .unwrap();
    config
        .put(
            &ConfigKey::new(key, GROUP).unwrap(),
            ConfigWrite::new(text, current.as_ref().map(|c| &c.version)),
        )
        .await
        .unwrap();
}

/// Deletes the rule under `key`, which must be there.
pub async fn delete_rule(backend: &Backend, key: &str) {
    let config = backend.config();
    let current = config
        .get(&ConfigKey::new(key, GROUP).unwrap())
        .await
        .unwrap()
        .expect("the rule is there");
    config
        .delete(&ConfigKey::new(key, GROUP).unwrap(), &current.version)
        .await
        .unwrap();
}
