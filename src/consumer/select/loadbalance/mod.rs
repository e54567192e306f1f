//! The load balancers an operator can name (`loadbalance`), by Dubbo Java 3.3's names and
//! semantics, and Introspect's default that needs no name.
//!
//! Operators move between Java and Introspect consumers with the same configuration, so a
//! name Java knows means what it means in Java. Each balancer is one file; all are pure (the
//! candidates, the call and the time in, one index out), and what they keep between calls
//! (round robin's rotations, hash rings, scratch space) lives in the channel's
//! [`Balancers`].

mod consistent_hash;
mod least_active;
mod p2c;
mod random;
mod response_time;
mod round_robin;
mod shortest_response;

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use tokio::time::Instant;

pub(crate) use response_time::ResponseTimes;

/// A load balancer, as `loadbalance` names it (consumer option, a provider's parameter, a
/// configurator, per method).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum LoadBalance {
    /// Introspect's default when nothing names one: two candidates drawn by weight, the one
    /// with fewer calls in flight per unit of weight taken.
    #[default]
    P2c,
    /// Java's `random`: weighted random, blind to load.
    Random,
    /// Java's `roundrobin`: smooth weighted round robin per method.
    RoundRobin,
    /// Java's `leastactive`: the fewest calls in flight, ties by weight.
    LeastActive,
    /// Java's `shortestresponse`: the shortest expected answer (average success latency ×
    /// calls in flight + 1), ties by weight.
    ShortestResponse,
    /// Java's `consistenthash`: a ring of virtual nodes over the candidates.
    ConsistentHash,
}

impl LoadBalance {
    /// Every load balancer, the default first.
    pub const ALL: [LoadBalance; 6] = [
        LoadBalance::P2c,
        LoadBalance::Random,
        LoadBalance::RoundRobin,
        LoadBalance::LeastActive,
        LoadBalance::ShortestResponse,
        LoadBalance::ConsistentHash,
    ];

    /// Its name: Java's extension name, or `p2c` for the default.
    pub fn name(self) -> &'static str {
        match self {
            LoadBalance::P2c => "p2c",
            LoadBalance::Random => "random",
            LoadBalance::RoundRobin => "roundrobin",
            LoadBalance::LeastActive => "leastactive",
            LoadBalance::ShortestResponse => "shortestresponse",
            LoadBalance::ConsistentHash => "consistenthash",
        }
    }

    /// The load balancer `name` names, read as Java reads its extension names (exact and
    /// lowercase; surrounding whitespace is ignored). An empty name names none, as an empty
    /// parameter in Java: the default. Java's `adaptive` and unknown names are not applied.
    pub fn parse(name: &str) -> Result<LoadBalance, NotApplied> {
        let name = name.trim();
        if name.is_empty() {
            return Ok(LoadBalance::default());
        }
        LoadBalance::ALL
            .into_iter()
            .find(|lb| lb.name() == name)
            .ok_or_else(|| NotApplied {
                name: name.to_owned(),
                adaptive: name == "adaptive",
            })
    }
}

impl fmt::Display for LoadBalance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LoadBalance {
    type Err = NotApplied;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        LoadBalance::parse(name)
    }
}

/// A `loadbalance` name that is not applied: the default is used instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotApplied {
    /// The name, trimmed.
    name: String,
    /// Whether it is Java's `adaptive`.
    adaptive: bool,
}

impl NotApplied {
    /// The name that is not applied (trimmed).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Why, in a few words.
    pub fn reason(&self) -> &'static str {
        if self.adaptive {
            "Java's adaptive balancer reads the load providers report in their answers, \
             which gRPC answers do not carry"
        } else {
            "not a load balancer name (known: p2c, random, roundrobin, leastactive, \
             shortestresponse, consistenthash; names are lowercase)"
        }
    }
}

impl fmt::Display for NotApplied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "loadbalance {:?} not applied: {}; the default ({}) is used",
            self.name,
            self.reason(),
            LoadBalance::default()
        )
    }
}

impl std::error::Error for NotApplied {}

/// What a load balancer sees of one candidate endpoint (routed, healthy, not tried yet).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate<'a> {
    /// Its address (`host:port`): the key of round-robin state and of the hash ring.
    pub address: &'a str,
    /// Its effective weight (warm-up applied; 0 possible).
    pub weight: u32,
    /// Calls in flight to it from this channel.
    pub active: usize,
    /// Its response-time statistics (read by `shortestresponse` only).
    pub stats: &'a ResponseTimes,
}

/// What of the call a load balancer may read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CallKey<'a> {
    /// The method called (`SayHello`), if known: round robin keeps one rotation per method.
    pub method: Option<&'a str>,
    /// What `consistenthash` hashes, if the call carries it (None: nothing to hash, so it
    /// draws by weight). Java's key is the text of the hashed arguments, UTF-8.
    pub hash_key: Option<&'a [u8]>,
}

/// A channel's load-balancing state between calls (round robin's current weights per
/// method, hash rings, scratch space), one per balanced channel.
#[derive(Debug, Default)]
pub(crate) struct Balancers {
    /// `roundrobin`'s rotations.
    round_robin: round_robin::RoundRobin,
    /// `consistenthash`'s rings.
    rings: consistent_hash::HashRings,
    /// The indexes tied for least load or shortest response, reused so no call allocates.
    ties: Vec<usize>,
}

impl Balancers {
    /// The index in `candidates` (non-empty) of the endpoint to call with `lb` at `now`.
    /// A lone candidate is taken without touching any state, as Java does.
    pub fn select(
        &mut self,
        lb: LoadBalance,
        candidates: &[Candidate<'_>],
        call: &CallKey<'_>,
        now: Instant,
        rng: &mut impl Rng,
    ) -> usize {
        debug_assert!(!candidates.is_empty(), "no candidate to select among");
        if candidates.len() <= 1 {
            return 0;
        }
        match lb {
            LoadBalance::P2c => p2c::select(candidates, rng),
            LoadBalance::Random => random::select(candidates, rng),
            LoadBalance::RoundRobin => self.round_robin.select(candidates, call.method, now),
            LoadBalance::LeastActive => least_active::select(candidates, &mut self.ties, rng),
            LoadBalance::ShortestResponse => {
                shortest_response::select(candidates, now, &mut self.ties, rng)
            }
            LoadBalance::ConsistentHash => self.rings.select(candidates, call.hash_key, rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::sync::LazyLock;
    use std::time::Duration;

    /// Statistics with no data, for candidates whose balancer does not read them.
    static NO_STATS: LazyLock<ResponseTimes> = LazyLock::new(|| ResponseTimes::new(Instant::now()));

    /// Addresses for test candidates, in order.
    const ADDRESSES: [&str; 12] = [
        "10.0.0.1:50051",
        "10.0.0.2:50051",
        "10.0.0.3:50051",
        "10.0.0.4:50051",
        "10.0.0.5:50051",
        "10.0.0.6:50051",
        "10.0.0.7:50051",
        "10.0.0.8:50051",
        "10.0.0.9:50051",
        "10.0.0.10:50051",
        "10.0.0.11:50051",
        "10.0.0.12:50051",
    ];

    /// Candidates of `weights` with nothing in flight.
    pub(super) fn idle(weights: &[u32]) -> Vec<Candidate<'static>> {
        let loads: Vec<(u32, usize)> = weights.iter().map(|&w| (w, 0)).collect();
        loaded(&loads)
    }

    /// Candidates of (weight, calls in flight).
    pub(super) fn loaded(loads: &[(u32, usize)]) -> Vec<Candidate<'static>> {
        (0..loads.len())
            .map(|i| Candidate {
                address: ADDRESSES[i],
                weight: loads[i].0,
                active: loads[i].1,
                stats: &NO_STATS,
            })
            .collect()
    }

    /// Candidates of (weight, calls in flight) with the statistics of the same index.
    pub(super) fn with_stats<'a>(
        loads: &[(u32, usize)],
        stats: &'a [ResponseTimes],
    ) -> Vec<Candidate<'a>> {
        loaded(loads)
            .into_iter()
            .zip(stats)
            .map(|(c, stats)| Candidate { stats, ..c })
            .collect()
    }

    /// Idle candidates of weight 100 at `addresses`.
    pub(super) fn at<'a>(addresses: &[&'a str]) -> Vec<Candidate<'a>> {
        addresses
            .iter()
            .map(|&address| Candidate {
                address,
                weight: 100,
                active: 0,
                stats: &NO_STATS,
            })
            .collect()
    }

    /// The share of each of `n` indexes in `draws` calls of `pick`.
    pub(super) fn shares(n: usize, draws: usize, mut pick: impl FnMut() -> usize) -> Vec<f64> {
        let mut counts = vec![0usize; n];
        for _ in 0..draws {
            counts[pick()] += 1;
        }
        counts.iter().map(|&c| c as f64 / draws as f64).collect()
    }

    #[test]
    fn names_are_javas() {
        for lb in LoadBalance::ALL {
            assert_eq!(LoadBalance::parse(&lb.to_string()), Ok(lb));
            assert_eq!(format!(" {lb}\t").parse::<LoadBalance>(), Ok(lb));
        }
        assert_eq!(LoadBalance::default(), LoadBalance::P2c);
        assert_eq!(
            LoadBalance::parse(""),
            Ok(LoadBalance::P2c),
            "unset: the default"
        );
        assert_eq!(
            LoadBalance::ALL.map(|lb| lb.to_string()).join(" "),
            "p2c random roundrobin leastactive shortestresponse consistenthash"
        );
    }

    #[test]
    fn adaptive_and_unknown_names_are_not_applied() {
        let adaptive = LoadBalance::parse(" adaptive ").unwrap_err();
        assert_eq!(adaptive.name(), "adaptive");
        assert!(adaptive.reason().contains("gRPC"), "{adaptive}");
        let shown = adaptive.to_string();
        assert!(
            shown.contains("the default (p2c) is used") && !shown.contains('\n'),
            "{shown}"
        );
        for name in ["RoundRobin", "round_robin", "weighted"] {
            let unknown = LoadBalance::parse(name).unwrap_err();
            assert_eq!(unknown.name(), name);
            for lb in LoadBalance::ALL {
                assert!(unknown.reason().contains(lb.name()), "{unknown}");
            }
        }
    }

    #[test]
    fn a_lone_candidate_is_taken_without_state() {
        let mut balancers = Balancers::default();
        let (mut rng, now) = (StdRng::seed_from_u64(0), Instant::now());
        let lone = idle(&[0]);
        let call = CallKey {
            method: Some("SayHello"),
            hash_key: Some(b"k"),
        };
        for lb in LoadBalance::ALL {
            assert_eq!(balancers.select(lb, &lone, &call, now, &mut rng), 0);
        }
        let two = idle(&[1, 1]);
        let picks: Vec<usize> = (0..4)
            .map(|_| balancers.select(LoadBalance::RoundRobin, &two, &call, now, &mut rng))
            .collect();
        assert_eq!(picks, [0, 1, 0, 1], "the rotation starts fresh");
    }

    #[test]
    fn select_dispatches_by_name() {
        let mut balancers = Balancers::default();
        let (mut rng, now) = (StdRng::seed_from_u64(1), Instant::now());
        let busy = loaded(&[(100, 4), (100, 0), (100, 4)]);
        let call = CallKey::default();
        for _ in 0..50 {
            let pick = balancers.select(LoadBalance::LeastActive, &busy, &call, now, &mut rng);
            assert_eq!(pick, 1);
        }
        let order: Vec<usize> = (0..6)
            .map(|_| balancers.select(LoadBalance::RoundRobin, &busy, &call, now, &mut rng))
            .collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2]);
        let keyed = CallKey {
            method: None,
            hash_key: Some(b"alice"),
        };
        let first = balancers.select(LoadBalance::ConsistentHash, &busy, &keyed, now, &mut rng);
        for _ in 0..20 {
            let again = balancers.select(LoadBalance::ConsistentHash, &busy, &keyed, now, &mut rng);
            assert_eq!(again, first);
        }
    }

    /// A call as the property tests draw it: method, hash key.
    fn call_strategy() -> impl Strategy<Value = (Option<&'static str>, Option<Vec<u8>>)> {
        (
            proptest::option::of(prop_oneof![Just("A"), Just("B")]),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
        )
    }

    proptest! {
        #[test]
        fn selections_are_in_range_and_skip_weight_zero(
            loads in proptest::collection::vec((0u32..4, 0usize..4), 1..10),
            averages in proptest::collection::vec(proptest::option::of(0u64..5), 10),
            calls in proptest::collection::vec(call_strategy(), 1..20),
            seed in any::<u64>(),
        ) {
            let t0 = Instant::now();
            let stats: Vec<ResponseTimes> = averages
                .iter()
                .map(|average| {
                    let stats = ResponseTimes::new(t0);
                    if let Some(ms) = average {
                        stats.record(Duration::from_millis(*ms), true, t0);
                    }
                    stats
                })
                .collect();
            let candidates = with_stats(&loads, &stats);
            let some_weigh = candidates.iter().any(|c| c.weight > 0);
            let mut rng = StdRng::seed_from_u64(seed);
            for lb in LoadBalance::ALL {
                // A fresh state per balancer: round robin's guarantee is for a steady set.
                let mut balancers = Balancers::default();
                for (step, (method, key)) in calls.iter().enumerate() {
                    let call = CallKey { method: *method, hash_key: key.as_deref() };
                    let now = t0 + Duration::from_secs(step as u64);
                    let i = balancers.select(lb, &candidates, &call, now, &mut rng);
                    prop_assert!(i < candidates.len());
                    let weightless = candidates[i].weight == 0 && candidates.len() > 1;
                    match lb {
                        LoadBalance::P2c | LoadBalance::Random | LoadBalance::RoundRobin => {
                            prop_assert!(!(weightless && some_weigh), "{lb} took weight 0");
                        }
                        LoadBalance::ConsistentHash if key.is_none() => {
                            prop_assert!(!(weightless && some_weigh), "{lb} took weight 0");
                        }
                        LoadBalance::LeastActive => {
                            let least = candidates.iter().map(|c| c.active).min();
                            prop_assert_eq!(Some(candidates[i].active), least);
                            let tied_weigh = candidates
                                .iter()
                                .any(|c| Some(c.active) == least && c.weight > 0);
                            prop_assert!(!(weightless && tied_weigh), "{lb} took weight 0");
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}
