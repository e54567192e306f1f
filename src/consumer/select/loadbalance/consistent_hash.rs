//! Java's `consistenthash`: the same key to the same endpoint, while it is there.
//!
//! As Java: each address is given [`VIRTUAL_NODES`] points on a ring of 32-bit values, four
//! from each MD5 digest of the address followed by a counter (`"10.0.0.1:20880" + i`,
//! digest bytes read four at a time, little-endian); a call's key goes to the first point
//! at or after the first four bytes of the key's MD5, wrapping round. Removing an address
//! moves only the keys that were on it; weights and load play no part (Java ignores them
//! too). For the same key bytes (Java's key is the text of the hashed arguments, UTF-8) and
//! the same addresses, the endpoint is Java's.
//!
//! A call with no key has nothing to hash: it is drawn by weight as `random` draws, so it
//! still spreads (Java would hash an empty key and send every such call to one provider).
//!
//! A ring is built only when a set of candidates is first seen. It depends on the set alone
//! (Java's per-method `hash.nodes` is not read, so every method's ring is the same), which
//! is what the cache is keyed by: the last [`MAX_RINGS`] sets used (a retry without the
//! endpoint already tried is another set) keep their rings.

use md5::{Digest, Md5};
use rand::Rng;

use super::{Candidate, random};

/// Points on the ring per address (Java's `hash.nodes` default).
pub(super) const VIRTUAL_NODES: usize = 160;

/// The most rings a channel keeps, the least recently used dropped first.
pub(super) const MAX_RINGS: usize = 8;

/// A channel's rings, one per set of candidates recently called.
#[derive(Debug, Default)]
pub(super) struct HashRings {
    /// The rings, in no order.
    rings: Vec<Ring>,
    /// Counts selections, to know which ring was used least recently.
    clock: u64,
}

/// The ring of one set of addresses.
#[derive(Debug)]
struct Ring {
    /// Order-independent hash of the candidate addresses it was built for (a quick filter).
    fingerprint: u64,
    /// How many candidates it was built for.
    candidates: usize,
    /// The distinct addresses, sorted.
    addresses: Vec<Box<str>>,
    /// The points, sorted and distinct, each with its address's index in `addresses`.
    points: Vec<(u32, u32)>,
    /// The value of [`HashRings::clock`] when last used.
    last_used: u64,
}

impl HashRings {
    /// The index of the endpoint `consistenthash` calls among `candidates` (non-empty) for
    /// `key`, or one drawn by weight when the call has no key.
    pub(super) fn select(
        &mut self,
        candidates: &[Candidate<'_>],
        key: Option<&[u8]>,
        rng: &mut impl Rng,
    ) -> usize {
        let Some(key) = key else {
            return random::select(candidates, rng);
        };
        let fingerprint = fingerprint(candidates);
        self.clock += 1;
        let found = self
            .rings
            .iter()
            .position(|r| r.fingerprint == fingerprint && r.serves(candidates));
        let index = match found {
            Some(index) => index,
            None => {
                if self.rings.len() >= MAX_RINGS {
                    let oldest = (0..self.rings.len()).min_by_key(|&i| self.rings[i].last_used);
                    if let Some(oldest) = oldest {
                        self.rings.swap_remove(oldest);
                    }
                }
                self.rings.push(Ring::build(candidates, fingerprint));
                self.rings.len() - 1
            }
        };
        let ring = &mut self.rings[index];
        ring.last_used = self.clock;
        let address = ring.lookup(point_of(key));
        candidates
            .iter()
            .position(|c| c.address == address)
            .unwrap_or_else(|| random::select(candidates, rng))
    }
}

impl Ring {
    /// The ring of the addresses of `candidates` (non-empty), whose fingerprint is given.
    fn build(candidates: &[Candidate<'_>], fingerprint: u64) -> Ring {
        let mut addresses: Vec<Box<str>> = candidates.iter().map(|c| c.address.into()).collect();
        addresses.sort_unstable();
        addresses.dedup();
        let mut points = Vec::with_capacity(addresses.len() * VIRTUAL_NODES);
        for (index, address) in (0u32..).zip(&addresses) {
            for i in 0..VIRTUAL_NODES / 4 {
                let digest = Md5::new()
                    .chain_update(address.as_bytes())
                    .chain_update(i.to_string().as_bytes())
                    .finalize();
                for four in digest.chunks_exact(4) {
                    points.push((
                        u32::from_le_bytes([four[0], four[1], four[2], four[3]]),
                        index,
                    ));
                }
            }
        }
        // Two addresses on one point (rare): the one sorting last keeps it, as the last one
        // put keeps it in Java's map when its providers are listed in that order.
        points.sort_unstable();
        points.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                *kept = *later;
            }
            same
        });
        Ring {
            fingerprint,
            candidates: candidates.len(),
            addresses,
            points,
            last_used: 0,
        }
    }

    /// Whether it is the ring of exactly the addresses of `candidates`.
    fn serves(&self, candidates: &[Candidate<'_>]) -> bool {
        candidates.len() == self.candidates
            && candidates.iter().all(|c| {
                self.addresses
                    .binary_search_by(|a| (**a).cmp(c.address))
                    .is_ok()
            })
    }

    /// The address of the first point at or after `point`, wrapping round.
    fn lookup(&self, point: u32) -> &str {
        let at = self.points.partition_point(|&(p, _)| p < point);
        let (_, index) = self
            .points
            .get(at)
            .or(self.points.first())
            .copied()
            .unwrap_or_default();
        self.addresses.get(index as usize).map_or("", |a| a)
    }
}

/// Where `key` falls on the ring: the first four bytes of its MD5, little-endian, as Java.
fn point_of(key: &[u8]) -> u32 {
    let digest = Md5::digest(key);
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// A hash of the candidates' addresses that does not depend on their order.
fn fingerprint(candidates: &[Candidate<'_>]) -> u64 {
    candidates.iter().fold(candidates.len() as u64, |sum, c| {
        // FNV-1a, then a finalizer so that sums of similar addresses spread.
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &b in c.address.as_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        sum.wrapping_add(h)
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{at, shares};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const FIVE: [&str; 5] = [
        "10.0.0.1:20880",
        "10.0.0.2:20880",
        "10.0.0.3:20880",
        "10.0.0.4:20880",
        "10.0.0.5:20880",
    ];

    /// The address `key` goes to among `addresses`.
    fn address_of<'a>(rings: &mut HashRings, addresses: &[&'a str], key: &str) -> &'a str {
        let candidates = at(addresses);
        let mut rng = StdRng::seed_from_u64(0);
        addresses[rings.select(&candidates, Some(key.as_bytes()), &mut rng)]
    }

    #[test]
    fn javas_ring_for_fixed_keys() {
        // Computed with Java's algorithm (java.security.MessageDigest and a TreeMap, 160
        // nodes, the key's MD5 read as Java's `hash(digest, 0)`), independently of this code.
        let three = &FIVE[..3];
        let expected = [
            ("alice", 3_001_189_475, "10.0.0.1:20880"),
            ("bob", 3_159_465_375, "10.0.0.1:20880"),
            ("carol", 2_149_163_177, "10.0.0.2:20880"),
            ("erin", 2_313_378_655, "10.0.0.3:20880"),
            ("judy", 1_204_462_022, "10.0.0.3:20880"),
            ("12345", 248_216_706, "10.0.0.1:20880"),
            ("", 3_649_838_548, "10.0.0.1:20880"),
        ];
        let mut rings = HashRings::default();
        for (key, point, address) in expected {
            assert_eq!(point_of(key.as_bytes()), point, "key {key:?}");
            assert_eq!(address_of(&mut rings, three, key), address, "key {key:?}");
        }
        assert_eq!(
            rings.rings[0].points.len(),
            480,
            "no collision among these points"
        );
    }

    #[test]
    fn a_key_always_maps_to_one_address_whatever_the_order() {
        let mut rings = HashRings::default();
        let mut reversed = FIVE;
        reversed.reverse();
        for i in 0..200 {
            let key = format!("user-{i}");
            let first = address_of(&mut rings, &FIVE, &key);
            assert_eq!(address_of(&mut rings, &FIVE, &key), first);
            assert_eq!(
                address_of(&mut HashRings::default(), &reversed, &key),
                first
            );
        }
        assert_eq!(rings.rings.len(), 1, "built once");
    }

    #[test]
    fn a_removed_address_moves_only_its_own_keys() {
        let mut rings = HashRings::default();
        let four: Vec<&str> = FIVE.iter().copied().filter(|&a| a != FIVE[2]).collect();
        let mut moved = 0;
        for i in 0..2_000 {
            let key = format!("order-{i}");
            let before = address_of(&mut rings, &FIVE, &key);
            let after = address_of(&mut rings, &four, &key);
            if before == FIVE[2] {
                moved += 1;
            } else {
                assert_eq!(after, before, "key {key} moved off a remaining address");
            }
        }
        assert!(
            (250..550).contains(&moved),
            "about a fifth were on it: {moved}"
        );
        assert_eq!(rings.rings.len(), 2, "both sets kept");
    }

    #[test]
    fn keys_spread_over_the_ring() {
        let candidates = at(&FIVE);
        let (mut rings, mut rng) = (HashRings::default(), StdRng::seed_from_u64(1));
        let mut i = 0;
        let s = shares(5, 20_000, || {
            i += 1;
            let key = format!("k{i}");
            rings.select(&candidates, Some(key.as_bytes()), &mut rng)
        });
        assert!(s.iter().all(|x| (x - 0.2).abs() < 0.06), "{s:?}");
    }

    #[test]
    fn no_key_is_drawn_by_weight() {
        let candidates = at(&FIVE[..2]);
        let (mut rings, mut rng) = (HashRings::default(), StdRng::seed_from_u64(2));
        let s = shares(2, 10_000, || rings.select(&candidates, None, &mut rng));
        assert!((s[0] - 0.5).abs() < 0.02, "{s:?}");
        assert!(rings.rings.is_empty(), "no ring needed");
    }

    #[test]
    fn rings_kept_are_bounded() {
        let mut rings = HashRings::default();
        let mut addresses: Vec<&str> = FIVE.to_vec();
        let extra: Vec<String> = (0..MAX_RINGS + 3)
            .map(|i| format!("10.1.0.{i}:1"))
            .collect();
        for address in &extra {
            addresses.push(address);
            address_of(&mut rings, &addresses, "k");
        }
        assert_eq!(rings.rings.len(), MAX_RINGS);
        // The most recent set is still served without a rebuild.
        let last = rings.rings.iter().map(|r| r.last_used).max();
        address_of(&mut rings, &addresses, "k");
        assert_eq!(rings.rings.len(), MAX_RINGS);
        assert!(rings.rings.iter().any(|r| Some(r.last_used) > last));
    }

    #[test]
    fn the_ring_has_javas_points() {
        let ring = Ring::build(&at(&FIVE[..1]), 0);
        assert!(ring.points.len() <= VIRTUAL_NODES && ring.points.len() > VIRTUAL_NODES - 4);
        let digest = Md5::digest(b"10.0.0.1:208800");
        let first = u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]);
        assert!(
            ring.points.iter().any(|&(p, _)| p == first),
            "md5(address + \"0\")"
        );
        assert!(
            ring.points.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, distinct"
        );
    }
}
