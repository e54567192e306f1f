//! A cursor over JSON text for the two readers of the instance record's plain form
//! ([`InstanceMetadata::read_plain`](super::InstanceMetadata::read_plain) and the record's
//! own): strings without `\u` escapes, numbers, literals, and any value skipped.
//!
//! Every method answers `None` for text outside that form, valid JSON or not, and the
//! readers then leave the whole text to serde_json, so that what they accept they read as
//! serde_json does, and what serde_json refuses it refuses with its own error. Why readers of
//! their own at all: a consumer's cold start reads ten thousand records and more, and the
//! metadata values Dubbo writes are JSON inside JSON strings (about fifty escapes a record),
//! each escape a step through serde_json's buffer of its own.

/// Nesting a skipped value may have (serde_json refuses values nested past 128).
const MAX_DEPTH: usize = 64;

/// A position in JSON text.
pub(super) struct Cursor<'j> {
    json: &'j str,
    at: usize,
}

impl<'j> Cursor<'j> {
    pub(super) fn new(json: &'j str) -> Self {
        Cursor { json, at: 0 }
    }

    /// Whether only whitespace is left.
    pub(super) fn at_end(&mut self) -> bool {
        self.skip_whitespace();
        self.at == self.json.len()
    }

    /// The next byte after whitespace, not taken.
    pub(super) fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.json.as_bytes().get(self.at).copied()
    }

    /// Takes `byte`, the next after whitespace.
    pub(super) fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Takes the next byte, known to be there from [`Cursor::peek`].
    pub(super) fn advance(&mut self) {
        self.at += 1;
    }

    /// After an item of an object or array that ends with `close`: `true` at a `,`, `false`
    /// at `close` (either taken).
    pub(super) fn next_item(&mut self, close: u8) -> Option<bool> {
        let byte = self.peek()?;
        (byte == b',' || byte == close).then(|| self.at += 1)?;
        Some(byte == b',')
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.json.as_bytes().get(self.at) {
            self.at += 1;
        }
    }

    /// A string without any escape, borrowed (object keys).
    pub(super) fn bare_string(&mut self) -> Option<&'j str> {
        self.expect(b'"')?;
        let start = self.at;
        self.at += plain_run(&self.json.as_bytes()[start..]);
        (self.json.as_bytes().get(self.at) == Some(&b'"')).then_some(())?;
        self.at += 1;
        self.json.get(start..self.at - 1)
    }

    /// Appends one string, escapes resolved, to `out`.
    pub(super) fn string(&mut self, out: &mut String) -> Option<()> {
        self.expect(b'"')?;
        let bytes = self.json.as_bytes();
        loop {
            let run = self.at;
            self.at += plain_run(&bytes[run..]);
            // The run ends before an ASCII byte or at the end: a character boundary.
            out.push_str(self.json.get(run..self.at)?);
            match bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => {
                    out.push(match bytes.get(self.at + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return None,
                    });
                    self.at += 2;
                }
                // A control character, which JSON strings may not hold.
                _ => return None,
            }
        }
    }

    /// A number that is a `u16`, written as JSON writes integers.
    pub(super) fn u16(&mut self) -> Option<u16> {
        self.skip_whitespace();
        let digits = self.digits();
        let text = self.json.get(self.at - digits..self.at)?;
        if digits == 0 || (digits > 1 && text.starts_with('0')) || digits > 5 {
            return None;
        }
        // A fraction or an exponent makes it a float, which serde does not read as a u16.
        if let Some(b'.' | b'e' | b'E') = self.json.as_bytes().get(self.at) {
            return None;
        }
        text.parse().ok()
    }

    /// `true`, `false` or `null` (as `None`).
    pub(super) fn flag(&mut self) -> Option<Option<bool>> {
        if self.literal("true") {
            Some(Some(true))
        } else if self.literal("false") {
            Some(Some(false))
        } else {
            self.null().then_some(None)
        }
    }

    /// Takes `null` when it is next.
    pub(super) fn null(&mut self) -> bool {
        self.literal("null")
    }

    /// Takes `word` when it is next after whitespace.
    fn literal(&mut self, word: &str) -> bool {
        self.skip_whitespace();
        let found = self
            .json
            .get(self.at..)
            .is_some_and(|rest| rest.starts_with(word));
        if found {
            self.at += word.len();
        }
        found
    }

    /// Skips one value of any kind (whose strings have no `\u` escape).
    pub(super) fn skip_value(&mut self) -> Option<()> {
        self.skip_nested(0, &mut String::new())
    }

    /// Skips one value at `depth`; `scratch` takes the strings skipped.
    fn skip_nested(&mut self, depth: usize, scratch: &mut String) -> Option<()> {
        let close = match self.peek()? {
            b'"' => {
                scratch.clear();
                return self.string(scratch);
            }
            b'{' | b'[' if depth >= MAX_DEPTH => return None,
            b'{' => b'}',
            b'[' => b']',
            b't' | b'f' | b'n' => return self.flag().map(drop),
            _ => return self.number(),
        };
        self.advance();
        if self.peek()? == close {
            self.advance();
            return Some(());
        }
        loop {
            if close == b'}' {
                scratch.clear();
                self.string(scratch)?;
                self.expect(b':')?;
            }
            self.skip_nested(depth + 1, scratch)?;
            if !self.next_item(close)? {
                return Some(());
            }
        }
    }

    /// Skips a number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let bytes = self.json.as_bytes();
        if bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.digits() {
            0 => return None,
            1 => {}
            n if bytes[self.at - n] == b'0' => return None,
            _ => {}
        }
        if bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            (self.digits() > 0).then_some(())?;
        }
        if let Some(b'e' | b'E') = bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = bytes.get(self.at) {
                self.at += 1;
            }
            (self.digits() > 0).then_some(())?;
        }
        Some(())
    }

    /// Takes the ASCII digits next (no whitespace first); how many.
    fn digits(&mut self) -> usize {
        let start = self.at;
        while self
            .json
            .as_bytes()
            .get(self.at)
            .is_some_and(u8::is_ascii_digit)
        {
            self.at += 1;
        }
        self.at - start
    }
}

/// How many bytes `bytes` starts with that a JSON string holds as they are: up to the first
/// `"`, `\` or control character. Eight bytes at a time, as serde_json scans too.
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // A byte's high bit is set in `below(x, n)` where x's byte is below `n` (n ≤ 0x80), and
    // possibly in bytes after the first such one, never before: the first set byte is exact.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let mut at = 0;
    while let Some(chunk) = bytes[at..].first_chunk::<8>() {
        let x = u64::from_le_bytes(*chunk);
        let found = below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1)
            | below(x, 0x20);
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(bytes.len() - at)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The eight-bytes-at-a-time scan stops where a scan byte by byte stops.
        #[test]
        fn a_plain_run_ends_at_the_first_byte_a_string_cannot_hold(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => 0x20u8..=0xff,
                    1 => proptest::sample::select(vec![b'"', b'\\', 0, 0x1f, 0x7f, 0x80]),
                ],
                0..40,
            ),
        ) {
            let naive = bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(bytes.len());
            proptest::prop_assert_eq!(plain_run(&bytes), naive);
        }

        /// A value skipped is one serde_json reads, and the cursor stops where it ends.
        #[test]
        fn a_skipped_value_is_one_serde_reads(
            value in proptest::prop_oneof![
                "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,2})?",
                "[-0-9.eE+]{1,6}",
                "[\\[\\]{}\",:0-9a-z \\\\]{1,12}",
                proptest::prelude::Just(r#"{"a":[1,{"b":null}],"c":"\n"}"#.to_owned()),
            ],
        ) {
            let mut cursor = Cursor::new(&value);
            let skipped = cursor.skip_value().is_some() && cursor.at_end();
            let serde = serde_json::from_str::<serde::de::IgnoredAny>(&value).is_ok();
            if skipped {
                proptest::prop_assert!(serde, "{value}");
            }
        }
    }

    #[test]
    fn numbers_and_ports_read_as_serde_reads_them() {
        for (text, port) in [
            ("0", Some(0)),
            ("65535", Some(65535)),
            ("65536", None),
            ("01", None),
            ("-1", None),
            ("1.0", None),
            ("1e2", None),
            ("", None),
            ("123456", None),
        ] {
            assert_eq!(Cursor::new(text).u16(), port, "{text}");
            if let Some(port) = port {
                assert_eq!(serde_json::from_str::<u16>(text).ok(), Some(port));
            }
        }
        for (text, skips) in [
            ("-0.5e-3", true),
            ("0", true),
            ("-", false),
            ("01", false),
            ("1.", false),
            ("1e", false),
            (".5", false),
        ] {
            let mut cursor = Cursor::new(text);
            assert_eq!(
                cursor.skip_value().is_some() && cursor.at_end(),
                skips,
                "{text}"
            );
        }
    }
}
