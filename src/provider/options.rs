//! What a Java provider sets on each of its services, as typed options: a static tag
//! (`dubbo.tag`), a `weight` and a `warmup`. Pure: validated at build time, then written
//! into each exported service's parameters unless the service sets its own (a service's
//! own value wins, as a Dubbo `ServiceConfig` wins over its `ProviderConfig`).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::model::ServiceInfo;

/// The parameter of a provider's static tag.
pub(super) const TAG_KEY: &str = "dubbo.tag";
/// The parameter of a provider's weight.
pub(super) const WEIGHT_KEY: &str = "weight";
/// The parameter of a provider's warm-up period, in ms.
pub(super) const WARMUP_KEY: &str = "warmup";

/// The longest static tag accepted (a tag is matched against call attachments and rule
/// names, never meant to carry data).
const MAX_TAG_LEN: usize = 128;

/// The typed service defaults of a provider. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ServiceDefaults {
    pub tag: Option<String>,
    pub weight: Option<i64>,
    pub warmup: Option<Duration>,
}

impl ServiceDefaults {
    /// Checks the options as Java reads them: a weight and a warm-up are Java `int`s, a
    /// negative weight and a warm-up past `i32::MAX` ms are refused, a tag is printable
    /// text.
    pub fn validate(&self) -> Result<()> {
        if let Some(tag) = &self.tag {
            if tag.is_empty() || tag.len() > MAX_TAG_LEN {
                return Err(Error::config(format!(
                    "the provider tag must be 1 to {MAX_TAG_LEN} bytes long, not {}",
                    tag.len()
                )));
            }
            if tag
                .chars()
                .any(|c| c.is_control() || c.is_whitespace() || c == ',')
            {
                return Err(Error::config(format!(
                    "the provider tag {tag:?} holds a space, a comma or a control character"
                )));
            }
        }
        if let Some(weight) = self.weight
            && !(0..=i64::from(i32::MAX)).contains(&weight)
        {
            return Err(Error::config(format!(
                "the provider weight must be 0 to {} (a Java int), not {weight}",
                i32::MAX
            )));
        }
        if let Some(warmup) = self.warmup
            && warmup.as_millis() > i32::MAX as u128
        {
            return Err(Error::config(format!(
                "the provider warm-up must be at most {} ms (a Java int), not {} ms",
                i32::MAX,
                warmup.as_millis()
            )));
        }
        Ok(())
    }

    /// Writes the options into `service`'s parameters where it has none of its own.
    pub fn apply(&self, service: &mut ServiceInfo) {
        let mut set = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                service.params.entry(key.to_owned()).or_insert(value);
            }
        };
        set(TAG_KEY, self.tag.clone());
        set(WEIGHT_KEY, self.weight.map(|w| w.to_string()));
        set(WARMUP_KEY, self.warmup.map(|w| w.as_millis().to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_fill_what_a_service_does_not_set_itself() {
        let defaults = ServiceDefaults {
            tag: Some("gray".into()),
            weight: Some(300),
            warmup: Some(Duration::from_secs(60)),
        };
        defaults.validate().unwrap();
        let mut plain = ServiceInfo::new("a.A");
        defaults.apply(&mut plain);
        assert_eq!(plain.params[TAG_KEY], "gray");
        assert_eq!(plain.params[WEIGHT_KEY], "300");
        assert_eq!(plain.params[WARMUP_KEY], "60000");
        let mut own = ServiceInfo::new("b.B").with_param("weight", "50");
        defaults.apply(&mut own);
        assert_eq!(own.params[WEIGHT_KEY], "50");
        let mut untouched = ServiceInfo::new("c.C");
        ServiceDefaults::default().apply(&mut untouched);
        assert!(untouched.params.is_empty());
    }

    #[test]
    fn bad_options_are_clear_errors() {
        let refused = |defaults: ServiceDefaults| defaults.validate().unwrap_err().to_string();
        let weight = |w| ServiceDefaults {
            weight: Some(w),
            ..ServiceDefaults::default()
        };
        assert!(refused(weight(-1)).contains("weight must be 0 to"));
        assert!(refused(weight(i64::from(i32::MAX) + 1)).contains("not 2147483648"));
        weight(0).validate().unwrap();
        let tag = |t: &str| ServiceDefaults {
            tag: Some(t.into()),
            ..ServiceDefaults::default()
        };
        assert!(refused(tag("")).contains("1 to 128 bytes"));
        assert!(refused(tag("a b")).contains("a space"));
        assert!(refused(tag("a,b")).contains("a comma"));
        assert!(refused(tag(&"x".repeat(129))).contains("not 129"));
        let warmup = ServiceDefaults {
            warmup: Some(Duration::from_secs(u64::MAX / 2)),
            ..ServiceDefaults::default()
        };
        assert!(refused(warmup).contains("warm-up must be at most"));
    }
}
