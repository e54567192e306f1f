//! Which endpoints a balanced channel with an identity check hands to its balancer: each is
//! dialled and checked before it joins, and one that the check rejects is kept out, and
//! checked again with a TLS handshake every recheck interval until it passes.
//!
//! An endpoint is, per address:
//!
//! * *checking*: its first dial is under way (at most [`CHECKS_AT_ONCE`] per channel at
//!   once); it joins when the handshake passes, with the connection the check made. When
//!   no certificate came at all (nothing answers, the handshake timed out), the check had
//!   nothing to judge: it joins to be dialled lazily, as without the check, and the
//!   handshake of that dial is checked as every other;
//! * *admitted*: in the balancer. Each of its later handshakes (a reconnection) is checked
//!   too; one refused evicts it at once;
//! * *rejected*: out of the balancer, and out of passive health's endpoints, so panic mode
//!   never routes to it; a health probe, which sees only TCP, has no say. Every recheck
//!   interval it is dialled again with the check; it rejoins once that passes.
//!
//! Each rejection (first check, eviction, or a recheck that finds another cause) is
//! recorded in the resolver's [`Rejections`]; a recheck that finds the same is not.
//! Results of checks of an address that left meanwhile (or was checked again since) are
//! recognised by a generation number and dropped.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tonic::transport::Channel;

use super::dial::Dialer;
use crate::consumer::metadata::Rejections;
use crate::consumer::timer::sleep_until;
use crate::error::Error;
use crate::model::{Authority, Endpoint};
use crate::tls::{LastRefusal, Refusals};

/// Checks (first dials and rechecks) one channel runs at once.
pub(super) const CHECKS_AT_ONCE: usize = 64;

/// What a check found.
pub(super) enum Checked {
    /// The server's certificate passed: the connection made.
    Passed(Channel),
    /// The server presented a certificate the check refuses (an
    /// [`Error::IdentityRejected`]).
    Rejected(Error),
    /// No certificate to judge (nothing answered in time): the channel to dial lazily.
    Unreached(Channel),
    /// The address cannot be dialled at all.
    Unusable(Error),
}

/// Dials one address with the identity check.
pub(super) trait Checker: Send + Sync + 'static {
    /// Dials `address` (resolved for `app`), telling refused handshakes (this one and every
    /// later one of the returned channel) to `refusals`, whose last refusal `last` holds.
    fn check(
        &self,
        address: &Authority,
        app: &str,
        refusals: Refusals,
        last: LastRefusal,
    ) -> BoxFuture<'static, Checked>;
}

/// The real checker: a tonic connection within the dialer's connect timeout.
impl Checker for Dialer {
    fn check(
        &self,
        address: &Authority,
        app: &str,
        refusals: Refusals,
        last: LastRefusal,
    ) -> BoxFuture<'static, Checked> {
        let endpoint = self.checked(address, app, refusals);
        let timeout = self.connect_timeout;
        async move {
            let endpoint = match endpoint {
                Ok(endpoint) => endpoint,
                Err(e) => return Checked::Unusable(e),
            };
            match tokio::time::timeout(timeout, endpoint.connect()).await {
                Ok(Ok(channel)) => Checked::Passed(channel),
                _ => match last.take() {
                    Some(refusal) => Checked::Rejected(refusal),
                    None => Checked::Unreached(endpoint.connect_lazy()),
                },
            }
        }
        .boxed()
    }
}

/// What the feeder is to do with its balancer.
#[derive(Debug)]
pub(super) enum Admitted {
    /// Hand it this endpoint, with its channel.
    Insert(Authority, Endpoint, Channel),
    /// Take this endpoint out: a later handshake of it was refused.
    Evict(Authority),
    /// Nothing, but the refused endpoints changed (one was refused, or left): publish them.
    Refused,
}

impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Checked::Passed(_) => "Passed",
            Checked::Rejected(_) => "Rejected",
            Checked::Unreached(_) => "Unreached",
            Checked::Unusable(_) => "Unusable",
        })
    }
}

/// One address followed.
struct Entry {
    /// The generation of its last check: results and refusals of others are stale.
    generation: u64,
    endpoint: Endpoint,
    /// The last refusal of the channel being checked or admitted.
    last: LastRefusal,
    state: State,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Being checked; `after` is the rejection it had, for a recheck.
    Checking { after: Option<Arc<str>> },
    /// Handed to the balancer.
    Admitted,
    /// Kept out, checked again at `due`.
    Rejected { why: Arc<str>, due: Instant },
}

/// See the module docs.
pub(super) struct Admission {
    checker: Arc<dyn Checker>,
    rejections: Arc<Rejections>,
    interval: Duration,
    entries: BTreeMap<Authority, Entry>,
    /// Rejected addresses by when they are checked again.
    schedule: BTreeMap<(Instant, u64), Authority>,
    /// Rejected addresses (and those being checked again), with why.
    rejected: BTreeMap<Authority, Arc<str>>,
    /// Addresses in their first check.
    first_checks: usize,
    checks: JoinSet<(Authority, u64, Checked)>,
    permits: Arc<Semaphore>,
    refused_tx: mpsc::UnboundedSender<(Authority, u64)>,
    refused_rx: mpsc::UnboundedReceiver<(Authority, u64)>,
    next_generation: u64,
}

impl Admission {
    /// Checking with `checker`, recording rejections in `rejections`, checking rejected
    /// endpoints again every `interval`.
    pub fn new(checker: Arc<dyn Checker>, rejections: Arc<Rejections>, interval: Duration) -> Self {
        let (refused_tx, refused_rx) = mpsc::unbounded_channel();
        Admission {
            checker,
            rejections,
            interval,
            entries: BTreeMap::new(),
            schedule: BTreeMap::new(),
            rejected: BTreeMap::new(),
            first_checks: 0,
            checks: JoinSet::new(),
            permits: Arc::new(Semaphore::new(CHECKS_AT_ONCE)),
            refused_tx,
            refused_rx,
            next_generation: 0,
        }
    }

    /// `address` appeared with `endpoint`: it is checked, and joins once it passes.
    pub fn offer(&mut self, address: Authority, endpoint: Endpoint) {
        self.withdraw(&address);
        self.first_checks += 1;
        let entry = Entry {
            generation: 0,
            endpoint,
            last: LastRefusal::default(),
            state: State::Checking { after: None },
        };
        self.entries.insert(address.clone(), entry);
        self.start_check(&address);
    }

    /// The endpoint at `address` changed (a new revision there): it is kept for when the
    /// address is next handed over. Whether the address was known.
    pub fn refresh(&mut self, address: &Authority, endpoint: Endpoint) -> bool {
        match self.entries.get_mut(address) {
            Some(entry) => {
                entry.endpoint = endpoint;
                true
            }
            None => false,
        }
    }

    /// `address` left: whatever is known of it is forgotten (the feeder takes it out of the
    /// balancer if it was there).
    pub fn withdraw(&mut self, address: &Authority) {
        if let Some(entry) = self.entries.remove(address) {
            self.leave(address, &entry.state, entry.generation);
        }
    }

    /// The rejected addresses, with why.
    pub fn rejected(&self) -> &BTreeMap<Authority, Arc<str>> {
        &self.rejected
    }

    /// Why calls cannot be routed, when every endpoint is rejected: none is admitted
    /// (`admitted` says how many are) nor in its first check, and some are rejected.
    pub fn all_rejected(&self, admitted: usize) -> Option<String> {
        if admitted > 0 || self.first_checks > 0 {
            return None;
        }
        let (_, why) = self.rejected.iter().next()?;
        Some(format!(
            "every endpoint was refused by the identity check ({} refused); {why}",
            self.rejected.len()
        ))
    }

    /// The next thing the balancer must be told. Cancel-safe: state changes only once
    /// something has come, and then it is returned.
    pub async fn next(&mut self) -> Admitted {
        loop {
            let due = self.schedule.keys().next().map(|(at, _)| *at);
            tokio::select! {
                Some(joined) = self.checks.join_next() => {
                    let Ok((address, generation, checked)) = joined else { continue };
                    if let Some(admitted) = self.finish(address, generation, checked) {
                        return admitted;
                    }
                }
                Some((address, generation)) = self.refused_rx.recv() => {
                    if let Some(admitted) = self.refused(address, generation) {
                        return admitted;
                    }
                }
                () = sleep_until(due) => self.recheck_due(),
            }
        }
    }

    /// Starts a check of `address` (an entry), of a new generation.
    fn start_check(&mut self, address: &Authority) {
        let generation = self.next_generation;
        self.next_generation += 1;
        let Some(entry) = self.entries.get_mut(address) else {
            return;
        };
        let refused = self.refused_tx.clone();
        let notified = address.clone();
        let (refusals, last) = Refusals::kept(move || {
            let _ = refused.send((notified.clone(), generation));
        });
        entry.generation = generation;
        entry.last = last.clone();
        let check = self
            .checker
            .check(address, &entry.endpoint.app, refusals, last);
        let permits = self.permits.clone();
        let address = address.clone();
        self.checks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            // A check that panics has nothing to say of the server: it is left out.
            let checked = AssertUnwindSafe(check)
                .catch_unwind()
                .await
                .unwrap_or_else(|_| {
                    Checked::Unusable(Error::config("the identity check panicked"))
                });
            (address, generation, checked)
        });
    }

    /// A check of `address` of `generation` found `checked`.
    fn finish(
        &mut self,
        address: Authority,
        generation: u64,
        checked: Checked,
    ) -> Option<Admitted> {
        let entry = self.entries.get(&address)?;
        let State::Checking { after } = &entry.state else {
            return None;
        };
        if entry.generation != generation {
            return None;
        }
        let after = after.clone();
        match checked {
            Checked::Passed(channel) => {
                if after.is_some() {
                    tracing::info!(%address, "refused endpoint passes the identity check; it rejoins");
                }
                Some(self.admit(address, channel))
            }
            // Rejected before and still not answering: it stays out.
            Checked::Unreached(_) if after.is_some() => {
                let why = after.unwrap_or_default();
                self.reject(&address, why);
                Some(Admitted::Refused)
            }
            Checked::Unreached(channel) => Some(self.admit(address, channel)),
            Checked::Rejected(refusal) => {
                let why: Arc<str> = Arc::from(refusal.to_string());
                if after.as_deref() == Some(&*why) {
                    tracing::debug!(%address, %refusal, "refused endpoint still refused");
                } else {
                    self.rejections.record(&refusal);
                }
                self.reject(&address, why);
                Some(Admitted::Refused)
            }
            Checked::Unusable(error) => {
                tracing::warn!(%address, %error, "endpoint left out of the channel");
                self.withdraw(&address);
                Some(Admitted::Refused)
            }
        }
    }

    /// A handshake of the channel of `address` of `generation` was refused.
    fn refused(&mut self, address: Authority, generation: u64) -> Option<Admitted> {
        let entry = self.entries.get(&address)?;
        if entry.generation != generation || entry.state != State::Admitted {
            return None;
        }
        let refusal = entry.last.take()?;
        self.rejections.record(&refusal);
        tracing::warn!(%address, "endpoint refused on reconnection; it leaves the channel");
        self.reject(&address, Arc::from(refusal.to_string()));
        Some(Admitted::Evict(address))
    }

    /// Starts the rechecks that are due.
    fn recheck_due(&mut self) {
        let now = Instant::now();
        while let Some(entry) = self.schedule.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let address = entry.remove();
            let Some(entry) = self.entries.get_mut(&address) else {
                continue;
            };
            if let State::Rejected { why, .. } = &entry.state {
                entry.state = State::Checking {
                    after: Some(why.clone()),
                };
                self.start_check(&address);
            }
        }
    }

    fn admit(&mut self, address: Authority, channel: Channel) -> Admitted {
        let entry = self.entries.get_mut(&address).expect("checked entry");
        let endpoint = entry.endpoint.clone();
        let before = std::mem::replace(&mut entry.state, State::Admitted);
        let generation = entry.generation;
        self.leave(&address, &before, generation);
        Admitted::Insert(address, endpoint, channel)
    }

    fn reject(&mut self, address: &Authority, why: Arc<str>) {
        let Some(entry) = self.entries.get_mut(address) else {
            return;
        };
        let due = Instant::now() + self.interval;
        let generation = entry.generation;
        let before = std::mem::replace(
            &mut entry.state,
            State::Rejected {
                why: why.clone(),
                due,
            },
        );
        self.leave(address, &before, generation);
        self.schedule.insert((due, generation), address.clone());
        self.rejected.insert(address.clone(), why);
    }

    /// Forgets what `address` was counted as in state `state`.
    fn leave(&mut self, address: &Authority, state: &State, generation: u64) {
        match state {
            State::Checking { after: None } => self.first_checks -= 1,
            State::Checking { after: Some(_) } => {
                self.rejected.remove(address);
            }
            State::Rejected { due, .. } => {
                self.schedule.remove(&(*due, generation));
                self.rejected.remove(address);
            }
            State::Admitted => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::stats::Counters;
    use crate::model::ServiceInfo;
    use std::sync::Mutex;

    /// A checker answering from a script: per address, what the next checks find.
    #[derive(Default)]
    struct Scripted {
        answers: Mutex<BTreeMap<String, Vec<&'static str>>>,
        checks: Mutex<Vec<String>>,
        /// The refusals of each check, in order.
        given: Mutex<Vec<Refusals>>,
    }

    impl Scripted {
        fn answer(&self, address: &str, answers: &[&'static str]) {
            let mut all = self.answers.lock().unwrap();
            all.insert(address.into(), answers.iter().rev().copied().collect());
        }

        fn checks(&self) -> Vec<String> {
            std::mem::take(&mut *self.checks.lock().unwrap())
        }
    }

    fn refusal(address: &str, presented: &str) -> Error {
        Error::IdentityRejected {
            address: address.into(),
            app: "pay".into(),
            expected: "DNS:pay".into(),
            presented: presented.into(),
            cause: "does not name the app".into(),
        }
    }

    impl Checker for Scripted {
        fn check(
            &self,
            address: &Authority,
            _app: &str,
            refusals: Refusals,
            _last: LastRefusal,
        ) -> BoxFuture<'static, Checked> {
            self.checks.lock().unwrap().push(address.to_string());
            self.given.lock().unwrap().push(refusals);
            let mut answers = self.answers.lock().unwrap();
            let next = answers.get_mut(address.as_str()).and_then(Vec::pop);
            let channel =
                || tonic::transport::Endpoint::from_static("http://127.0.0.1:1").connect_lazy();
            let address = address.to_string();
            async move {
                match next {
                    Some("pass") => Checked::Passed(channel()),
                    Some("silent") => Checked::Unreached(channel()),
                    Some(presented) => Checked::Rejected(refusal(&address, presented)),
                    None => Checked::Unusable(Error::config("unscripted")),
                }
            }
            .boxed()
        }
    }

    fn endpoint(host: &str) -> (Authority, Endpoint) {
        let endpoint = Endpoint {
            app: "pay".into(),
            host: host.into(),
            port: 1,
            instance_port: 1,
            protocol: "tri".into(),
            revision: "r".into(),
            service: Arc::new(ServiceInfo::new("pay.Pay")),
            timestamp: 0,
        };
        (endpoint.authority(), endpoint)
    }

    fn admission(checker: &Arc<Scripted>) -> (Admission, Arc<Counters>) {
        let counters = Arc::new(Counters::default());
        let rejections = Rejections::new(counters.clone());
        let checker: Arc<dyn Checker> = checker.clone();
        let admission = Admission::new(checker, rejections, Duration::from_secs(5));
        (admission, counters)
    }

    /// The next insertion, past what else comes before it.
    async fn inserted(admission: &mut Admission) -> String {
        loop {
            match admission.next().await {
                Admitted::Insert(address, _, _) => return address.to_string(),
                Admitted::Evict(address) => panic!("evicted {address}"),
                Admitted::Refused => {}
            }
        }
    }

    /// What comes within `wait`, past refusals: the addresses inserted and evicted.
    async fn within(admission: &mut Admission, wait: Duration) -> Vec<String> {
        let mut seen = Vec::new();
        let _ = tokio::time::timeout(wait, async {
            loop {
                match admission.next().await {
                    Admitted::Insert(address, _, _) => seen.push(format!("+{address}")),
                    Admitted::Evict(address) => seen.push(format!("-{address}")),
                    Admitted::Refused => {}
                }
            }
        })
        .await;
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn a_rejected_endpoint_stays_out_until_a_recheck_passes() {
        let checker = Arc::new(Scripted::default());
        checker.answer("10.0.0.1:1", &["pass"]);
        checker.answer(
            "10.0.0.2:1",
            &["DNS:orders", "DNS:orders", "silent", "pass"],
        );
        let (mut admission, counters) = admission(&checker);
        let (a, honest) = endpoint("10.0.0.1");
        let (b, rogue) = endpoint("10.0.0.2");
        admission.offer(a, honest);
        admission.offer(b.clone(), rogue);
        assert_eq!(inserted(&mut admission).await, "10.0.0.1:1");
        assert_eq!(checker.checks().len(), 2, "both dialled before joining");
        // The rogue's first check rejects it: counted once, not handed over.
        let started = Instant::now();
        assert_eq!(inserted(&mut admission).await, "10.0.0.2:1");
        // The same refusal at the first recheck is not counted again; a silent recheck
        // keeps it out; only the third recheck, which passes, brings it back.
        assert_eq!(started.elapsed(), Duration::from_secs(15));
        assert_eq!(checker.checks(), ["10.0.0.2:1"; 3]);
        assert_eq!(counters.snapshot().identity_rejections, 1);
        assert_eq!(counters.rejections_per_app()["pay"], 1);
        assert!(admission.rejected().is_empty());
        assert!(
            admission.entries[&b].last.take().is_none(),
            "nothing refused since"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn when_every_endpoint_is_refused_calls_are_told_why() {
        let checker = Arc::new(Scripted::default());
        checker.answer("10.0.0.1:1", &["DNS:orders", "URI:spiffe://x"]);
        let (mut admission, counters) = admission(&checker);
        let (a, rogue) = endpoint("10.0.0.1");
        admission.offer(a.clone(), rogue);
        assert_eq!(
            admission.all_rejected(0),
            None,
            "calls wait for the first check"
        );
        // A rejection hands nothing over; the feeder only publishes it.
        assert!(matches!(admission.next().await, Admitted::Refused));
        let why = admission.all_rejected(0).expect("all refused");
        assert!(
            why.contains("DNS:orders") && why.contains("1 refused"),
            "{why}"
        );
        assert_eq!(
            admission.all_rejected(1),
            None,
            "another endpoint takes the calls"
        );
        // A recheck that finds another certificate is a new rejection.
        within(&mut admission, Duration::from_secs(6)).await;
        assert_eq!(counters.snapshot().identity_rejections, 2);
        assert!(admission.all_rejected(0).unwrap().contains("spiffe"));
        // It leaves the registry: nothing is left to refuse, and nothing is checked again.
        admission.withdraw(&a);
        assert_eq!(admission.all_rejected(0), None);
        assert!(admission.schedule.is_empty());
        within(&mut admission, Duration::from_secs(60)).await;
        assert_eq!(checker.checks().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_reconnection_evicts_and_stale_results_are_dropped() {
        let checker = Arc::new(Scripted::default());
        checker.answer("10.0.0.1:1", &["pass", "pass"]);
        let (mut admission, counters) = admission(&checker);
        let (a, endpoint_a) = endpoint("10.0.0.1");
        admission.offer(a.clone(), endpoint_a.clone());
        // Offered again before the first check ends (it left and came back): the first
        // result is stale, only the second admits it.
        admission.offer(a.clone(), endpoint_a);
        assert_eq!(inserted(&mut admission).await, "10.0.0.1:1");
        assert_eq!(
            within(&mut admission, Duration::from_secs(1)).await,
            Vec::<String>::new()
        );
        // A refusal told by the channel of the first check (stale) changes nothing.
        let given = std::mem::take(&mut *checker.given.lock().unwrap());
        given[0].tell(refusal("10.0.0.1:1", "DNS:orders"));
        assert_eq!(
            within(&mut admission, Duration::from_secs(1)).await,
            Vec::<String>::new()
        );
        // A later handshake of the admitted channel is refused: out at once.
        given[1].tell(refusal("10.0.0.1:1", "DNS:orders"));
        assert!(matches!(admission.next().await, Admitted::Evict(ref e) if *e == a));
        assert_eq!(counters.snapshot().identity_rejections, 1);
        assert!(admission.rejected().contains_key(&a));
    }
}
