//! An instance's metadata map, stored compactly: every key and value in one string, with a
//! sorted index of where each entry lies.
//!
//! A consumer reads one record per instance of every app it calls, ten thousand and more on
//! a cold start, and keeps them all. A `BTreeMap<String, String>` costs two allocations per
//! entry plus its nodes, to make and again to free; this map costs two per record, whatever
//! its size, and a lookup is a binary search over a handful of entries. Reading a record
//! copies each key and value straight from the JSON text (escapes resolved) into that one
//! string, with no string of its own in between.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::plain_json::Cursor;
use crate::model::keys;

/// Where one entry lies in [`InstanceMetadata::text`]: the key is `text[key..value]`, the
/// value `text[value..end]`.
#[derive(Clone, Copy, Debug)]
struct Span {
    key: usize,
    value: usize,
    end: usize,
}

/// An instance's metadata: string keys to string values, in key order, each key once.
///
/// Behaves as a sorted map (`get`, `insert`, `remove`, `iter` in key order), reads and
/// writes as a JSON object of strings. Where the last version had a
/// `BTreeMap<String, String>`, `get` returns `Option<&str>` and `iter` yields `(&str, &str)`;
/// [`From`] converts from and to a `BTreeMap`.
#[derive(Clone, Default)]
pub struct InstanceMetadata {
    /// Every key and value, back to back (and, after a duplicate key was read, the bytes of
    /// the entry it replaced, which nothing points at).
    text: Box<str>,
    /// Sorted by key; keys distinct.
    spans: Box<[Span]>,
    /// Where each of [`KNOWN`] is in `spans` (`None`: absent); `None` as a whole when not
    /// worked out (an empty map, or one too large for the index), so looked up instead.
    known: Option<[Option<u16>; KNOWN.len()]>,
}

/// The keys a consumer reads of every instance, many times over (grouping by revision,
/// health, ports): located once when a map is built, so reading them costs no search.
const KNOWN: [&str; 6] = [
    keys::REVISION,
    keys::STOPPING,
    keys::STORAGE_TYPE,
    keys::REVISION_RULE,
    keys::ENDPOINTS,
    keys::TIMESTAMP,
];

/// One of [`KNOWN`], by its place there.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Known {
    Revision = 0,
    Stopping = 1,
    StorageType = 2,
    RevisionRule = 3,
    Endpoints = 4,
    Timestamp = 5,
}

impl InstanceMetadata {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(key).ok().map(|i| self.value(self.spans[i]))
    }

    /// The value of a well-known key, without a search.
    pub(crate) fn known(&self, which: Known) -> Option<&str> {
        match &self.known {
            Some(places) => places[which as usize].map(|i| self.value(self.spans[usize::from(i)])),
            None => self.get(KNOWN[which as usize]),
        }
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &str)> + ExactSizeIterator {
        self.spans.iter().map(|s| (self.key(*s), self.value(*s)))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.spans.iter().map(|s| self.key(*s))
    }

    /// The values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.spans.iter().map(|s| self.value(*s))
    }

    /// Sets `key` to `value`; returns the value it replaced (a map's `insert`).
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        let old = self.get(&key).map(str::to_owned);
        let others = self.iter().filter(|(k, _)| *k != key);
        *self = others.chain([(key.as_str(), value.as_str())]).collect();
        old
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let old = self.get(key)?.to_owned();
        *self = self.iter().filter(|(k, _)| *k != key).collect();
        Some(old)
    }

    /// Keeps only the entries `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        *self = self.iter().filter(|(k, v)| keep(k, v)).collect();
    }

    /// Reads the JSON object at `cursor` when it is an object of strings written without
    /// `\u` escapes, the form every Dubbo writes (see [`plain_json`](super::plain_json)):
    /// `None` for anything else, which the serde reader is then left to read or refuse.
    /// Each run between escapes is copied straight into the map's text.
    pub(super) fn read_plain(cursor: &mut Cursor<'_>) -> Option<InstanceMetadata> {
        with_scratch(|builder| {
            cursor.expect(b'{')?;
            if cursor.peek()? == b'}' {
                cursor.advance();
                return Some(builder.finish());
            }
            loop {
                let key = builder.text.len();
                cursor.string(&mut builder.text)?;
                cursor.expect(b':')?;
                let value = builder.text.len();
                cursor.string(&mut builder.text)?;
                builder.close(key, value);
                if !cursor.next_item(b'}')? {
                    return Some(builder.finish());
                }
            }
        })
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.spans.binary_search_by(|s| self.key(*s).cmp(key))
    }

    fn key(&self, span: Span) -> &str {
        &self.text[span.key..span.value]
    }

    fn value(&self, span: Span) -> &str {
        &self.text[span.value..span.end]
    }
}

/// Collects entries in any order, then sorts them once.
#[derive(Default)]
struct Builder {
    text: String,
    spans: Vec<Span>,
}

impl Builder {
    fn push(&mut self, key: &str, value: &str) {
        let key_start = self.text.len();
        self.text.push_str(key);
        let value_start = self.text.len();
        self.text.push_str(value);
        self.close(key_start, value_start);
    }

    /// Ends the entry whose key starts at `key` and value at `value`: the value runs to
    /// the end of the text so far.
    fn close(&mut self, key: usize, value: usize) {
        self.spans.push(Span {
            key,
            value,
            end: self.text.len(),
        });
    }

    /// Sorts by key (stable, so that of equal keys the last pushed wins) and stores the
    /// entries in exactly the room they take; the builder is left empty, its room kept.
    fn finish(&mut self) -> InstanceMetadata {
        let text = &self.text;
        let key = |s: &Span| &text[s.key..s.value];
        if !self.spans.is_sorted_by(|a, b| key(a) < key(b)) {
            self.spans.sort_by(|a, b| key(a).cmp(key(b)));
            // Of a run of equal keys keep the last: `dedup_by` keeps the first of a run,
            // so the survivor takes the later span.
            self.spans.dedup_by(|later, earlier| {
                let same = key(later) == key(earlier);
                if same {
                    *earlier = *later;
                }
                same
            });
        }
        let mut metadata = InstanceMetadata {
            text: self.text.as_str().into(),
            spans: self.spans.as_slice().into(),
            known: None,
        };
        if u16::try_from(metadata.len()).is_ok() {
            metadata.known =
                Some(KNOWN.map(|key| metadata.find(key).ok().and_then(|i| u16::try_from(i).ok())));
        }
        self.text.clear();
        self.spans.clear();
        metadata
    }
}

thread_local! {
    /// A reader's scratch room, kept between records so that reading one allocates only
    /// the two exact-sized parts it keeps.
    static SCRATCH: RefCell<Builder> = RefCell::default();
}

/// Room kept between records is given back above this size (a hostile record is bounded
/// by the instance record limit, but its room need not stay).
const SCRATCH_KEPT: usize = 64 * 1024;

/// Runs `read` with the thread's scratch builder, emptied first.
fn with_scratch<T>(read: impl FnOnce(&mut Builder) -> T) -> T {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut builder) => {
            builder.text.clear();
            builder.spans.clear();
            let read = read(&mut builder);
            if builder.text.capacity() > SCRATCH_KEPT {
                *builder = Builder::default();
            }
            read
        }
        // Not reached (no reader reads a map inside a map), but never a panic.
        Err(_) => read(&mut Builder::default()),
    })
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for InstanceMetadata {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let mut builder = Builder::default();
        for (key, value) in entries {
            builder.push(key.as_ref(), value.as_ref());
        }
        builder.finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Extend<(K, V)> for InstanceMetadata {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, entries: I) {
        let mut builder = Builder::default();
        for (key, value) in self.iter() {
            builder.push(key, value);
        }
        for (key, value) in entries {
            builder.push(key.as_ref(), value.as_ref());
        }
        *self = builder.finish();
    }
}

impl From<BTreeMap<String, String>> for InstanceMetadata {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl From<InstanceMetadata> for BTreeMap<String, String> {
    fn from(metadata: InstanceMetadata) -> Self {
        metadata
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

impl<'a> IntoIterator for &'a InstanceMetadata {
    type Item = (&'a str, &'a str);
    type IntoIter = Box<dyn DoubleEndedIterator<Item = (&'a str, &'a str)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl std::ops::Index<&str> for InstanceMetadata {
    type Output = str;

    /// The value of `key`; panics when there is none, as a map's index does.
    fn index(&self, key: &str) -> &str {
        self.get(key)
            .unwrap_or_else(|| panic!("no metadata entry {key:?}"))
    }
}

impl PartialEq for InstanceMetadata {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for InstanceMetadata {}

impl fmt::Debug for InstanceMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for InstanceMetadata {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (key, value) in self.iter() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for InstanceMetadata {
    /// Reads a map of strings to strings (anything else is refused, as for a
    /// `BTreeMap<String, String>`), each key and value copied from the input once.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        with_scratch(|builder| deserializer.deserialize_map(MapReader(builder)))
    }
}

/// Reads a map's entries into a [`Builder`].
struct MapReader<'b>(&'b mut Builder);

impl<'de> Visitor<'de> for MapReader<'_> {
    type Value = InstanceMetadata;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings to strings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Self::Value, A::Error> {
        let builder = self.0;
        loop {
            let key = builder.text.len();
            if entries.next_key_seed(Append(&mut builder.text))?.is_none() {
                break;
            }
            let value = builder.text.len();
            entries.next_value_seed(Append(&mut builder.text))?;
            builder.close(key, value);
        }
        Ok(builder.finish())
    }
}

/// Reads one string, appending it to a buffer.
struct Append<'t>(&'t mut String);

impl<'de> DeserializeSeed<'de> for Append<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Append<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<(), E> {
        self.0.push_str(text);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> serde_json::Result<InstanceMetadata> {
        serde_json::from_str(json)
    }

    /// The plain reader over a whole text.
    fn read_plain(json: &str) -> Option<InstanceMetadata> {
        let mut cursor = Cursor::new(json);
        InstanceMetadata::read_plain(&mut cursor).filter(|_| cursor.at_end())
    }

    #[test]
    fn reads_like_a_sorted_map_and_the_last_of_equal_keys_wins() {
        let m = read(r#"{"z":"1","a":"2","m":"x\"y\u00e9","a":"4","":""}"#).unwrap();
        let entries: Vec<(&str, &str)> = m.iter().collect();
        assert_eq!(
            entries,
            [("", ""), ("a", "4"), ("m", "x\"y\u{e9}"), ("z", "1")]
        );
        assert_eq!((m.get("a"), m.get("b"), m.len()), (Some("4"), None, 4));
        let map: BTreeMap<String, String> =
            serde_json::from_str(r#"{"z":"1","a":"2","m":"x\"y\u00e9","a":"4","":""}"#).unwrap();
        assert_eq!(InstanceMetadata::from(map.clone()), m);
        assert_eq!(BTreeMap::from(m.clone()), map);
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
    }

    #[test]
    fn anything_but_a_map_of_strings_is_refused() {
        for bad in [
            r#"{"k":1}"#,
            r#"{"k":null}"#,
            r#"["k"]"#,
            r#""k""#,
            r#"{"k":{"a":"b"}}"#,
            "{",
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
        // A failed read leaves nothing behind for the next one.
        assert!(read(r#"{"a":"b","k":1}"#).is_err());
        assert_eq!(
            read(r#"{"c":"d"}"#).unwrap().iter().collect::<Vec<_>>(),
            [("c", "d")]
        );
    }

    #[test]
    fn edits_behave_as_a_map_s() {
        let mut m = InstanceMetadata::new();
        let mut map = BTreeMap::new();
        for (k, v) in [("b", "1"), ("a", "2"), ("b", "3"), ("c", "")] {
            assert_eq!(m.insert(k.into(), v.into()), map.insert(k.into(), v.into()));
        }
        assert_eq!(m.remove("a"), map.remove("a"));
        assert_eq!(m.remove("a"), None);
        assert_eq!(BTreeMap::from(m.clone()), map);
        m.extend([("d", "4"), ("b", "5")]);
        m.retain(|k, _| k != "c");
        assert_eq!(m.iter().collect::<Vec<_>>(), [("b", "5"), ("d", "4")]);
        assert_eq!(&m["d"], "4");
        assert!(m.contains_key("b") && !m.contains_key("c"));
        let built: InstanceMetadata = [("d", "4"), ("b", "5")].into_iter().collect();
        assert_eq!(built, m);
        assert_eq!(format!("{m:?}"), r#"{"b": "5", "d": "4"}"#);
    }

    #[test]
    fn well_known_keys_read_as_a_search_finds_them() {
        let cases = [
            read(r#"{}"#).unwrap(),
            InstanceMetadata::new(),
            read(r#"{"a":"1","dubbo.metadata.revision":"r","introspect.stopping":"true","z":"2"}"#)
                .unwrap(),
            [
                (keys::ENDPOINTS, "[]"),
                (keys::REVISION_RULE, "sha256-v1"),
                (keys::STORAGE_TYPE, "remote"),
                (keys::TIMESTAMP, "1764579600000"),
            ]
            .into_iter()
            .collect(),
        ];
        let all = [
            Known::Revision,
            Known::Stopping,
            Known::StorageType,
            Known::RevisionRule,
            Known::Endpoints,
            Known::Timestamp,
        ];
        for m in &cases {
            for which in all {
                assert_eq!(
                    m.known(which),
                    m.get(KNOWN[which as usize]),
                    "{m:?} {which:?}"
                );
            }
        }
        let mut m = cases[2].clone();
        m.insert(keys::REVISION.into(), "s".into());
        m.remove(keys::STOPPING);
        assert_eq!(
            (m.known(Known::Revision), m.known(Known::Stopping)),
            (Some("s"), None)
        );
    }

    proptest::proptest! {
        /// Any object of strings (escapes, duplicate keys, any order) reads as a
        /// `BTreeMap<String, String>` reads it, and so does anything else: refused by both
        /// or read alike.
        #[test]
        fn reads_whatever_a_btree_map_reads(
            entries in proptest::collection::vec(("[a-c]{0,2}|\\PC{0,8}", "\\PC{0,24}"), 0..16),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let object = entries
                .iter()
                .map(|(k, v)| format!("{}:{}", serde_json::json!(k), serde_json::json!(v)))
                .collect::<Vec<_>>()
                .join(",");
            let text = format!("{{{object}}}");
            for input in [text.as_bytes(), &junk] {
                let ours = serde_json::from_slice::<InstanceMetadata>(input);
                let theirs = serde_json::from_slice::<BTreeMap<String, String>>(input);
                match (ours, theirs) {
                    (Ok(ours), Ok(theirs)) => {
                        proptest::prop_assert_eq!(BTreeMap::from(ours.clone()), theirs.clone());
                        proptest::prop_assert_eq!(ours, InstanceMetadata::from(theirs));
                    }
                    (Err(_), Err(_)) => {}
                    (ours, theirs) => proptest::prop_assert!(false, "{ours:?} against {theirs:?}"),
                }
            }
        }
    }

    proptest::proptest! {
        /// Wherever the plain reader answers, serde reads the same map; and it answers for
        /// every object of strings written without `\u` escapes, whatever its spacing and
        /// whether `/` is escaped.
        #[test]
        fn the_plain_reader_reads_what_serde_reads(
            entries in proptest::collection::vec(
                ("[a-c]{0,2}|\\PC{0,8}", "\\PC{0,24}|[\"\\\\/\x08\x0c\n\r\t]{0,4}"),
                0..16,
            ),
            spaced: bool,
            escaped_slashes: bool,
            mutation in 0..3u8,
            at: proptest::sample::Index,
            byte: u8,
        ) {
            let gap = if spaced { " \n\t\r" } else { "" };
            let object = entries
                .iter()
                .map(|(k, v)| format!("{gap}{}{gap}:{gap}{}{gap}", serde_json::json!(k), serde_json::json!(v)))
                .collect::<Vec<_>>()
                .join(",");
            // Some writers escape `/` too (serde_json does not); no escape holds a `/`.
            let object = if escaped_slashes { object.replace('/', "\\/") } else { object };
            let mut input = format!("{gap}{{{object}}}{gap}").into_bytes();
            let at = at.index(input.len() + 1);
            match mutation {
                1 if at < input.len() => drop(input.remove(at)),
                2 => input.insert(at, byte),
                _ => {}
            }
            let theirs = serde_json::from_slice::<BTreeMap<String, String>>(&input).ok();
            let ours = std::str::from_utf8(&input).ok().and_then(read_plain);
            match ours {
                Some(ours) => proptest::prop_assert_eq!(Some(BTreeMap::from(ours)), theirs),
                None => proptest::prop_assert!(mutation != 0, "no answer for {:?}", String::from_utf8_lossy(&input)),
            }
        }
    }

    #[test]
    fn the_plain_reader_leaves_the_rest_to_serde() {
        for other in [
            r#"{"k":"\u0041"}"#,
            r#"{"k":1}"#,
            r#"{"k":null}"#,
            "null",
            r#"{"k":"v",}"#,
            r#"{"k":"v"} x"#,
            "{\"k\":\"a\u{1}\"}",
            r#"{"k":"\x"}"#,
            r#"{"k":"v""#,
            "",
        ] {
            assert!(read_plain(other).is_none(), "{other}");
        }
        let read = read_plain(r#" { "b" : "x\"\\\/\b\f\n\r\t" , "a":"" } "#);
        assert_eq!(
            read.unwrap().iter().collect::<Vec<_>>(),
            [("a", ""), ("b", "x\"\\/\u{8}\u{c}\n\r\t")]
        );
    }

    #[test]
    fn a_huge_map_leaves_no_scratch_room_behind() {
        let big = format!(r#"{{"k":"{}"}}"#, "x".repeat(SCRATCH_KEPT * 2));
        assert_eq!(
            read(&big).unwrap().get("k").map(str::len),
            Some(SCRATCH_KEPT * 2)
        );
        SCRATCH.with(|s| assert!(s.borrow().text.capacity() <= SCRATCH_KEPT));
    }
}
