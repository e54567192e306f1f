//! The tracker's tests: failures, outliers, probes and their backoff.

use super::super::ejection::Left;
use super::*;

fn a() -> Authority {
    Authority::new("10.0.0.1", 50051)
}

fn failure(h: &mut HealthTracker, address: &Authority, now: Instant) -> bool {
    h.record(address, address, Outcome::Failure, None, now)
}

#[test]
fn consecutive_failures_set_aside_and_a_success_resets() {
    let now = Instant::now();
    let a = a();
    let mut h = HealthTracker::new(HealthOptions::default().failure_threshold(3));
    assert!(!failure(&mut h, &a, now));
    assert!(!failure(&mut h, &a, now));
    assert!(
        !h.record(&a, &a, Outcome::Success, None, now),
        "not aside yet"
    );
    assert!(!failure(&mut h, &a, now));
    assert!(!failure(&mut h, &a, now));
    assert!(failure(&mut h, &a, now), "third consecutive failure");
    assert!(h.is_set_aside(&a));
    assert!(!failure(&mut h, &a, now), "already aside");
}

#[test]
fn set_aside_endpoints_are_probed_until_they_answer() {
    let now = Instant::now();
    let a = a();
    let interval = Duration::from_secs(5);
    let mut h = HealthTracker::new(
        HealthOptions::default()
            .failure_threshold(1)
            .probe_interval(interval),
    );
    failure(&mut h, &a, now);
    assert_eq!(h.next_due(), Some(now + interval));
    assert!(h.due_probes(now).is_empty());
    assert_eq!(h.due_probes(now + interval), vec![a.clone()]);
    assert!(
        h.due_probes(now + interval).is_empty(),
        "one probe at a time"
    );
    assert!(!h.probed(&a, false, now + interval));
    assert_eq!(h.next_due(), Some(now + interval * 2));
    assert_eq!(h.due_probes(now + interval * 2).len(), 1);
    assert!(h.probed(&a, true, now + interval * 2));
    assert!(!h.is_set_aside(&a));
    assert_eq!(h.next_due(), None);
}

#[test]
fn a_refused_connection_sets_aside_at_once_unless_told_otherwise() {
    let now = Instant::now();
    let a = a();
    let mut h = HealthTracker::new(HealthOptions::default());
    assert!(h.record(&a, &a, Outcome::Refused, None, now));
    assert!(h.is_set_aside(&a));
    assert!(
        h.record(&a, &a, Outcome::Success, None, now),
        "a success brings it back"
    );
    let mut h = HealthTracker::new(HealthOptions::default().refused_at_once(false));
    assert!(!h.record(&a, &a, Outcome::Refused, None, now));
    assert!(!h.is_set_aside(&a));
}

#[test]
fn a_held_instance_sets_aside_every_endpoint_of_it_until_a_probe_answers() {
    let now = Instant::now();
    let instance = Authority::new("::1", 7000);
    let service = Authority::new("::1", 7001);
    let mut h = HealthTracker::new(HealthOptions::default());
    assert!(h.suspect(&instance, now));
    assert!(h.is_endpoint_aside(&instance, &instance));
    assert!(
        h.is_endpoint_aside(&service, &instance),
        "the service port too"
    );
    assert!(!h.is_set_aside(&service), "its own address is not failing");
    assert!(!h.suspect(&instance, now), "already aside");
    assert_eq!(h.due_probes(now), vec![instance.clone()]);
    assert!(!h.probed(&instance, false, now));
    assert!(
        h.is_endpoint_aside(&service, &instance),
        "a refusing one stays aside"
    );
    assert!(h.probed(&instance, true, now + default_interval()));
    assert!(!h.is_endpoint_aside(&service, &instance));
    assert_eq!(h.set_aside_count(), 0);
}

/// The default probe interval.
fn default_interval() -> Duration {
    HealthOptions::default().probe_interval
}

#[test]
fn forgetting_an_instance_reaches_every_endpoint_of_it_after_the_grace() {
    let now = Instant::now();
    let instance = Authority::new("::1", 7000);
    let service = Authority::new("::1", 7001);
    let mut h = HealthTracker::new(HealthOptions::default().failure_threshold(1));
    h.record(&service, &instance, Outcome::Failure, None, now);
    h.suspect(&instance, now);
    assert_eq!(h.set_aside_count(), 2);
    assert!(!h.forget(&instance, now), "kept aside for a grace");
    assert_eq!(h.set_aside_count(), 2);
    assert!(
        h.due_probes(now + default_interval()).is_empty(),
        "gone: unprobed"
    );
    assert_eq!(h.next_due(), Some(now + FORGET_GRACE));
    assert!(h.sweep(now + FORGET_GRACE));
    assert_eq!(h.set_aside_count(), 0, "nothing left to probe");
    assert_eq!(h.next_due(), None);
}

#[test]
fn an_instance_that_left_aside_and_registers_again_is_probed_at_once() {
    let now = Instant::now();
    let instance = Authority::new("10.0.0.1", 7000);
    let mut h = HealthTracker::new(HealthOptions::default().failure_threshold(1));
    h.record(&instance, &instance, Outcome::Failure, None, now);
    h.forget(&instance, now);
    assert!(h.due_probes(now + default_interval()).is_empty());
    let back = now + Duration::from_secs(3);
    h.registered(&instance, back);
    assert_eq!(h.next_due(), Some(back));
    assert_eq!(h.due_probes(back), vec![instance.clone()]);
    assert!(h.probed(&instance, true, back));
    assert!(!h.is_set_aside(&instance));
}

#[test]
fn disabled_never_sets_aside() {
    let a = a();
    let mut h = HealthTracker::new(HealthOptions::disabled());
    for _ in 0..100 {
        assert!(!failure(&mut h, &a, Instant::now()));
    }
    assert!(!h.suspect(&a, Instant::now()));
}

const PATH: &str = "/helloworld.Greeter/SayHello";

fn answered(h: &mut HealthTracker, address: &Authority, ms: u64, now: Instant) -> bool {
    let latency = Duration::from_millis(ms);
    h.record(
        address,
        address,
        Outcome::Success,
        Some((PATH, latency)),
        now,
    )
}

/// A failure when `failed`, else a success.
fn failed_if(failed: bool) -> Outcome {
    if failed {
        Outcome::Failure
    } else {
        Outcome::Success
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_rate_ejects_after_its_minimum_of_calls_and_an_answer_does_not_undo_it() {
    let a = a();
    let mut h = HealthTracker::new(HealthOptions::default());
    // Three in ten fail, never five in a row: only the rate can tell.
    let mut ejected_at = None;
    for n in 0..40u32 {
        let outcome = failed_if(n % 10 < 3);
        if h.record(&a, &a, outcome, None, Instant::now()) {
            ejected_at = Some(n);
            break;
        }
    }
    let n = ejected_at.expect("ejected by its failure rate");
    assert!(n >= 19, "judged only after 20 calls, ejected at call {n}");
    assert!(matches!(
        h.ejections(Instant::now())[0].reason,
        EjectionReason::FailureRate { .. }
    ));
    assert!(!h.record(&a, &a, Outcome::Success, None, Instant::now()));
    assert!(h.is_set_aside(&a), "one answer proves nothing of a rate");
    // Its probe answers after the interval: it is back, judged afresh.
    let probe_at = Instant::now() + default_interval();
    assert_eq!(h.next_due(), Some(probe_at));
    tokio::time::advance(default_interval()).await;
    assert_eq!(h.due_probes(Instant::now()), vec![a.clone()]);
    assert!(h.probed(&a, true, Instant::now()));
    assert!(!h.record(&a, &a, Outcome::Failure, None, Instant::now()));
    assert!(!h.is_set_aside(&a), "the old window is gone");
}

/// A tracker where `a` failed one call in four, the least its failure rate is judged on:
/// ejected as an outlier.
fn outlier(a: &Authority) -> HealthTracker {
    let mut h = HealthTracker::new(HealthOptions::default().failure_rate_min_calls(4));
    for outcome in [Outcome::Success, Outcome::Success, Outcome::Success] {
        h.record(a, a, outcome, None, Instant::now());
    }
    assert!(h.record(a, a, Outcome::Failure, None, Instant::now()));
    h
}

#[tokio::test(start_paused = true)]
async fn an_outlier_that_then_fails_every_call_is_unreachable_and_no_longer_capped() {
    let a = a();
    let mut h = outlier(&a);
    assert!(matches!(h.standing(&a, &a), Standing::Outlier(_)));
    for _ in 0..4 {
        h.record(&a, &a, Outcome::Failure, None, Instant::now());
    }
    assert_eq!(h.standing(&a, &a), Standing::Out);
    assert_eq!(
        h.ejections(Instant::now())[0].reason,
        EjectionReason::Failing { consecutive: 5 }
    );
}

#[tokio::test(start_paused = true)]
async fn a_record_written_again_does_not_cut_an_outliers_wait() {
    let a = a();
    let mut h = outlier(&a);
    let due = h.next_due();
    h.registered(&a, Instant::now());
    assert_eq!(h.next_due(), due, "re-listed: still waits");
    // Gone and back: probed at once.
    h.forget(&a, Instant::now());
    h.registered(&a, Instant::now());
    assert_eq!(h.next_due(), Some(Instant::now()));
}

#[tokio::test(start_paused = true)]
async fn failures_spread_thin_over_time_eject_nobody() {
    let a = a();
    let mut h = HealthTracker::new(HealthOptions::default());
    for n in 0..200u32 {
        let outcome = failed_if(n % 10 == 0);
        assert!(!h.record(&a, &a, outcome, None, Instant::now()));
        tokio::time::advance(Duration::from_millis(100)).await;
    }
}

/// Three addresses, 10.0.0.1 to 10.0.0.3.
fn three() -> (Authority, Authority, Authority) {
    let address = |host| Authority::new(host, 1);
    (
        address("10.0.0.1"),
        address("10.0.0.2"),
        address("10.0.0.3"),
    )
}

#[tokio::test(start_paused = true)]
async fn a_slow_method_is_ejected_at_its_endpoint_alone_and_let_back_on_trial() {
    let (fast, also_fast, slow) = three();
    let mut h = HealthTracker::new(HealthOptions::default());
    let other = "/helloworld.Greeter/Other";
    let mut ejected = false;
    for _ in 0..10 {
        // Whichever call's record judges the method reports the change.
        ejected |= answered(&mut h, &fast, 5, Instant::now());
        ejected |= answered(&mut h, &also_fast, 6, Instant::now());
        ejected |= answered(&mut h, &slow, 250, Instant::now());
        // Another method, slow everywhere alike: nobody is slow at it.
        for address in [&fast, &also_fast, &slow] {
            let latency = Some((other, Duration::from_millis(400)));
            h.record(address, address, Outcome::Success, latency, Instant::now());
        }
        tokio::time::advance(Duration::from_millis(300)).await;
    }
    assert!(ejected);
    let ejections = h.ejections(Instant::now());
    assert_eq!(ejections.len(), 1, "{ejections:?}");
    let ejection = &ejections[0];
    assert_eq!(ejection.address, slow.to_string());
    assert_eq!(ejection.method.as_deref(), Some(PATH));
    let EjectionReason::Slow { latency, median } = ejection.reason else {
        panic!("{ejection:?}");
    };
    assert!(latency >= Duration::from_millis(200) && median <= Duration::from_millis(6));
    // Out for that method only, and within the cap.
    let standing = h.standing(&slow, &slow);
    assert!(matches!(standing.for_path(PATH), Left::Capped(_)));
    assert_eq!(standing.for_path(other), Left::No);
    assert!(!h.is_set_aside(&slow));
    // Let back on trial after the wait, judged on new calls.
    let wait = ejection.next_try_in.unwrap();
    assert_eq!(ejection.ejected_for + wait, default_interval());
    tokio::time::advance(wait).await;
    assert!(h.sweep(Instant::now()));
    assert_eq!(h.standing(&slow, &slow), Standing::In);
    // Slow again: out again, for longer (one interval more).
    for _ in 0..8 {
        answered(&mut h, &fast, 5, Instant::now());
        answered(&mut h, &also_fast, 5, Instant::now());
        answered(&mut h, &slow, 250, Instant::now());
        tokio::time::advance(Duration::from_millis(300)).await;
    }
    let again = h.ejections(Instant::now());
    assert_eq!(again.len(), 1);
    let waits = again[0].ejected_for + again[0].next_try_in.unwrap();
    assert_eq!(waits, default_interval() * 2, "{again:?}");
}

#[tokio::test(start_paused = true)]
async fn no_endpoint_is_slow_under_the_floor_or_alone_or_for_a_stall() {
    let (a, b, c) = three();
    let mut h = HealthTracker::new(HealthOptions::default());
    for i in 0..20 {
        assert!(!answered(&mut h, &a, 1, Instant::now()));
        assert!(!answered(&mut h, &b, 50, Instant::now()), "under the floor");
        // A stall now and then: the median of its last calls shrugs it off.
        let stall = if i % 4 == 0 { 900 } else { 2 };
        assert!(!answered(&mut h, &c, stall, Instant::now()), "a stall");
        tokio::time::advance(Duration::from_millis(300)).await;
    }
    let mut alone = HealthTracker::new(HealthOptions::default());
    for _ in 0..20 {
        assert!(!answered(&mut alone, &a, 900, Instant::now()), "no peer");
        tokio::time::advance(Duration::from_millis(300)).await;
    }
    // Two: the slower is judged against the faster.
    let mut two = HealthTracker::new(HealthOptions::default());
    for _ in 0..10 {
        answered(&mut two, &a, 2, Instant::now());
        answered(&mut two, &b, 250, Instant::now());
        tokio::time::advance(Duration::from_millis(300)).await;
    }
    let ejections = two.ejections(Instant::now());
    assert_eq!(ejections.len(), 1);
    assert_eq!(ejections[0].address, b.to_string());
}

#[tokio::test(start_paused = true)]
async fn a_waiting_call_checks_once_and_no_answer_ejects_as_hung() {
    let a = a();
    let mut h = HealthTracker::new(HealthOptions::default());
    assert!(h.check_alive(&a, Instant::now()));
    assert!(!h.check_alive(&a, Instant::now()), "one check at a time");
    assert!(
        !h.checked(&a, true, EjectionReason::Hung, Instant::now()),
        "it answered"
    );
    assert!(
        !h.check_alive(&a, Instant::now()),
        "not again within the bound"
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(h.check_alive(&a, Instant::now()));
    assert!(h.checked(&a, false, EjectionReason::Hung, Instant::now()));
    assert!(h.is_hung(&a) && h.is_set_aside(&a));
    assert_eq!(h.standing(&a, &a), Standing::Out, "unreachable: not capped");
    assert!(!h.check_alive(&a, Instant::now()), "ejected already");
    // Its probe is due after the interval; an answer brings it back.
    tokio::time::advance(default_interval()).await;
    assert_eq!(h.due_probes(Instant::now()), vec![a.clone()]);
    assert!(h.probed(&a, true, Instant::now()));
    assert!(!h.is_hung(&a));
    let never = HealthOptions::default().hung_after(None);
    assert!(!HealthTracker::new(never).check_alive(&a, Instant::now()));
}

#[tokio::test(start_paused = true)]
async fn repeated_ejections_back_off_up_to_the_maximum_and_are_forgotten_later() {
    let a = a();
    let options = HealthOptions::default()
        .failure_threshold(1)
        .max_probe_interval(Duration::from_secs(12));
    let mut h = HealthTracker::new(options);
    let mut waits = Vec::new();
    for _ in 0..4 {
        assert!(failure(&mut h, &a, Instant::now()));
        waits.push(h.next_due().unwrap() - Instant::now());
        tokio::time::advance(*waits.last().unwrap()).await;
        h.due_probes(Instant::now());
        assert!(h.probed(&a, true, Instant::now()));
    }
    let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [5, 10, 12, 12]);
    // Long in: the next ejection starts over.
    tokio::time::advance(BACKOFF_MEMORY + Duration::from_secs(1)).await;
    assert!(failure(&mut h, &a, Instant::now()));
    assert_eq!(h.next_due().unwrap() - Instant::now(), default_interval());
}
