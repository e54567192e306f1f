//! The fallback rule, written once: endpoints that health sets aside take no call, unless
//! that would leave a call nowhere to go; then every one of them takes calls again (panic
//! mode), as Envoy's panic threshold at 100% and Dubbo's "all unavailable, try them all"
//! do. The balancer applies it per call to the endpoints a call is routed to; views of
//! health (a subscription's [`healthy`](crate::SubscriptionHandle::healthy) set, xDS) apply
//! it to a whole set.

/// Fills `out` with the `members` that `is_aside` does not set aside, in their order, or
/// with all of them when every one is set aside. Returns whether it fell back (panic mode:
/// at least one member, all set aside).
///
/// ```
/// use introspect::consumer::route_around;
///
/// let mut out = Vec::new();
/// assert!(!route_around(&[1, 2, 3], |n| n == 2, &mut out));
/// assert_eq!(out, [1, 3]);
/// assert!(route_around(&[1, 2], |_| true, &mut out));
/// assert_eq!(out, [1, 2]);
/// ```
pub fn route_around<T: Copy>(
    members: &[T],
    is_aside: impl Fn(T) -> bool,
    out: &mut Vec<T>,
) -> bool {
    out.clear();
    out.extend(members.iter().copied().filter(|&m| !is_aside(m)));
    let panic = out.is_empty() && !members.is_empty();
    if panic {
        out.extend_from_slice(members);
    }
    panic
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_aside_leave_unless_all_are_and_nothing_is_no_panic() {
        let mut out = vec![9];
        assert!(!route_around(&[] as &[u8], |_| true, &mut out));
        assert!(out.is_empty());
        assert!(!route_around(&[1, 2, 3], |_| false, &mut out));
        assert_eq!(out, [1, 2, 3]);
        assert!(!route_around(&[1, 2, 3], |n| n != 3, &mut out));
        assert_eq!(out, [3]);
        assert!(route_around(&[3, 1], |_| true, &mut out));
        assert_eq!(out, [3, 1]);
    }
}
