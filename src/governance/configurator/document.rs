//! One configurator document as parsed: its override URLs in the order Java applies them,
//! and its fields and items as written, to show it.

use std::cmp::Ordering;

use serde_yaml_ng::Value;

use super::item::ConfiguratorItem;
use super::legacy;
use super::matching::Override;
use super::parse::{Document, Item};
use crate::governance::rule_header::{Governed, RuleForm, RuleHeader};
use crate::governance::rule_yaml::{field, load, mappings, rule_error};

/// The suffix of a configurator document's key in the config centre.
pub const CONFIGURATORS_SUFFIX: &str = ".configurators";

/// One configurator document: its override items in the order Java applies them. See the
/// module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configurators {
    pub(super) key: String,
    pub(super) items: Vec<Override>,
    /// The document's own fields and items as written, to show it.
    pub(super) header: RuleHeader,
    pub(super) configs: Vec<ConfiguratorItem>,
}

/// Java's `String.compareTo`: UTF-16 code units in order.
fn java_compare(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Java's `Configurator.compareTo`: by host as text (so `0.0.0.0` first and specific
/// hosts, applied later, win), then by the `priority` parameter (an integer, or the
/// document is refused).
fn sorted(key: &str, overrides: Vec<Override>) -> crate::error::Result<Vec<Override>> {
    let mut keyed = overrides
        .into_iter()
        .map(|o| {
            let priority = match o.params.get("priority").map(String::as_str) {
                None | Some("") => 0,
                Some(p) => p
                    .parse::<i32>()
                    .map_err(|_| rule_error(key, "the priority parameter must be an integer"))?,
            };
            Ok((priority, o))
        })
        .collect::<crate::error::Result<Vec<_>>>()?;
    keyed.sort_by(|(pa, a), (pb, b)| java_compare(&a.host, &b.host).then(pa.cmp(pb)));
    Ok(keyed.into_iter().map(|(_, o)| o).collect())
}

impl Governed for Configurators {
    fn header(&self) -> &RuleHeader {
        &self.header
    }
}

impl Configurators {
    /// The config-centre key of `app`'s document, or of a service's
    /// (`{interface}:{version}:{group}`, as the caller builds it).
    pub fn key_for(app_or_service: &str) -> String {
        format!("{app_or_service}{CONFIGURATORS_SUFFIX}")
    }

    /// Parses the document stored under `key`. Errors ([`crate::error::Error::Rule`]) are the
    /// cases where Java's parser throws and keeps the previous configurators (not YAML, not
    /// a mapping, no `configs`, an item without `parameters`, a service-scope document
    /// without `key`, a field of the wrong type, over
    /// [`MAX_RULE_BYTES`](crate::governance::MAX_RULE_BYTES)) plus the forms refused here (see the
    /// module docs). The legacy form, a JSON list of override URLs, is read as Java reads
    /// it (see `legacy`). An item address Java can never apply (a CIDR, a path) is dropped
    /// alone, said in [`Governed::notes`].
    pub fn parse(key: &str, yaml: &str) -> crate::error::Result<Configurators> {
        if yaml.len() <= crate::governance::MAX_RULE_BYTES
            && let Some(read) = legacy::read(key, yaml)
        {
            let (items, configs) = read?.into_iter().unzip();
            return Ok(Configurators {
                key: key.to_owned(),
                items: sorted(key, items)?,
                header: RuleHeader::defaults(),
                configs,
            });
        }
        let map = load(key, yaml)?;
        let mut header = RuleHeader::read(key, &map, RuleForm::Configurators)?;
        header.is_v30(key, "v2.7, v3.0 or v3.1")?;
        let doc = Document {
            version: header
                .config_version
                .clone()
                .unwrap_or_else(|| "null".to_owned()),
            app_scope: header.scope.as_deref() == Some("application"),
            key: header.rule_key.clone(),
            enabled: header.enabled,
        };
        let items = match field(&map, "configs") {
            Some(Value::Sequence(_)) => mappings(key, &map, "configs")?.unwrap_or_default(),
            _ => {
                let mut reason = "no configs list".to_owned();
                for note in &header.notes {
                    reason.push_str("; ");
                    reason.push_str(note);
                }
                return Err(rule_error(key, reason));
            }
        };
        if items.is_empty() {
            return Err(rule_error(
                key,
                "configs is empty (Java keeps the previous configurators)",
            ));
        }
        let items = items
            .into_iter()
            .map(|m| Item::parse(key, m))
            .collect::<crate::error::Result<Vec<_>>>()?;
        let mut overrides = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let mut dropped = Vec::new();
            doc.overrides(key, item, &mut overrides, &mut dropped)?;
            header.notes.extend(
                dropped
                    .into_iter()
                    .map(|why| format!("item {} dropped there: {why}", i + 1)),
            );
        }
        Ok(Configurators {
            key: key.to_owned(),
            items: sorted(key, overrides)?,
            header,
            configs: items.into_iter().map(|item| item.written).collect(),
        })
    }

    /// The key the document was stored under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Its `configs` items as written, in order, to show what each targets and sets.
    pub fn configs(&self) -> &[ConfiguratorItem] {
        &self.configs
    }

    /// How many override items the document holds (one per address and service or
    /// application of each `configs` item).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the document holds no override items (never, for a parsed one).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}
