//! The Triple headers that name the service a call is for. Dubbo routes a call to a
//! service exported with a group or a version only when the request says which, in
//! `tri-service-group` and `tri-service-version` (dubbo-go answers `UNIMPLEMENTED`
//! without them, Dubbo Java finds no invoker), so the channel adds them, per endpoint,
//! from the service the endpoint was resolved for.

use http::HeaderValue;

use crate::model::ServiceInfo;
use crate::rpc::{TRI_SERVICE_GROUP, TRI_SERVICE_VERSION};

/// The group and version headers of one endpoint's service (none for an empty value).
#[derive(Clone, Debug, Default)]
pub(super) struct ServiceHeaders {
    group: Option<HeaderValue>,
    version: Option<HeaderValue>,
}

impl ServiceHeaders {
    /// The headers naming `service`. A group or version that is not a valid header value
    /// (it came from the registry) is left out: the call then reaches the provider as an
    /// unqualified one, which is what it would have been without the header.
    pub(super) fn of(service: &ServiceInfo) -> ServiceHeaders {
        let value = |text: &str| {
            if text.is_empty() {
                return None;
            }
            HeaderValue::from_str(text)
                .inspect_err(|_| {
                    tracing::debug!(service = %service.name, "a group or version that no header can carry")
                })
                .ok()
        };
        ServiceHeaders {
            group: value(&service.group),
            version: value(&service.version),
        }
    }

    /// Adds the headers the request does not carry already (a caller's own win).
    pub(super) fn apply<B>(&self, request: &mut http::Request<B>) {
        let headers = request.headers_mut();
        for (name, value) in [
            (TRI_SERVICE_GROUP, &self.group),
            (TRI_SERVICE_VERSION, &self.version),
        ] {
            if let Some(value) = value
                && !headers.contains_key(name)
            {
                headers.insert(name, value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> http::Request<()> {
        http::Request::new(())
    }

    /// The cart service of group blue, at `version`.
    fn blue_cart(version: &str) -> ServiceInfo {
        ServiceInfo::new("shop.Cart")
            .with_group("blue")
            .with_version(version)
    }

    #[test]
    fn a_grouped_versioned_service_is_named_and_a_plain_one_is_not() {
        let service = blue_cart("1.2.0");
        let mut named = request();
        ServiceHeaders::of(&service).apply(&mut named);
        assert_eq!(named.headers()[TRI_SERVICE_GROUP], "blue");
        assert_eq!(named.headers()[TRI_SERVICE_VERSION], "1.2.0");

        let mut plain = request();
        ServiceHeaders::of(&ServiceInfo::new("shop.Cart")).apply(&mut plain);
        assert!(plain.headers().is_empty());
    }

    #[test]
    fn a_caller_s_own_header_wins_and_a_value_no_header_carries_is_left_out() {
        let service = blue_cart("bad\nversion");
        let mut request = request();
        request
            .headers_mut()
            .insert(TRI_SERVICE_GROUP, HeaderValue::from_static("green"));
        ServiceHeaders::of(&service).apply(&mut request);
        assert_eq!(request.headers()[TRI_SERVICE_GROUP], "green");
        assert!(!request.headers().contains_key(TRI_SERVICE_VERSION));
    }
}
