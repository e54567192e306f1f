//! The fallback rule, written once: endpoints that health sets aside take no call, unless
//! that would leave a call nowhere to go; then every one of them takes calls again (panic
//! mode), as Envoy's panic threshold at 100% and Dubbo's "all unavailable, try them all"
//! do. The balancer applies it per call to the endpoints a call is routed to; views of
//! health (a subscription's [`healthy`](crate::SubscriptionHandle::healthy) set, xDS) apply
//! it to a whole set.
//!
//! Outliers (a failure rate, a slow method) are capped besides: at most a share of a call's
//! members is left out for them ([`route_around_capped`]), as Envoy's
//! `max_ejection_percent`; endpoints that cannot be reached are not (a call to them fails).

use tokio::time::Instant;

use super::ejection::Left;

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

/// How many of `members` outliers may leave out: `max_percent` of them, rounded up (as
/// Envoy ejects at least one host whatever its percentage), so that of three providers two
/// bad ones are both out and the good one is not left to share with a slow one.
fn may_leave(members: usize, max_percent: u8) -> usize {
    (members * usize::from(max_percent.min(100))).div_ceil(100)
}

/// What [`route_around_capped`] did besides leaving endpoints out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Around {
    /// Every member was out: all of them take calls (panic mode).
    pub panic: bool,
    /// Outliers let back in by the cap (or because nothing else could take the call).
    pub capped_back: usize,
}

/// Fills `out` with the `members` a call may go to, by where `left` says each stands: none
/// that cannot be reached while another can take the call, and of the outliers at most
/// `max_percent` of the members (rounded up) left out, those ejected longest; the others
/// take calls.
/// When that leaves nothing, the outliers take calls; when there are none, every member
/// does (panic mode). Members keep their order.
pub(crate) fn route_around_capped<T: Copy>(
    members: &[T],
    left: impl Fn(T) -> Left,
    max_percent: u8,
    out: &mut Vec<T>,
) -> Around {
    out.clear();
    let mut around = Around::default();
    let mut outliers: Vec<(Instant, usize)> = Vec::new();
    for (i, &m) in members.iter().enumerate() {
        if let Left::Capped(since) = left(m) {
            outliers.push((since, i));
        }
    }
    let may_leave = may_leave(members.len(), max_percent);
    let mut let_back = Vec::new();
    if outliers.len() > may_leave {
        outliers.sort_unstable();
        let_back.extend(outliers[may_leave..].iter().map(|&(_, i)| i));
        around.capped_back = let_back.len();
    }
    out.extend(members.iter().enumerate().filter_map(|(i, &m)| {
        let takes = match left(m) {
            Left::No => true,
            Left::Out => false,
            Left::Capped(_) => let_back.contains(&i),
        };
        takes.then_some(m)
    }));
    if out.is_empty() && !outliers.is_empty() {
        out.extend(
            members
                .iter()
                .copied()
                .filter(|&m| matches!(left(m), Left::Capped(_))),
        );
        around.capped_back = out.len();
    }
    if out.is_empty() && !members.is_empty() {
        out.extend_from_slice(members);
        around.panic = true;
    }
    around
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

    #[test]
    fn outliers_past_the_cap_take_calls_the_longest_ejected_stay_out() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        let mut out = Vec::new();
        // Three of four slow, the cap at 50%: the two ejected first stay out.
        let left = |m: u8| match m {
            1 => Left::Capped(at(2)),
            2 => Left::Capped(at(1)),
            3 => Left::Capped(at(3)),
            _ => Left::No,
        };
        let around = route_around_capped(&[0, 1, 2, 3], left, 50, &mut out);
        assert_eq!(out, [0, 3]);
        assert_eq!(
            around,
            Around {
                panic: false,
                capped_back: 1
            }
        );
        // Unreachable ones are not capped and do not count.
        let left = |m: u8| if m < 3 { Left::Out } else { Left::No };
        assert_eq!(
            route_around_capped(&[0, 1, 2, 3], left, 10, &mut out),
            Around::default()
        );
        assert_eq!(out, [3]);
        // Nothing but an unreachable one and an outlier: the outlier answers.
        let left = |m: u8| {
            if m == 0 {
                Left::Out
            } else {
                Left::Capped(at(0))
            }
        };
        let around = route_around_capped(&[0, 1], left, 100, &mut out);
        assert_eq!((out.as_slice(), around.panic), (&[1][..], false));
        // All unreachable: all of them (panic mode).
        assert!(route_around_capped(&[0, 1], |_| Left::Out, 50, &mut out).panic);
        assert_eq!(out, [0, 1]);
    }

    proptest::proptest! {
        /// Never more outliers out than the cap allows, never one that is in left out,
        /// never an empty answer for members.
        #[test]
        fn the_cap_holds(
            kinds in proptest::collection::vec(0u8..3, 0..40),
            max_percent in 0u8..=100,
        ) {
            let t0 = Instant::now();
            let members: Vec<usize> = (0..kinds.len()).collect();
            let left = |i: usize| match kinds[i] {
                0 => Left::No,
                1 => Left::Out,
                _ => Left::Capped(t0 + std::time::Duration::from_millis(i as u64)),
            };
            let mut out = Vec::new();
            let around = route_around_capped(&members, left, max_percent, &mut out);
            proptest::prop_assert_eq!(out.is_empty(), members.is_empty());
            let cap = (members.len() * usize::from(max_percent)).div_ceil(100);
            let outliers: Vec<usize> = members.iter().copied().filter(|&i| kinds[i] == 2).collect();
            let outliers_out = outliers.iter().filter(|i| !out.contains(i)).count();
            proptest::prop_assert!(outliers_out <= cap, "{outliers_out} out, cap {cap}");
            for &i in &members {
                if kinds[i] == 0 {
                    proptest::prop_assert!(out.contains(&i));
                }
            }
            if around.panic {
                proptest::prop_assert_eq!(&out, &members);
            }
        }
    }
}
