//! Who the registry knows, for [`placement`](super::placement): the apps of providers and
//! consumer records, and, of the interfaces rule keys name, those the mapping or a
//! consumer's subscription knows. Read once per command, each interface asked once.

use std::collections::BTreeSet;

use introspect::Error;
use introspect::backend::Backend;
use introspect::limits::Limits;

use super::RuleForm;
use super::placement::{Known, Subject, Unread, stem, unread};

/// Interfaces asked of the mapping at most per command; those beyond are taken as known
/// (never named as read by nobody on a guess).
const MAX_ASKED: usize = 500;

/// What the registry knows of the members that could read `keys`.
pub async fn known(backend: &Backend, keys: &[String]) -> Result<Known, Error> {
    let limits = Limits::default();
    let mut known = Known::default();
    known
        .apps
        .extend(backend.instances().list_apps(&limits).await?.into_keys());
    let consumers = backend.consumers().list(&limits).await?;
    for record in &consumers.records {
        known.apps.insert(record.app.clone());
        for service in &record.subscriptions {
            known.interfaces.insert(service.interface.clone());
        }
    }
    let mut asked = BTreeSet::new();
    for key in keys {
        let Some((form, stem)) = stem(key) else {
            continue;
        };
        let interface = match Subject::of(stem) {
            Subject::App(name) if known.apps.contains(&name) => continue,
            Subject::App(_) if matches!(form, RuleForm::Tag | RuleForm::Migration) => continue,
            Subject::App(name) | Subject::Service(name) | Subject::Malformed(name) => name,
        };
        if interface.is_empty() || known.interfaces.contains(&interface) {
            continue;
        }
        if asked.len() >= MAX_ASKED {
            known.interfaces.insert(interface);
            continue;
        }
        if asked.insert(interface.clone())
            && !backend.mapping().get(&interface, &limits).await?.is_empty()
        {
            known.interfaces.insert(interface);
        }
    }
    Ok(known)
}

/// The rules of `keys` (as listed, or the error of the listing) that no known member
/// reads.
async fn unread_of(
    backend: &Backend,
    keys: Result<Vec<String>, Error>,
) -> Result<Vec<Unread>, Error> {
    let keys = keys?;
    let known = known(backend, &keys).await?;
    Ok(unread(&keys, &known))
}

/// The text line and JSON value (`null` when the registry could not be asked) of the rules
/// of `keys` that no known member reads, for `route`, `rule list` and the console: the
/// line says plainly when the registry could not be asked.
pub async fn report(
    backend: &Backend,
    keys: Result<Vec<String>, Error>,
) -> (Option<String>, serde_json::Value) {
    match unread_of(backend, keys).await {
        Ok(unread) => (
            super::placement::line(&unread),
            serde_json::to_value(&unread).unwrap_or_default(),
        ),
        Err(error) => (
            Some(format!(
                "rules nobody reads: cannot tell (the registry could not be asked: {error})"
            )),
            serde_json::Value::Null,
        ),
    }
}
