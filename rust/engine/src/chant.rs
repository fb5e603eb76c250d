//! Content chanting: a streaming detector of output that repeats itself.
//!
//! The rule (mirrored by the pure-Python model in the tests):
//!
//! * Every position `i` ends a window: the last `window` symbols. Its *hash* is a keyed
//!   polynomial hash of the window (mod 2^64, random key per detector) and its *rank* the top
//!   30 bits of the hash, or "none" when `ignore_whitespace` is set and the window is
//!   whitespace only.
//! * A window is an *anchor* when it has a rank no greater than the ranks of the previous
//!   `anchor_span()` windows (32, or the largest power of two <= `window + min_repeats` when
//!   that is smaller, so the warm-up fits in the latency bound). Only anchors are counted:
//!   about one window in 33 of ordinary text, yet in any periodic text the period's
//!   smallest-rank window is an anchor at every occurrence, so every chant keeps one chain
//!   per period.
//! * Each distinct window keeps its last *counted* occurrence, a chain gap and a count. An
//!   anchor less than one window after the last counted one is not counted (a long divider
//!   line is one window at every offset); one more than `max_distance()` after it starts a
//!   new chain of one.
//! * A counted occurrence *extends* the chain when it is exactly one chain gap after the
//!   last counted one *and* the text between is the same as the gap before (the `2 * gap +
//!   window` symbols ending here repeat with the gap): the count goes up by one. Identical
//!   gaps are what separate a chant from code that shares boilerplate.
//! * Any other counted occurrence *restarts* the chain from the text: its gap becomes the q
//!   in `window..=max_distance` at which the window occurs most often at i - q, i - 2q, ...
//!   with the same text between each two (the smallest such q on a tie), and its count
//!   those occurrences, this one included. So a window that occurs several times within
//!   its chant's period chains at the period, whichever of its occurrences the one-window
//!   rule lets count: counting only the distance to the last counted one, such a window's
//!   counted occurrences can alternate between gaps forever and never chain.
//! * A chain of `min_repeats` occurrences is chanting. The detector then latches until reset.
//!
//! Guarantee, for every key: in a chant of period p, the period's smallest-rank window is an
//! anchor at every occurrence once the 32 windows before it are in the chant, so it is
//! counted at least every m symbols (m: the smallest multiple of p that is at least a
//! window), and the first of its counted occurrences with `min_repeats` occurrences m apart
//! behind it either restarts (and finds them) or extends a chain whose count is at least
//! theirs: one at m, or at a shorter gap (a local repetition inside the period) whose count
//! grew faster. That is within `window + min_repeats * (p + window)` of the chant's start.
//!
//! Cost: O(1) per symbol, in three passes over batches of 256 symbols, each a tight loop:
//! the rolling hash and rank of every window; the minimum rank of the windows before each
//! (vector code: doubling minima on 32-bit lanes); the table probe of the anchors only. A
//! restart scans the `max_distance` symbols before it (16 at a time) for the window's last
//! and first symbols; only anchors whose window recurred within `max_distance` restart
//! (about one character in 1,300 of source code, none in prose that does not repeat).
//! Memory is fixed by the configuration. The text between occurrences is compared symbol by
//! symbol, and the whole chained span again before an alarm is raised, so a hash collision
//! (crafted or not) can only ever cost a missed link, never an alarm.

use std::cell::RefCell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use crate::settings::{Value, CHANT};
use crate::snapshot::{invalid, open, seal, Reader, SnapshotError, SnapshotKind, Writer};

/// Largest history (in symbols) a configuration may need; bounds memory per detector.
pub const MAX_HISTORY: u64 = 1 << 21;

/// Most previous windows an anchor is compared with (see `ChantConfig::anchor_span`).
pub const MAX_ANCHOR_SPAN: usize = 32;
const SPAN: usize = MAX_ANCHOR_SPAN;
/// Symbols hashed per pass of the scan.
const BATCH: usize = 256;

/// Largest chain distance the compact table entries can hold.
const MAX_DISTANCE: u64 = u16::MAX as u64;
/// Largest `max_period` (and window): a chain distance must fit the table entries.
pub const MAX_PERIOD: u64 = MAX_DISTANCE - 1;
/// Most repeats a chain entry counts.
pub const MAX_REPEATS: u64 = u16::MAX as u64;
const WAYS: usize = 4;
/// The rank of "no window" (see `rank`).
const NO_RANK: i32 = i32::MAX;

/// One unit of the stream: a Unicode code point or a token id.
pub trait Symbol: Copy + Eq + Default + std::fmt::Debug {
    /// How the history stores the symbols of a stream while all of them fit it: a byte per
    /// character of ASCII (or Latin-1) text, 32 bits per token id below 2^32. The first
    /// symbol that does not fit widens the history to `Self`.
    type Narrow: Slot<Self>;
    /// The symbol's value for hashing.
    fn key(self) -> u64;
    /// 1 for whitespace, else 0, for `ignore_whitespace` (token ids never are).
    fn blank_bit(self) -> u64;
    /// 0 when the symbol fits `Narrow`.
    fn wide_bits(self) -> u64;
}

/// A slot of the history holding a symbol `S`.
pub trait Slot<S>: Copy + Eq + Default + std::fmt::Debug {
    /// The slot for `symbol`, which fits it (see `Symbol::wide_bits`).
    fn store(symbol: S) -> Self;
    fn load(self) -> S;

    /// Bit k set when `slots[n - 1 - k]` is `last` and, given `before` (slots of the same
    /// length `n`, each a fixed distance before its counterpart), `before[n - 1 - k]` is its
    /// symbol (at most 64 slots, read from the end; matches are rare, so a branch per slot).
    #[inline(always)]
    fn matches_back(slots: &[Self], last: Self, before: Option<(&[Self], Self)>) -> u64 {
        let mut bits = 0;
        match before {
            Some((before, previous)) => {
                for (k, (&s, &b)) in slots.iter().rev().zip(before.iter().rev()).enumerate() {
                    if s == last && b == previous {
                        bits |= 1 << k;
                    }
                }
            }
            None => {
                for (k, &s) in slots.iter().rev().enumerate() {
                    if s == last {
                        bits |= 1 << k;
                    }
                }
            }
        }
        bits
    }

    /// How many slots at the ends of `x` and `y` (of one length) are equal.
    #[inline(always)]
    fn same_ends(x: &[Self], y: &[Self]) -> usize {
        x.iter().rev().zip(y.iter().rev()).take_while(|(a, b)| a == b).count()
    }
}

impl<S: Symbol> Slot<S> for S {
    #[inline(always)]
    fn store(symbol: S) -> Self {
        symbol
    }

    #[inline(always)]
    fn load(self) -> S {
        self
    }
}

/// A code point below 256 (ASCII and Latin-1).
impl Slot<u32> for u8 {
    #[inline(always)]
    fn store(symbol: u32) -> Self {
        symbol as u8
    }

    #[inline(always)]
    fn load(self) -> u32 {
        u32::from(self)
    }

    /// Sixteen bytes at a time (a restart scans up to `max_distance` of them).
    #[inline(always)]
    fn matches_back(slots: &[u8], last: u8, before: Option<(&[u8], u8)>) -> u64 {
        let n = slots.len();
        let mut bits = 0;
        let mut done = 0;
        while done + 16 <= n {
            let at = n - done - 16;
            let mut matches = byte_matches(slots, at, last);
            if let Some((before, previous)) = before {
                matches &= byte_matches(before, at, previous);
            }
            while matches != 0 {
                // Bit j is slot at + j, which is done + 15 - j from the end.
                let j = matches.trailing_zeros() as usize;
                bits |= 1 << (done + 15 - j);
                matches &= matches - 1;
            }
            done += 16;
        }
        for k in done..n {
            let matched = slots.get(n - 1 - k) == Some(&last)
                && before.is_none_or(|(before, previous)| before.get(n - 1 - k) == Some(&previous));
            if matched {
                bits |= 1 << k;
            }
        }
        bits
    }

    /// Eight bytes at a time (the text of a repeat is compared to its end).
    #[inline(always)]
    fn same_ends(x: &[u8], y: &[u8]) -> usize {
        let mut same = 0;
        let (mut xs, mut ys) = (x.rchunks_exact(8), y.rchunks_exact(8));
        for (a, b) in xs.by_ref().zip(ys.by_ref()) {
            let (mut left, mut right) = ([0u8; 8], [0u8; 8]);
            left.copy_from_slice(a);
            right.copy_from_slice(b);
            let differ = u64::from_le_bytes(left) ^ u64::from_le_bytes(right);
            if differ != 0 {
                // The highest differing byte is the last (little-endian).
                return same + (differ.leading_zeros() / 8) as usize;
            }
            same += 8;
        }
        same + xs
            .remainder()
            .iter()
            .rev()
            .zip(ys.remainder().iter().rev())
            .take_while(|(a, b)| a == b)
            .count()
    }
}

/// A token id below 2^32.
impl Slot<Token> for u32 {
    #[inline(always)]
    fn store(symbol: Token) -> Self {
        symbol.0 as u32
    }

    #[inline(always)]
    fn load(self) -> Token {
        Token(u64::from(self))
    }
}

/// A Unicode code point (lone surrogates included, so any Python `str` can be fed).
impl Symbol for u32 {
    type Narrow = u8;

    #[inline(always)]
    fn key(self) -> u64 {
        u64::from(self)
    }

    #[inline(always)]
    fn wide_bits(self) -> u64 {
        // Zero for every byte: the check that ASCII text fits compiles to nothing.
        u64::from(self >> 8)
    }

    #[inline(always)]
    fn blank_bit(self) -> u64 {
        // ASCII, nearly all text, by table with no branch on the character (spaces are
        // irregular); the branch on `< 0x80` is predictable.
        match ASCII_BLANK.get(self as usize) {
            Some(&bit) => u64::from(bit),
            None => u64::from(is_white_space(self)),
        }
    }
}

/// A token id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Token(pub u64);

impl Symbol for Token {
    type Narrow = u32;

    #[inline(always)]
    fn wide_bits(self) -> u64 {
        self.0 >> 32
    }

    /// The id with its high half folded into its low half (`id ^ (id >> 32)`, a bijection that
    /// leaves every id below 2^32 as it is). The window hash is a polynomial mod 2^64, where a
    /// bit of a symbol only ever moves up: bit 63 contributes the same 2^63 at every position
    /// of a window whatever the key, and the bits just below it little more. Unfolded, ids
    /// that differ only in their top bits (0 and 2^63, say: an int64 id and its negative) gave
    /// windows with one hash for every key, and a chant made of such windows could chain at
    /// alternating gaps and never be reported (found by the chant_tokens fuzz target). Folded,
    /// a high-bit difference also moves the low bits, which every position weighs apart.
    #[inline(always)]
    fn key(self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }

    #[inline(always)]
    fn blank_bit(self) -> u64 {
        0
    }
}

/// Unicode White_Space (what Rust's `char::is_whitespace` accepts), for any code point.
#[inline(always)]
pub fn is_white_space(c: u32) -> bool {
    if c < 64 {
        (ASCII_WHITE_SPACE >> c) & 1 == 1
    } else {
        char::from_u32(c).is_some_and(char::is_whitespace)
    }
}

/// The ASCII White_Space characters (all below 64), one bit each.
const ASCII_WHITE_SPACE: u64 = (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 13) | (1 << 32);

/// 1 for each ASCII White_Space character.
static ASCII_BLANK: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut c = 0;
    while c < 64 {
        table[c] = ((ASCII_WHITE_SPACE >> c) & 1) as u8;
        c += 1;
    }
    table
};

/// Text for a detector of code points, in the forms a caller may hold it.
#[derive(Clone, Copy, Debug)]
pub enum TextInput<'a> {
    /// ASCII text: its bytes are its code points (the fastest form).
    Ascii(&'a [u8]),
    /// Any UTF-8 text.
    Utf8(&'a str),
    /// Code points (lone surrogates included).
    CodePoints(&'a [u32]),
}

impl TextInput<'_> {
    /// Length in UTF-8 bytes, or code points (ASCII: both).
    pub fn len(&self) -> usize {
        match self {
            TextInput::Ascii(b) => b.len(),
            TextInput::Utf8(s) => s.len(),
            TextInput::CodePoints(c) => c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Settings of a detector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChantConfig {
    /// Window length in symbols (`content_chunk_size`).
    pub window: u64,
    /// Occurrences with identical gaps that make a chant (`max_repeated_chunks`).
    pub min_repeats: u64,
    /// Longest chant period caught: counted occurrences further apart than
    /// `max_period + window - 1` do not chain (the proximity bound).
    pub max_period: u64,
    /// Skip windows made only of whitespace (indentation, blank lines, padding).
    pub ignore_whitespace: bool,
}

impl Default for ChantConfig {
    fn default() -> Self {
        ChantConfig {
            window: 50,
            min_repeats: 8,
            max_period: 1000,
            ignore_whitespace: true,
        }
    }
}

impl ChantConfig {
    /// Largest distance between two chained occurrences.
    pub fn max_distance(&self) -> u64 {
        self.max_period + self.window - 1
    }

    /// How many previous windows an anchor's key is compared with: a power of two, at most
    /// `MAX_ANCHOR_SPAN` and at most `window + min_repeats`. A chant's tracked window may
    /// first become an anchor up to `span + period` symbols into the chant, and the latency
    /// bound leaves room for `window + min_repeats + period` of that.
    pub fn anchor_span(&self) -> usize {
        let limit = (self.window.saturating_add(self.min_repeats)).min(MAX_ANCHOR_SPAN as u64) as usize;
        1 << limit.max(1).ilog2()
    }

    /// Symbols of history kept: enough to compare two gaps and to confirm a whole chain.
    pub fn history(&self) -> u64 {
        (self.min_repeats + 1) * self.max_distance() + self.window
    }

    /// The configuration of a `settings::CHANT` values row (checked: each in its range).
    pub fn from_values(values: &[Value]) -> ChantConfig {
        let get = |name| CHANT.index(name).and_then(|i| values.get(i).copied());
        let count = |name| get(name).map_or(0, Value::count);
        ChantConfig {
            window: count("content_chunk_size"),
            min_repeats: count("max_repeated_chunks"),
            max_period: count("max_period"),
            ignore_whitespace: get("ignore_whitespace").and_then(Value::switch).unwrap_or(true),
        }
    }

    /// Why this configuration is unusable, if it is: the setting to change (as
    /// `ChantDetector` calls it) and the range it accepts given the others.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        for (name, value) in [
            ("content_chunk_size", self.window),
            ("max_repeated_chunks", self.min_repeats),
            ("max_period", self.max_period),
        ] {
            if value == 0 {
                return Some((name, "must be >= 1, got 0".to_owned()));
            }
        }
        if self.max_period > MAX_PERIOD {
            return Some((
                "max_period",
                format!("must be <= {MAX_PERIOD}, got {}", self.max_period),
            ));
        }
        if self.window > self.most_window() {
            return Some((
                "content_chunk_size",
                format!(
                    "must be <= {} with max_period={}, got {}",
                    self.most_window(),
                    self.max_period,
                    self.window
                ),
            ));
        }
        if self.min_repeats > self.most_repeats() {
            return Some((
                "max_repeated_chunks",
                format!(
                    "must be <= {} with content_chunk_size={} and max_period={}, got {}",
                    self.most_repeats(),
                    self.window,
                    self.max_period,
                    self.min_repeats
                ),
            ));
        }
        None
    }

    /// The longest window this `max_period` (below `MAX_DISTANCE`) allows.
    pub fn most_window(&self) -> u64 {
        MAX_DISTANCE.saturating_sub(self.max_period)
    }

    /// The most repeats this window and period (within `MAX_DISTANCE`) allow: the history
    /// must fit `MAX_HISTORY` (at least one repeat always fits, since 3 * 65535 < 2^21).
    pub fn most_repeats(&self) -> u64 {
        let distance = (self.max_period + self.window).max(1);
        (MAX_HISTORY.saturating_sub(self.window) / distance)
            .saturating_sub(1)
            .min(MAX_REPEATS)
    }

    /// The nearest usable configuration (the session engine clamps instead of failing).
    pub fn clamped(self) -> ChantConfig {
        let mut c = ChantConfig {
            window: self.window.clamp(1, 4096),
            min_repeats: self.min_repeats.clamp(1, 256),
            max_period: self.max_period.clamp(1, 4096),
            ..self
        };
        while c.problem().is_some() && c.min_repeats > 1 {
            c.min_repeats /= 2;
        }
        c
    }
}

/// What a detector reports when it finds chanting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChantEvent<S> {
    /// Offset (symbols since the stream started) where the repetition starts.
    pub start: u64,
    /// Symbols consumed when the chant was confirmed.
    pub end: u64,
    /// The smallest period of the repeated text; None when `min_repeats` is 1.
    pub period: Option<u64>,
    /// Chained occurrences of the window (`min_repeats`).
    pub count: u64,
    /// The repeated window.
    pub window: Vec<S>,
}

/// A window's chain, 16 bytes so a bucket of four is one cache line.
#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    /// Low half of the window's key (the bucket comes from a mix of all of it).
    tag: u32,
    /// Low 32 bits of the last counted position (ages are taken modulo 2^32).
    last: u32,
    gap: u16,
    /// 0: vacant.
    count: u16,
    _pad: u32,
}

/// The secret key of a detector's window hash (random in production; tests may fix it).
#[derive(Clone, Copy, Debug)]
pub struct HashKey {
    pub base: u64,
    pub salt: u64,
}

impl HashKey {
    /// A fresh secret key (odd base).
    pub fn random() -> HashKey {
        HashKey {
            base: random_u64(1) | 1,
            salt: random_u64(2),
        }
    }

    /// The key of `seed`: the first two values of splitmix64 from it (odd base), so every
    /// seed gives a well-mixed key and the same one on every machine.
    pub fn from_seed(seed: u64) -> HashKey {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        HashKey {
            base: next() | 1,
            salt: next(),
        }
    }
}

/// The recent symbols, in a ring of `slots`: position `p` is in slot `(p - start) % len`. The
/// ring starts with room for `FIRST_HISTORY` symbols and grows while a stream outgrows it
/// (short responses never pay for the whole history), up to exactly what a scan can read
/// back plus a batch (no power-of-two rounding: at default settings that would be 68% more);
/// positions only wrap around once it is full. It stays narrow (a byte per ASCII or Latin-1
/// character, 32 bits per token id below 2^32) until a symbol of the stream needs more.
#[derive(Clone, Debug)]
struct History<S: Symbol> {
    slots: Slots<S>,
    /// The position in slot 0 in the ring's current turn (the stream's first position
    /// until the ring is full and wraps). A scan reads back less than one turn from it.
    start: u64,
    /// Slots of the full ring.
    full: usize,
}

#[derive(Clone, Debug)]
enum Slots<S: Symbol> {
    Narrow(Vec<S::Narrow>),
    Wide(Vec<S>),
}

/// Symbols of room the history starts with.
const FIRST_HISTORY: usize = 1 << 10;

/// The aligned runs of two spans of a ring of `size` slots, in order: `(first slot of one,
/// first slot of the other, length)`, each contiguous in both (at most three).
struct Runs {
    a: usize,
    b: usize,
    left: usize,
    size: usize,
}

impl Iterator for Runs {
    type Item = (usize, usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let run = self
            .left
            .min(self.size.saturating_sub(self.a))
            .min(self.size.saturating_sub(self.b))
            .max(1);
        let item = (self.a, self.b, run);
        self.left = self.left.saturating_sub(run);
        self.a = if self.a + run >= self.size { 0 } else { self.a + run };
        self.b = if self.b + run >= self.size { 0 } else { self.b + run };
        Some(item)
    }
}

/// Bit j set when `bytes[at + j] == byte`, for the 16 bytes from `at` (none when there are not
/// 16): one compare of two 128-bit vectors (SSE2 is part of x86-64).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn byte_matches(bytes: &[u8], at: usize, byte: u8) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    let Some(chunk) = bytes.get(at..at + 16) else {
        return 0;
    };
    // SAFETY: `chunk` holds the 16 bytes an unaligned 128-bit load reads (no alignment is
    // required), and SSE2 is available on every x86-64 processor.
    let mask = unsafe {
        let lanes = _mm_loadu_si128(chunk.as_ptr().cast());
        _mm_movemask_epi8(_mm_cmpeq_epi8(lanes, _mm_set1_epi8(byte as i8)))
    };
    mask as u32
}

/// `byte_matches` elsewhere.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn byte_matches(bytes: &[u8], at: usize, byte: u8) -> u32 {
    byte_matches_in_words(bytes, at, byte)
}

/// `byte_matches`, eight bytes at a time in a u64.
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline(always)]
fn byte_matches_in_words(bytes: &[u8], at: usize, byte: u8) -> u32 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let Some(chunk) = bytes.get(at..at + 16) else {
        return 0;
    };
    let mut bits = 0;
    for (half, word) in chunk.chunks_exact(8).enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        // Bytes equal to `byte` become 0; then a byte's top bit is set exactly when it is 0.
        let x = u64::from_le_bytes(bytes) ^ (0x0101_0101_0101_0101 * u64::from(byte));
        let zero = !(((x & LOW7) + LOW7) | x | LOW7);
        // The top bits of bytes 0..8 to bits 0..8.
        let packed = (((zero >> 7) & 0x0101_0101_0101_0101).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32;
        bits |= packed << (8 * half);
    }
    bits
}

/// `out[k] = convert(input[k])`.
#[inline(always)]
fn store<T: Copy, N>(out: Option<&mut [N]>, input: &[T], convert: impl Fn(T) -> N) {
    for (o, &t) in out.unwrap_or_default().iter_mut().zip(input) {
        *o = convert(t);
    }
}

impl<S: Symbol> History<S> {
    fn new(config: &ChantConfig) -> Self {
        History {
            slots: Slots::Narrow(Vec::new()),
            start: 0,
            // A batch is written before its windows are counted, and counting one reads
            // back at most the history from it.
            full: usize::try_from(config.history()).map_or(usize::MAX, |h| h.saturating_add(BATCH)),
        }
    }

    fn len(&self) -> usize {
        match &self.slots {
            Slots::Narrow(v) => v.len(),
            Slots::Wide(v) => v.len(),
        }
    }

    /// Start a stream at `position` (the symbols held are never read again). A ring widened
    /// by the last stream is narrow again, with room for as many symbols.
    fn restart(&mut self, position: u64) {
        self.start = position;
        if let Slots::Wide(wide) = &self.slots {
            self.slots = Slots::Narrow(Vec::with_capacity(wide.len()));
        }
    }

    fn heap_bytes(&self) -> usize {
        match &self.slots {
            Slots::Narrow(v) => v.capacity() * std::mem::size_of::<S::Narrow>(),
            Slots::Wide(v) => v.capacity() * std::mem::size_of::<S>(),
        }
    }

    /// The slot of `position`: in this turn of the ring, the next or the last.
    #[inline(always)]
    fn slot(&self, position: u64) -> usize {
        let (offset, size) = (position.wrapping_sub(self.start), self.len() as u64);
        if offset < size {
            offset as usize
        } else if offset < 2 * size {
            (offset - size) as usize
        } else {
            offset.wrapping_add(size) as usize
        }
    }

    /// The aligned runs of the spans of `n` positions from `a` and from `b`.
    #[inline(always)]
    fn runs(&self, a: u64, b: u64, n: usize) -> Runs {
        let (a, b) = if n == 0 { (0, 0) } else { (self.slot(a), self.slot(b)) };
        Runs {
            a,
            b,
            left: n,
            size: self.len(),
        }
    }

    /// Write `batch` (at most `BATCH` items, converted by `convert`) at positions `at..`,
    /// growing the ring first if it is not full and would otherwise wrap.
    #[inline(always)]
    fn append<T: Copy>(&mut self, at: u64, batch: &[T], convert: &impl Fn(T) -> S) {
        if let Slots::Narrow(narrow) = &self.slots {
            // One OR over the batch decides (for ASCII text, nothing: no byte is too wide).
            if batch.iter().fold(0, |bits, &t| bits | convert(t).wide_bits()) != 0 {
                let mut wide = Vec::with_capacity(narrow.capacity());
                wide.extend(narrow.iter().map(|&n| n.load()));
                self.slots = Slots::Wide(wide);
            }
        }
        let size = self.len();
        if size == self.full {
            // A batch starts in this turn or the next (each is shorter than a turn).
            if at.wrapping_sub(self.start) >= size as u64 {
                self.start += size as u64;
            }
        }
        let wanted = usize::try_from((at + batch.len() as u64).wrapping_sub(self.start)).unwrap_or(usize::MAX);
        if wanted > size && size < self.full {
            // Every position so far is in the slot it would have in the larger ring.
            let grown = wanted.max(FIRST_HISTORY).next_power_of_two().min(self.full);
            match &mut self.slots {
                Slots::Narrow(v) => {
                    v.reserve_exact(grown - size);
                    v.resize(grown, S::Narrow::default());
                }
                Slots::Wide(v) => {
                    v.reserve_exact(grown - size);
                    v.resize(grown, S::default());
                }
            }
        }
        let slot = self.slot(at);
        if slot + batch.len() <= self.len() {
            // No wrap around the ring (nearly always).
            match &mut self.slots {
                Slots::Narrow(v) => store(v.get_mut(slot..slot + batch.len()), batch, |t| {
                    S::Narrow::store(convert(t))
                }),
                Slots::Wide(v) => store(v.get_mut(slot..slot + batch.len()), batch, convert),
            }
            return;
        }
        let mut from = 0;
        for (slot, _, run) in self.runs(at, at, batch.len()) {
            let input = batch.get(from..from + run).unwrap_or_default();
            match &mut self.slots {
                Slots::Narrow(v) => store(v.get_mut(slot..slot + run), input, |t| S::Narrow::store(convert(t))),
                Slots::Wide(v) => store(v.get_mut(slot..slot + run), input, convert),
            }
            from += run;
        }
    }

    /// The symbol at `position` (within the history).
    fn at(&self, position: u64) -> S {
        let slot = self.slot(position);
        match &self.slots {
            Slots::Narrow(v) => v.get(slot).map(|n| n.load()),
            Slots::Wide(v) => v.get(slot).copied(),
        }
        .unwrap_or_default()
    }

    /// Symbols `from..=to` (within the history) repeat with period `q`.
    fn is_periodic(&self, from: u64, to: u64, q: u64) -> bool {
        let Some(n) = (to + 1).checked_sub(from + q) else {
            return true;
        };
        let mut runs = self.runs(from + q, from, n as usize);
        match &self.slots {
            Slots::Narrow(v) => runs.all(|(a, b, run)| v.get(a..a + run) == v.get(b..b + run)),
            Slots::Wide(v) => runs.all(|(a, b, run)| v.get(a..a + run) == v.get(b..b + run)),
        }
    }
}

/// The chain table's parameters, borrowed apart from the table so the scan loop can update
/// chains without giving up its local state.
struct Chains<'a, S: Symbol> {
    window: u64,
    min_repeats: u64,
    max_distance: u64,
    bucket_mask: u64,
    origin: u64,
    history: &'a History<S>,
}

impl<S: Symbol> Chains<'_, S> {
    /// Update the chain of the window `key` ending at `i`; returns its table slot and state.
    #[inline(always)]
    fn count(&self, table: &mut [Entry], key: u64, i: u64) -> (usize, Entry) {
        let (window, max_distance) = (self.window, self.max_distance);
        let tag = key as u32;
        let bucket = ((key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) & self.bucket_mask) as usize * WAYS;
        let now = i as u32;
        // One pass over the bucket with no early exit (cheap to predict): the live entry of
        // this window if any, else the entry to replace (vacant or expired first, then the
        // oldest).
        let mut hit = None;
        let mut victim = bucket;
        let mut victim_rank = 0;
        for way in bucket..bucket + WAYS {
            let entry = table.get(way).copied().unwrap_or_default();
            let age = u64::from(now.wrapping_sub(entry.last));
            let live = entry.count > 0 && age <= max_distance;
            if live && entry.tag == tag {
                hit = Some((way, entry, age));
            }
            let rank = if live { age } else { u64::MAX };
            if rank > victim_rank || way == bucket {
                victim_rank = rank;
                victim = way;
            }
        }
        let (way, updated) = match hit {
            None => (
                victim,
                Entry {
                    tag,
                    last: now,
                    gap: 0,
                    count: 1,
                    _pad: 0,
                },
            ),
            Some((way, entry, age)) if age < window => return (way, entry),
            Some((way, entry, distance)) => {
                // The chain extends when this occurrence is one gap after its last and the
                // `gap + window` symbols ending here equal those ending there: compared symbol
                // by symbol, so a tag collision can only restart a chain. That costs O(1) per
                // symbol of a chant and nothing on ordinary text.
                let gap = u64::from(entry.gap);
                let extends = entry.count >= 2
                    && distance == gap
                    && i + 1 - self.origin >= 2 * gap + window
                    && self.history.is_periodic(i + 1 - 2 * gap - window, i, gap);
                let (gap, count) = if extends {
                    (gap, u64::from(entry.count) + 1)
                } else {
                    self.restart(i)
                };
                (
                    way,
                    Entry {
                        tag,
                        last: now,
                        gap: gap as u16,
                        count: count as u16,
                        _pad: 0,
                    },
                )
            }
        };
        if let Some(e) = table.get_mut(way) {
            *e = updated;
        }
        (way, updated)
    }

    /// The chain a counted occurrence at `i` starts when it does not extend its own, read from
    /// the text: the gap q (`window..=max_distance`) at which the window ending here occurs
    /// most often at i - q, i - 2q, ... with the same text between each two (the smallest q
    /// on a tie), and that many occurrences, this one included, at most `min_repeats`. A
    /// window that occurs several times within its chant's period thus chains at the
    /// period, whichever of its occurrences are counted. (0, 1) when it occurs at no such
    /// distance (its entry was another window's, sharing its tag).
    #[inline(never)]
    fn restart(&self, i: u64) -> (u64, u64) {
        let history = self.history;
        let end = history.slot(i);
        match &history.slots {
            Slots::Narrow(v) => self.best_gap(v, end, i),
            Slots::Wide(v) => self.best_gap(v, end, i),
        }
    }

    fn best_gap<N: Slot<S>>(&self, slots: &[N], end: usize, i: u64) -> (u64, u64) {
        let (window, most) = (self.window, self.min_repeats);
        let size = slots.len();
        let Some(&last) = slots.get(end) else {
            return (0, 1);
        };
        // The window's first symbol, when it has two: a second filter, less likely than the
        // symbol next to the last to match along with it (indentation, say).
        let back = (window - 1) as usize;
        let first = if back > 0 {
            slots.get(end.checked_sub(back).unwrap_or((end + size).saturating_sub(back)))
        } else {
            None
        };
        // Symbols of the stream up to `i`; the window must fit before i - q.
        let stream = i + 1 - self.origin;
        // To beat `best`, the window must recur at i - q and the text repeat best - 1 more
        // times: window + (best - 1) * q symbols, of the stream - q before i - q, so
        // q <= (stream - window) / best.
        let reach = |best: u64| (stream.saturating_sub(window) / best).min(self.max_distance);
        let mut best = (0, 1);
        let mut top = reach(1);
        let mut q = window;
        while q <= top {
            // The slots of i - q, i - q - 1, ... down to the ring's start or `top`: one slice.
            // q < size (the stream up to i fits an unwrapped ring, and a full one holds more
            // than max_distance), so i - q is a slot back from `end`, wrapping at most once.
            let Some(from) = end
                .checked_sub(q as usize)
                .or_else(|| (end + size).checked_sub(q as usize))
            else {
                break;
            };
            let n = (top - q + 1).min(from as u64 + 1).min(64) as usize;
            let Some(chunk) = slots.get(from + 1 - n..=from) else {
                break;
            };
            // Bit k: the symbol at i - q - k is the window's last (a candidate), and the one a
            // window before it the window's first (when the window has two and those slots do
            // not wrap around the ring).
            let before =
                first.and_then(|&symbol| Some((slots.get(from.checked_sub(back + n - 1)?..=from - back)?, symbol)));
            let mut candidates = N::matches_back(chunk, last, before);
            while candidates != 0 {
                let gap = q + u64::from(candidates.trailing_zeros());
                candidates &= candidates - 1;
                if gap > top {
                    return best;
                }
                let needed = window + (best.1 - 1) * gap;
                let earlier = from - (gap - q) as usize;
                // Most candidates differ within the last few symbols: compare those first,
                // as one slice each when neither wraps.
                let quick = needed.min(8) as usize;
                if let (Some(x), Some(y)) = (
                    end.checked_sub(quick - 1).and_then(|e| slots.get(e..=end)),
                    earlier.checked_sub(quick - 1).and_then(|e| slots.get(e..=earlier)),
                ) {
                    if N::same_ends(x, y) < quick {
                        continue;
                    }
                }
                let most_needed = (window + most.saturating_sub(2) * gap).min(stream - gap);
                let same = common_suffix::<S, N>(slots, end, earlier, most_needed as usize) as u64;
                if same >= needed {
                    best = (gap, (2 + (same - window) / gap).min(most));
                    if best.1 >= most {
                        return best;
                    }
                    top = reach(best.1);
                }
            }
            q += n as u64;
        }
        best
    }
}

/// How many symbols of the ring `slots` match going back from slots `a` and `b` (at most
/// `most`).
fn common_suffix<S, N: Slot<S>>(slots: &[N], mut a: usize, mut b: usize, most: usize) -> usize {
    let size = slots.len();
    let mut same = 0;
    while same < most {
        // The runs down to the ring's start from `a` and `b`, as two slices.
        let run = (a + 1).min(b + 1).min(most - same);
        let (Some(x), Some(y)) = (slots.get(a + 1 - run..=a), slots.get(b + 1 - run..=b)) else {
            return same;
        };
        let matched = N::same_ends(x, y);
        same += matched;
        if matched < run {
            return same;
        }
        a = if a + 1 == run { size - 1 } else { a - run };
        b = if b + 1 == run { size - 1 } else { b - run };
    }
    same
}

/// The streaming detector. Feed symbols in any chunking: the verdict is the same.
#[derive(Clone, Debug)]
pub struct Chant<S: Symbol> {
    config: ChantConfig,
    key: HashKey,
    /// `base^window`.
    window_power: u64,
    /// Hash of the window ending at the newest symbol (of all symbols so far while fewer than
    /// a window have been seen).
    hash: u64,
    history: History<S>,
    table: Vec<Entry>,
    bucket_mask: u64,
    /// Ranks of the windows ending at the last `MAX_ANCHOR_SPAN` positions (NO_RANK: none).
    tail: [i32; SPAN],
    /// Absolute position where the current stream started. A reset moves it past every
    /// position a table entry could still chain to, so the table never needs clearing.
    origin: u64,
    /// Absolute position of the next symbol.
    len: u64,
    /// Whitespace symbols in a row at the end of the stream.
    blank_run: u64,
    event: Option<ChantEvent<S>>,
}

/// Window ranks: `SPAN` positions before a batch, then the batch's.
type Ranks = [i32; SPAN + BATCH];

/// Work space for the batches of a feed, one per thread: detectors carry no batch buffers,
/// and a token-sized feed touches only the few entries it uses.
struct Scratch {
    hashes: [u64; BATCH],
    /// Ranks of the `SPAN` positions before a batch, then the batch's.
    ranks: Ranks,
    /// The doubling minima of `anchors` (two buffers, alternating).
    minima: [Ranks; 2],
}

impl Scratch {
    const EMPTY: Scratch = Scratch {
        hashes: [0; BATCH],
        ranks: [NO_RANK; SPAN + BATCH],
        minima: [[NO_RANK; SPAN + BATCH]; 2],
    };
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::EMPTY) };
}

/// `target[t] = min(source[t], source[t + width])` for every `t` where both exist.
#[inline(always)]
fn min_pairs(target: &mut [i32], source: &[i32], width: usize) {
    let ahead = source.get(width..).unwrap_or_default();
    for ((out, &a), &b) in target.iter_mut().zip(source).zip(ahead) {
        *out = a.min(b);
    }
}

/// One bit per window of a batch.
type Anchors = [u64; BATCH / 64];

/// Bit j of the result is set when the batch's j-th window is an anchor: a window no greater
/// than any of the `span` before it. `ranks` holds the ranks of the `SPAN` positions before
/// the batch, then the batch's. Slice passes the compiler turns into vector code (with AVX2
/// where the processor has it: twice the lanes, a one-instruction minimum).
fn anchors(ranks: &[i32], span: usize, minima: &mut [Ranks; 2]) -> Anchors {
    if ranks.len() <= SPAN + span {
        return anchors_short(ranks, span);
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor supports AVX2, checked just above.
        return unsafe { anchors_avx2(ranks, span, minima) };
    }
    anchors_portable(ranks, span, minima)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn anchors_avx2(ranks: &[i32], span: usize, minima: &mut [Ranks; 2]) -> Anchors {
    anchors_portable(ranks, span, minima)
}

/// `anchors` for a batch of at most `span` windows (a token-sized feed), where the doubling
/// passes would cost more than they save: the `span` windows before the batch's j-th are
/// the last `span - j` before the batch and the batch's first `j`, so one pass of suffix
/// minima over the former and a running minimum over the latter give every `earlier`.
fn anchors_short(ranks: &[i32], span: usize) -> Anchors {
    let before = ranks.get(SPAN - span..SPAN).unwrap_or_default();
    let batch_ranks = ranks.get(SPAN..).unwrap_or_default();
    let n = batch_ranks.len();
    // Suffix minima of `before` from position n down (those past it are one reduction).
    let mut suffix = [NO_RANK; SPAN];
    let (head, tail) = before.split_at(n.min(before.len()));
    let mut minimum = tail.iter().fold(NO_RANK, |m, &r| m.min(r));
    for (out, &rank) in suffix.iter_mut().zip(head).rev() {
        minimum = minimum.min(rank);
        *out = minimum;
    }
    let mut running = NO_RANK;
    let mut word = 0u64;
    for (k, (&rank, &rest)) in batch_ranks.iter().zip(&suffix).enumerate() {
        word |= u64::from((rank != NO_RANK) & (rank <= rest.min(running))) << k;
        running = running.min(rank);
    }
    let mut words = [0u64; BATCH / 64];
    words[0] = word;
    words
}

#[inline(always)]
fn anchors_portable(ranks: &[i32], span: usize, minima: &mut [Ranks; 2]) -> Anchors {
    // earlier[j]: the minimum rank of the `span` windows before the batch's j-th, by
    // doubling (the minimum of 1, 2, 4, ... consecutive ranks) from the first of them.
    let from = ranks.get(SPAN - span..).unwrap_or_default();
    let count = from.len();
    let [a, b] = minima;
    if let Some(start) = a.get_mut(..count) {
        start.copy_from_slice(from);
    }
    let (mut source, mut target) = (a, b);
    let mut width = 1;
    while width < span {
        min_pairs(&mut target[..count - width], &source[..count], width);
        std::mem::swap(&mut source, &mut target);
        width *= 2;
    }
    let batch_ranks = ranks.get(SPAN..).unwrap_or_default();
    let mut words = [0u64; BATCH / 64];
    for ((word, ranks), earlier) in words.iter_mut().zip(batch_ranks.chunks(64)).zip(source.chunks(64)) {
        *word = (0..64)
            .zip(ranks.iter().zip(earlier))
            .fold(0, |bits, (k, (&rank, &earlier))| {
                bits | (u64::from((rank != NO_RANK) & (rank <= earlier)) << k)
            });
    }
    words
}

fn random_u64(tag: u64) -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(tag);
    hasher.finish()
}

/// A window's rank for anchor selection: the top 30 bits of its hash (any fixed order works;
/// 32-bit lanes let the minimum run as vector code, and 30 bits leave NO_RANK, "no window",
/// above every real rank).
#[inline(always)]
fn rank(hash: u64) -> i32 {
    (hash >> 34) as i32
}

/// NO_RANK, behind a branch the compiler keeps: windows made only of whitespace are rare
/// enough that a predicted branch beats computing a select at every position.
#[cold]
#[inline(never)]
fn no_rank() -> i32 {
    NO_RANK
}

/// The rolling hash of the window ending at the newest symbol, with the run of whitespace
/// there.
#[derive(Clone, Copy)]
struct Roll {
    base: u64,
    salt: u64,
    /// `base^window`.
    window_power: u64,
    /// A whitespace run this long makes a whitespace-only window.
    blank_limit: u64,
    hash: u64,
    blank_run: u64,
}

impl Roll {
    /// One symbol in (and, when `leaving` is given, one out); returns the new hash and
    /// whether the window ending here is whitespace only.
    #[inline(always)]
    fn step<S: Symbol>(&mut self, entering: S, leaving: Option<S>) -> (u64, bool) {
        let out = leaving.map_or(0, |s| s.key().wrapping_add(self.salt).wrapping_mul(self.window_power));
        // The addend first: the chain from one hash to the next is one multiply and one add.
        let addend = entering.key().wrapping_add(self.salt).wrapping_sub(out);
        self.hash = self.hash.wrapping_mul(self.base).wrapping_add(addend);
        // Arithmetic, not a select the compiler could turn into a branch: whitespace is
        // frequent and irregular in text.
        self.blank_run = (self.blank_run + 1) & entering.blank_bit().wrapping_neg();
        (self.hash, self.blank_run >= self.blank_limit)
    }

    /// The symbols before the stream's first whole window ends, the first of them `from`
    /// positions after that end (wrapping: they are before it) and the last at most at it.
    fn warm_up<S: Symbol, N: Slot<S>>(
        &mut self,
        slots: Option<&[N]>,
        from: u64,
        hashes: Option<&mut [u64]>,
        ranks: Option<&mut [i32]>,
    ) {
        let (Some(slots), Some(hashes), Some(ranks)) = (slots, hashes, ranks) else {
            return;
        };
        // A copy in registers for the loop (the compiler cannot keep fields behind `&mut`
        // there across the stores to the slices).
        let mut roll = *self;
        for (k, ((slot, hash_out), rank_out)) in slots.iter().zip(hashes).zip(ranks).enumerate() {
            let (hash, blank) = roll.step(slot.load(), None);
            *hash_out = hash;
            // Only the window ending at the first whole window's end is whole.
            let whole = from.wrapping_add(k as u64) == 0;
            *rank_out = if !whole || blank { no_rank() } else { rank(hash) };
        }
        *self = roll;
    }

    /// Whole windows: `entering[k]` comes in as `leaving[k]` goes out.
    #[inline(always)]
    fn run<S: Symbol, N: Slot<S>>(
        &mut self,
        entering: Option<&[N]>,
        leaving: Option<&[N]>,
        hashes: Option<&mut [u64]>,
        ranks: Option<&mut [i32]>,
    ) {
        let (Some(entering), Some(leaving), Some(hashes), Some(ranks)) = (entering, leaving, hashes, ranks) else {
            return;
        };
        let mut roll = *self;
        for (((slot, out), hash_out), rank_out) in entering.iter().zip(leaving).zip(hashes).zip(ranks) {
            let (hash, blank) = roll.step(slot.load(), Some(out.load()));
            *hash_out = hash;
            *rank_out = if blank { no_rank() } else { rank(hash) };
        }
        *self = roll;
    }
}

impl<S: Symbol> Chant<S> {
    /// A detector with a secret random hash key; an unusable configuration is clamped (see
    /// `ChantConfig::clamped`).
    pub fn new(config: ChantConfig) -> Self {
        Self::with_key(config, HashKey::random())
    }

    /// A detector with a given hash key (a session draws its key up front and builds its
    /// detector with the first response; tests fix the key).
    pub fn with_key(config: ChantConfig, key: HashKey) -> Self {
        let config = if config.problem().is_some() {
            config.clamped()
        } else {
            config
        };
        let key = HashKey {
            base: key.base | 1,
            ..key
        };
        // At most `max_distance` chains are live (an anchor at every position); a chain lost
        // to a full bucket restarts, which only delays a verdict. Small configurations get
        // room for that worst case (a bucket per two positions, the rule stays exact), large
        // ones room for the usual case: one window in 33 is an anchor, so at default
        // settings ~32 chains are live and 64 buckets of 4 entries keep the load near 12%.
        let positions = (config.max_distance() + 1).next_power_of_two();
        let buckets = (positions / 32).max((positions / 2).min(64)).max(1);
        Chant {
            key,
            window_power: key.base.wrapping_pow(u32::try_from(config.window).unwrap_or(u32::MAX)),
            hash: 0,
            // The table is allocated on the first feed and the history grows with the
            // stream: a detector that never sees output (most `DoomLoopDetector`s) costs a few
            // hundred bytes, and one that sees short responses a few KiB.
            history: History::new(&config),
            table: Vec::new(),
            bucket_mask: buckets - 1,
            tail: [NO_RANK; SPAN],
            origin: 0,
            len: 0,
            blank_run: 0,
            event: None,
            config,
        }
    }

    pub fn config(&self) -> &ChantConfig {
        &self.config
    }

    /// Symbols consumed since the stream started (stops growing once chanting is found).
    pub fn position(&self) -> u64 {
        self.len - self.origin
    }

    /// The chant found, if any (kept until `reset`).
    pub fn event(&self) -> Option<&ChantEvent<S>> {
        self.event.as_ref()
    }

    /// The secret key of the window hash (saved by a session's snapshot, so a restored
    /// detector finds what the original would).
    pub fn key(&self) -> HashKey {
        self.key
    }

    /// A detector over a finished stream whose verdict was `event` (a session's snapshot
    /// restores the last response's verdict; the next response starts a new stream).
    pub fn finished(config: ChantConfig, key: HashKey, event: Option<ChantEvent<S>>) -> Self {
        let mut chant = Self::with_key(config, key);
        chant.event = event;
        chant
    }

    /// Forget everything and start a new stream (allocations and the hash key are kept, so
    /// the same text gives the same event again).
    pub fn reset(&mut self) {
        // O(1): entries of the old stream are all older than `max_distance` from here on.
        let origin = self.len + self.config.max_distance() + 1;
        self.origin = origin;
        self.len = origin;
        self.hash = 0;
        self.blank_run = 0;
        self.tail = [NO_RANK; SPAN];
        self.event = None;
        self.history.restart(origin);
    }

    /// Bytes of heap this detector holds: its history, its chain table and the window of
    /// the chant found.
    pub fn heap_bytes(&self) -> usize {
        let event = self
            .event
            .as_ref()
            .map_or(0, |e| e.window.capacity() * std::mem::size_of::<S>());
        self.history.heap_bytes() + self.table.capacity() * std::mem::size_of::<Entry>() + event
    }

    /// Feed symbols; returns the event when chanting is found during this call. After that
    /// the detector ignores further input until `reset`.
    pub fn feed<I: IntoIterator<Item = S>>(&mut self, symbols: I) -> Option<ChantEvent<S>> {
        let mut symbols = symbols.into_iter();
        let mut buffer = [S::default(); BATCH];
        while self.event.is_none() {
            let mut n = 0;
            for (slot, symbol) in buffer.iter_mut().zip(symbols.by_ref()) {
                *slot = symbol;
                n += 1;
            }
            let batch = buffer.get(..n).unwrap_or_default();
            if batch.is_empty() {
                break;
            }
            if let Some(event) = self.feed_slice(batch, |s| s) {
                return Some(event);
            }
        }
        None
    }

    /// `feed` for a slice of values that `convert` turns into symbols (bytes of ASCII text,
    /// token ids): the fast path, with no iterator between the input and the scan.
    pub fn feed_slice<T: Copy>(&mut self, input: &[T], convert: impl Fn(T) -> S) -> Option<ChantEvent<S>> {
        if self.event.is_some() {
            return None;
        }
        if self.table.is_empty() {
            self.allocate();
        }
        match SCRATCH.try_with(|cell| {
            cell.try_borrow_mut()
                .map(|mut scratch| self.scan(input, &convert, &mut scratch))
        }) {
            Ok(Ok(found)) => found,
            // No scratch to borrow (the thread is exiting; or a feed within a feed, which no
            // caller does): work on the heap.
            _ => self.scan(input, &convert, &mut Box::new(Scratch::EMPTY)),
        }
    }

    fn scan<T: Copy>(
        &mut self,
        input: &[T],
        convert: &impl Fn(T) -> S,
        scratch: &mut Scratch,
    ) -> Option<ChantEvent<S>> {
        let Scratch { hashes, ranks, minima } = scratch;
        for batch in input.chunks(BATCH) {
            let first = self.len;
            let n = batch.len();
            self.history.append(first, batch, convert);
            ranks[..SPAN].copy_from_slice(&self.tail);
            // Three passes, each a tight loop: hash the windows, take the minimum rank of the
            // windows before each, then count the anchors.
            let hashes = &mut hashes[..n];
            self.hash_batch(n, hashes, &mut ranks[SPAN..SPAN + n]);
            self.tail.copy_from_slice(&ranks[n..SPAN + n]);
            let words = anchors(&ranks[..SPAN + n], self.config.anchor_span(), minima);
            if let Some(event) = self.count_anchors(first, hashes, words) {
                self.event = Some(event.clone());
                return Some(event);
            }
        }
        None
    }

    fn allocate(&mut self) {
        self.table = vec![Entry::default(); (self.bucket_mask as usize + 1) * WAYS];
    }

    /// `hashes[k]` and `ranks[k]` become the hash and rank of the window ending at the k-th
    /// of the `n` symbols just appended to the history (NO_RANK: no whole window yet, or
    /// whitespace only).
    #[inline(always)]
    fn hash_batch(&mut self, n: usize, hashes: &mut [u64], ranks: &mut [i32]) {
        let window = self.config.window;
        let mut roll = Roll {
            base: self.key.base,
            salt: self.key.salt,
            window_power: self.window_power,
            // A whitespace run this long makes a whitespace-only window (never, when kept).
            blank_limit: if self.config.ignore_whitespace {
                window
            } else {
                u64::MAX
            },
            hash: self.hash,
            blank_run: self.blank_run,
        };
        // Symbols before the stream's first whole window have no symbol leaving the window: a
        // separate short loop, so the main one has no test for it.
        let first_window = self.origin + window;
        let warm = usize::try_from(first_window.saturating_sub(self.len)).map_or(n, |w| w.min(n));
        // Positions of the warm-up's symbols less the first whole window's end.
        let warm_from = (self.len + 1).wrapping_sub(first_window);
        let (warm_hashes, rest_hashes) = hashes.split_at_mut(warm);
        let (warm_ranks, rest_ranks) = ranks.split_at_mut(warm);
        let history = &self.history;
        let mut done = 0;
        for (slot, _, run) in history.runs(self.len, self.len, warm) {
            let (hashes, ranks) = (
                warm_hashes.get_mut(done..done + run),
                warm_ranks.get_mut(done..done + run),
            );
            let from = warm_from.wrapping_add(done as u64);
            match &history.slots {
                Slots::Narrow(v) => roll.warm_up(v.get(slot..slot + run), from, hashes, ranks),
                Slots::Wide(v) => roll.warm_up(v.get(slot..slot + run), from, hashes, ranks),
            }
            done += run;
        }
        let (after, rest) = (self.len + warm as u64, n - warm);
        let (entering, leaving) = (history.slot(after), history.slot(after.wrapping_sub(window)));
        if entering + rest <= history.len() && leaving + rest <= history.len() {
            // Neither span wraps around the ring: one run (nearly always).
            let (e, l, hashes, ranks) = (
                entering..entering + rest,
                leaving..leaving + rest,
                Some(rest_hashes),
                Some(rest_ranks),
            );
            match &history.slots {
                Slots::Narrow(v) => roll.run(v.get(e), v.get(l), hashes, ranks),
                Slots::Wide(v) => roll.run(v.get(e), v.get(l), hashes, ranks),
            }
        } else {
            let mut done = 0;
            for (entering, leaving, run) in history.runs(after, after.wrapping_sub(window), rest) {
                let (e, l) = (entering..entering + run, leaving..leaving + run);
                let (hashes, ranks) = (
                    rest_hashes.get_mut(done..done + run),
                    rest_ranks.get_mut(done..done + run),
                );
                match &history.slots {
                    Slots::Narrow(v) => roll.run(v.get(e), v.get(l), hashes, ranks),
                    Slots::Wide(v) => roll.run(v.get(e), v.get(l), hashes, ranks),
                }
                done += run;
            }
        }
        self.hash = roll.hash;
        self.blank_run = roll.blank_run;
        self.len += n as u64;
    }

    /// Update the chains of the anchors (`words`) among the windows ending at
    /// `first..first + hashes.len()`; returns the event if one is confirmed (the stream then
    /// stops there).
    #[inline(never)]
    fn count_anchors(&mut self, first: u64, hashes: &[u64], words: Anchors) -> Option<ChantEvent<S>> {
        for (word_index, &word) in words.iter().enumerate().take(hashes.len().div_ceil(64)) {
            let mut word = word;
            while word != 0 {
                let j = word_index * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let (position, hash) = (first + j as u64, hashes.get(j).copied().unwrap_or_default());
                let chains = Chains {
                    window: self.config.window,
                    min_repeats: self.config.min_repeats,
                    max_distance: self.config.max_distance(),
                    bucket_mask: self.bucket_mask,
                    origin: self.origin,
                    history: &self.history,
                };
                let (way, chain) = chains.count(&mut self.table, hash, position);
                if u64::from(chain.count) >= self.config.min_repeats {
                    if let Some(event) = self.confirm(way, chain, position) {
                        // The chant ends here: symbols after it in this batch are not counted.
                        self.len = position + 1;
                        return Some(event);
                    }
                }
            }
        }
        None
    }

    /// Check the chain ending at `i` against the real symbols; on success build the event
    /// and on failure (a hash collision) restart the chain.
    #[cold]
    fn confirm(&mut self, way: usize, chain: Entry, i: u64) -> Option<ChantEvent<S>> {
        let window = self.config.window;
        let count = u64::from(chain.count);
        let gap = u64::from(chain.gap);
        let first = (i + 1).checked_sub(window + (count - 1) * gap);
        let ring = &self.history;
        let valid = |&f: &u64| f >= self.origin && (count < 2 || ring.is_periodic(f, i, gap));
        let Some(first) = first.filter(valid) else {
            if let Some(e) = self.table.get_mut(way) {
                *e = Entry {
                    gap: 0,
                    count: 1,
                    ..chain
                };
            }
            return None;
        };
        let period = if count >= 2 {
            (1..=gap).find(|&q| gap % q == 0 && ring.is_periodic(first, i, q))
        } else {
            None
        };
        // Extend the start back while the text keeps the period (within the history).
        let floor = (i + 1).saturating_sub(self.config.history()).max(self.origin);
        let mut start = first;
        if let Some(q) = period {
            while start > floor && ring.at(start - 1) == ring.at(start - 1 + q) {
                start -= 1;
            }
        }
        let window_symbols = (i + 1 - window..=i).map(|p| ring.at(p)).collect();
        Some(ChantEvent {
            start: start - self.origin,
            end: i + 1 - self.origin,
            period,
            count,
            window: window_symbols,
        })
    }
}

impl Chant<u32> {
    /// Feed text in any of its forms (slices are scanned directly, UTF-8 is decoded).
    pub fn feed_text(&mut self, text: TextInput<'_>) -> Option<ChantEvent<u32>> {
        match text {
            TextInput::Ascii(bytes) => self.feed_slice(bytes, u32::from),
            TextInput::Utf8(text) if text.is_ascii() => self.feed_slice(text.as_bytes(), u32::from),
            TextInput::Utf8(text) => self.feed(text.chars().map(u32::from)),
            TextInput::CodePoints(code_points) => self.feed_slice(code_points, |c| c),
        }
    }
}

/// The largest stream position a snapshot may hold: no stream reaches it (resets included),
/// and it leaves the position arithmetic of a restored stream room to go on.
const MAX_POSITION: u64 = 1 << 62;

/// How a snapshot stores one symbol or history slot (little-endian, at its own width).
pub trait Stored: Copy {
    const BYTES: usize;
    fn put(self, w: &mut Writer);
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError>;
}

impl Stored for u8 {
    const BYTES: usize = 1;
    fn put(self, w: &mut Writer) {
        w.u8(self);
    }
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError> {
        r.u8(what)
    }
}

impl Stored for u32 {
    const BYTES: usize = 4;
    fn put(self, w: &mut Writer) {
        w.u32(self);
    }
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError> {
        r.u32(what)
    }
}

impl Stored for Token {
    const BYTES: usize = 8;
    fn put(self, w: &mut Writer) {
        w.u64(self.0);
    }
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError> {
        r.u64(what).map(Token)
    }
}

/// What a detector has been fed since it was created or reset: nothing, text or token ids
/// (`T` and `K`: the detectors of each, or references to them).
#[derive(Debug)]
pub enum ChantStream<T = Chant<u32>, K = Chant<Token>> {
    Fresh,
    Text(T),
    Tokens(K),
}

/// A `ChantDetector` as a snapshot holds it: its settings (`settings::CHANT`), hash key,
/// stream and whether the chant found (if any) was already reported to its caller.
#[derive(Debug)]
pub struct ChantSnapshot {
    pub settings: Vec<Value>,
    pub key: HashKey,
    pub stream: ChantStream,
    pub reported: bool,
}

/// The snapshot of a detector built from the checked `settings` with hash `key`.
pub fn chant_snapshot(
    settings: &[Value],
    key: HashKey,
    stream: ChantStream<&Chant<u32>, &Chant<Token>>,
    reported: bool,
) -> Vec<u8> {
    seal(SnapshotKind::Chant, &CHANT, |w| {
        w.settings(settings);
        w.u64(key.base);
        w.u64(key.salt);
        match stream {
            ChantStream::Fresh => w.u8(0),
            ChantStream::Text(chant) => {
                w.u8(1);
                chant.write_state(w);
            }
            ChantStream::Tokens(chant) => {
                w.u8(2);
                chant.write_state(w);
            }
        }
        w.bool(reported);
    })
}

/// The detector a [`chant_snapshot`] saved. Every length is bounded by the bytes left and by
/// what the settings allow, and every value by what the detector could hold, so bad data is
/// an error, never a panic or an allocation beyond the configuration's own.
pub fn restore_chant(data: &[u8]) -> Result<ChantSnapshot, SnapshotError> {
    let mut r = open(data, SnapshotKind::Chant, &CHANT)?;
    let settings = r.settings(&CHANT)?;
    let config = ChantConfig::from_values(&settings);
    let key = HashKey {
        base: r.u64("the hash key")?,
        salt: r.u64("the hash key")?,
    };
    if key.base & 1 == 0 {
        return Err(invalid("the hash key's base is even"));
    }
    let stream = match r.u8("the stream")? {
        0 => ChantStream::Fresh,
        1 => ChantStream::Text(Chant::read_state(&mut r, config, key)?),
        2 => ChantStream::Tokens(Chant::read_state(&mut r, config, key)?),
        other => return Err(invalid(format!("stream kind {other}"))),
    };
    let reported = r.bool("the reported flag")?;
    let found = match &stream {
        ChantStream::Fresh => false,
        ChantStream::Text(chant) => chant.event.is_some(),
        ChantStream::Tokens(chant) => chant.event.is_some(),
    };
    if reported && !found {
        return Err(invalid("a chant is reported but none was found"));
    }
    r.finish()?;
    Ok(ChantSnapshot {
        settings,
        key,
        stream,
        reported,
    })
}

fn write_slots<T: Stored>(w: &mut Writer, slots: &[T]) {
    for &slot in slots {
        slot.put(w);
    }
}

fn read_slots<T: Stored + Default>(r: &mut Reader<'_>, size: usize, written: usize) -> Result<Vec<T>, SnapshotError> {
    let mut slots = Vec::with_capacity(size);
    for _ in 0..written {
        slots.push(T::get(r, "the history")?);
    }
    slots.resize(size, T::default());
    Ok(slots)
}

impl<S: Symbol + Stored> Chant<S>
where
    S::Narrow: Stored,
{
    /// The stream's state: positions, rolling hash, ranks, history, chains and verdict.
    fn write_state(&self, w: &mut Writer) {
        w.u64(self.origin);
        w.u64(self.len);
        w.u64(self.hash);
        w.u64(self.blank_run);
        for &rank in &self.tail {
            w.u32(rank as u32);
        }
        let history = &self.history;
        w.u64(history.start);
        // Slots past the stream's positions in a ring that never turned are never read (they
        // hold nothing, or the stream before a reset): only the ones before them are saved.
        let size = history.len();
        let written = if history.start == self.origin {
            usize::try_from(self.len - history.start).map_or(size, |n| n.min(size))
        } else {
            size
        };
        match &history.slots {
            Slots::Narrow(v) => {
                w.u8(0);
                w.len(size);
                w.len(written);
                write_slots(w, &v[..written]);
            }
            Slots::Wide(v) => {
                w.u8(1);
                w.len(size);
                w.len(written);
                write_slots(w, &v[..written]);
            }
        }
        let live: Vec<(usize, &Entry)> = self.table.iter().enumerate().filter(|(_, e)| e.count > 0).collect();
        w.len(live.len());
        for (index, entry) in live {
            w.len(index);
            w.u32(entry.tag);
            w.u32(entry.last);
            w.u16(entry.gap);
            w.u16(entry.count);
        }
        match &self.event {
            Some(event) => {
                w.u8(1);
                w.u64(event.start);
                w.u64(event.end);
                w.opt_u64(event.period);
                w.u64(event.count);
                w.len(event.window.len());
                write_slots(w, &event.window);
            }
            None => w.u8(0),
        }
    }

    fn read_state(r: &mut Reader<'_>, config: ChantConfig, key: HashKey) -> Result<Self, SnapshotError> {
        let mut chant = Chant::with_key(config, key);
        chant.origin = r.u64("the stream's start")?;
        chant.len = r.u64("the stream's end")?;
        if chant.len > MAX_POSITION {
            return Err(invalid(format!("the stream's end {} is beyond any stream", chant.len)));
        }
        let fed = chant
            .len
            .checked_sub(chant.origin)
            .ok_or_else(|| invalid("the stream ends before it starts"))?;
        chant.hash = r.u64("the rolling hash")?;
        chant.blank_run = r.u64("the whitespace run")?;
        if chant.blank_run > fed {
            return Err(invalid("the whitespace run is longer than the stream"));
        }
        for rank in chant.tail.iter_mut() {
            let value = r.u32("the recent ranks")? as i32;
            if value != NO_RANK && !(0..1 << 30).contains(&value) {
                return Err(invalid(format!("a window rank is {value}")));
            }
            *rank = value;
        }
        let start = r.u64("the history")?;
        let wide = r.bool("the history's width")?;
        let full = chant.history.full;
        // The ring's size is not a count of saved items: only bounded by the settings.
        let size = r.u32("the history")? as usize;
        if size > full {
            return Err(invalid(format!(
                "the history ring has {size} slots, more than the {full} allowed"
            )));
        }
        let item = if wide { S::BYTES } else { S::Narrow::BYTES };
        let written = r.len("the history", size)?;
        if written.saturating_mul(item) > r.remaining() {
            return Err(SnapshotError::Truncated { what: "the history" });
        }
        // Where the ring can stand: from the stream's start, whole turns of a full ring on,
        // and no further from the stream's end than one turn (plus the batch being written).
        let turns = start
            .checked_sub(chant.origin)
            .ok_or_else(|| invalid("the history starts before the stream"))?;
        let ahead = chant
            .len
            .checked_sub(start)
            .ok_or_else(|| invalid("the history starts after the stream's end"))?;
        let room = if size == full { size + BATCH } else { size } as u64;
        if (turns > 0 && (size != full || turns % size as u64 != 0)) || ahead > room {
            return Err(invalid("the history ring does not hold the stream"));
        }
        let expected = if turns == 0 { (ahead as usize).min(size) } else { size };
        if written != expected {
            return Err(invalid(format!("{written} history symbols, {expected} expected")));
        }
        chant.history.start = start;
        chant.history.slots = if wide {
            Slots::Wide(read_slots(r, size, written)?)
        } else {
            Slots::Narrow(read_slots(r, size, written)?)
        };
        let table_len = (chant.bucket_mask as usize + 1) * WAYS;
        let live = r.len("the chain table", table_len)?;
        let mut previous = None;
        for _ in 0..live {
            let index = r.u32("a chain")? as usize;
            let entry = Entry {
                tag: r.u32("a chain")?,
                last: r.u32("a chain")?,
                gap: r.u16("a chain")?,
                count: r.u16("a chain")?,
                _pad: 0,
            };
            if index >= table_len || previous.is_some_and(|p| index <= p) {
                return Err(invalid(format!("chain {index} is out of order or beyond the table")));
            }
            previous = Some(index);
            let (gap, count) = (u64::from(entry.gap), u64::from(entry.count));
            let gap_fits = (gap == 0 && count == 1) || (config.window..=config.max_distance()).contains(&gap);
            if !gap_fits || !(1..=config.min_repeats).contains(&count) {
                return Err(invalid(format!("a chain of {count} at gap {gap}")));
            }
            if chant.table.is_empty() {
                chant.allocate();
            }
            if let Some(slot) = chant.table.get_mut(index) {
                *slot = entry;
            }
        }
        chant.event = match r.u8("the verdict")? {
            0 => None,
            1 => {
                let start = r.u64("the verdict")?;
                let end = r.u64("the verdict")?;
                let period = r.opt_u64("the verdict")?;
                let count = r.u64("the verdict")?;
                let symbols = r.len(
                    "the repeated window",
                    usize::try_from(config.window).unwrap_or(usize::MAX),
                )?;
                if symbols as u64 != config.window || start > end || end > fed {
                    return Err(invalid("the verdict does not fit the stream"));
                }
                let mut window = Vec::with_capacity(symbols);
                for _ in 0..symbols {
                    window.push(S::get(r, "the repeated window")?);
                }
                Some(ChantEvent {
                    start,
                    end,
                    period,
                    count,
                    window,
                })
            }
            other => return Err(invalid(format!("the verdict has presence byte {other}"))),
        };
        Ok(chant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Vec<u32> {
        s.chars().map(|c| c as u32).collect()
    }

    fn detect(config: ChantConfig, s: &str) -> Option<ChantEvent<u32>> {
        Chant::new(config).feed(text(s))
    }

    fn small(window: u64, min_repeats: u64) -> ChantConfig {
        ChantConfig {
            window,
            min_repeats,
            ..ChantConfig::default()
        }
    }

    #[test]
    fn catches_a_short_period_chant_within_the_bound() {
        let prefix = "Here is the answer you asked for. ";
        let s = format!("{prefix}{}", "ha".repeat(400));
        let event = detect(ChantConfig::default(), &s).expect("chant");
        assert_eq!(event.period, Some(2));
        assert_eq!(event.count, 8);
        // An anchor window chains every 50 symbols: its 8th occurrence ends 7 * 50 + 50 after
        // its first occurrence, at most 32 + 1 windows into the chant (the windows
        // before it that overlap the prefix may hold smaller ranks).
        let start = prefix.len() as u64;
        let latest = start + 400 + 33;
        assert!((start + 400..=latest).contains(&event.end), "{}", event.end);
        assert_eq!(event.start, start);
        let window: Vec<u32> = text(&s)[(event.end - 50) as usize..event.end as usize].to_vec();
        assert_eq!(event.window, window);
    }

    #[test]
    fn verdict_is_independent_of_chunking() {
        let unit = "The same sentence again, and again, and again!! ";
        let s = format!("Intro text that is unique. {}", unit.repeat(20));
        let mut chant = Chant::new(ChantConfig::default());
        let whole = chant.feed(text(&s));
        chant.reset();
        let mut one_by_one = chant;
        let mut found = None;
        for c in s.chars() {
            if let Some(e) = one_by_one.feed([c as u32]) {
                found = Some(e);
            }
        }
        assert!(whole.is_some());
        assert_eq!(whole, found);
        assert_eq!(whole.and_then(|e| e.period), Some(unit.len() as u64));
    }

    #[test]
    fn whitespace_runs_are_ignored_unless_asked() {
        let s = " ".repeat(2000);
        assert_eq!(detect(ChantConfig::default(), &s), None);
        let strict = ChantConfig {
            ignore_whitespace: false,
            ..ChantConfig::default()
        };
        assert!(detect(strict, &s).is_some());
    }

    #[test]
    fn a_divider_line_does_not_fire_but_a_long_run_does() {
        assert_eq!(detect(ChantConfig::default(), &"-".repeat(399)), None);
        assert_eq!(
            detect(ChantConfig::default(), &"-".repeat(400)).map(|e| e.end),
            Some(400)
        );
        assert_eq!(
            detect(ChantConfig::default(), &"-".repeat(400)).map(|e| e.start),
            Some(0)
        );
    }

    #[test]
    fn different_gaps_do_not_chain() {
        // The same 10-symbol window followed by gaps of distinct text.
        let mut s = String::new();
        for i in 0..40 {
            s.push_str("0123456789");
            s.push_str(&format!("<{i:03}>"));
        }
        assert_eq!(detect(small(10, 4), &s), None);
        let same: String = (0..40).map(|_| "0123456789<007>").collect();
        assert!(detect(small(10, 4), &same).is_some());
    }

    #[test]
    fn proximity_bound_limits_the_period() {
        let unit: String = (0..300u32)
            .map(|i| char::from_u32(0x4e00 + (i * 7919) % 2000).unwrap_or('x'))
            .collect();
        let s = unit.repeat(10);
        let near = ChantConfig {
            max_period: 200,
            ..ChantConfig::default()
        };
        assert_eq!(detect(near, &s), None);
        let event = detect(ChantConfig::default(), &s).expect("period 300 is within 1000");
        assert_eq!(event.period, Some(300));
        assert_eq!(event.start, 0);
    }

    #[test]
    fn tokens_work_like_characters() {
        let mut chant = Chant::<Token>::new(small(4, 3));
        let tokens: Vec<Token> = (0..100u64).map(|i| Token(1_000_000_000_000 + i % 5)).collect();
        let event = chant.feed(tokens).expect("chant");
        assert_eq!(event.period, Some(5));
        assert!(chant.feed([Token(1)]).is_none(), "latched");
        assert!(chant.event().is_some());
        chant.reset();
        assert!(chant.event().is_none());
        assert_eq!(chant.position(), 0);
    }

    #[test]
    fn token_ids_that_differ_in_their_top_bits_still_chant() {
        // [0, 0, 2^63] has three distinct windows of 4, but unfolded ids gave two of them one
        // hash for every key: about half of all keys then missed this chant entirely.
        let config = ChantConfig {
            window: 4,
            min_repeats: 3,
            max_period: 46,
            ignore_whitespace: false,
        };
        let bound = 4 + 3 * (3 + 4);
        for top in [1u64 << 63, 1 << 62, (1 << 63) | (1 << 62)] {
            let tokens: Vec<Token> = [0, 0, top].iter().cycle().take(600).map(|&t| Token(t)).collect();
            for seed in 0..32u64 {
                let key = HashKey {
                    base: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03,
                    salt: seed.wrapping_mul(0xBF58_476D_1CE4_E5B9),
                };
                let event = Chant::<Token>::with_key(config, key).feed(tokens.iter().copied());
                assert!(event.is_some_and(|e| e.end <= bound), "{top:#x} key {seed}");
            }
        }
    }

    #[test]
    fn reset_starts_a_new_stream_without_clearing_the_table() {
        let unit = text("one two three four five six seven. ");
        let half: Vec<u32> = unit.iter().copied().cycle().take(unit.len() * 8).collect();
        let mut chant = Chant::<u32>::new(ChantConfig::default());
        for _ in 0..50 {
            // Each stream alone is too short to chant; together they would be.
            assert_eq!(chant.feed(half.iter().copied()), None);
            chant.reset();
            assert_eq!(chant.position(), 0);
        }
        let whole: Vec<u32> = unit.iter().copied().cycle().take(unit.len() * 30).collect();
        let first = chant.feed(whole.iter().copied()).expect("chant");
        chant.reset();
        assert_eq!(chant.feed(whole.iter().copied()), Some(first.clone()));
        assert_eq!((first.start, first.period), (0, Some(unit.len() as u64)));
    }

    #[test]
    fn single_repeat_fires_on_the_first_window() {
        let event = detect(small(5, 1), "abcdefgh").expect("any window");
        assert_eq!((event.start, event.end, event.period), (0, 5, None));
        assert_eq!(event.window, text("abcde"));
        // A history smaller than a scan batch keeps the window it reports.
        let tiny = ChantConfig {
            window: 1,
            min_repeats: 1,
            max_period: 1,
            ignore_whitespace: false,
        };
        let event = detect(tiny, "aaaa ").expect("any window");
        assert_eq!((event.end, event.window), (1, text("a")));
    }

    /// A symbol whose hash key is constant: every window collides with every other.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    struct Colliding(u32);

    impl Symbol for Colliding {
        type Narrow = Colliding;

        fn key(self) -> u64 {
            7
        }
        fn wide_bits(self) -> u64 {
            0
        }
        fn blank_bit(self) -> u64 {
            0
        }
    }

    #[test]
    fn hash_collisions_cannot_raise_an_alarm() {
        // Only the confirmation against the real symbols stands between this and an alarm.
        let mut chant = Chant::<Colliding>::new(small(3, 3));
        assert_eq!(chant.feed((0..20_000).map(Colliding)), None);
        // ...while real chanting (here with a period the collided chain can follow) is confirmed.
        assert!(chant.feed((0..100).map(|i| Colliding(i % 3))).is_some());
    }

    #[test]
    // 700,000 symbols: hours under Miri (the smaller tests run the same ring growth and
    // table code on short streams).
    #[cfg_attr(miri, ignore)]
    fn memory_is_fixed_by_the_configuration() {
        let config = ChantConfig::default();
        // 9,491 symbols of history and a 256-symbol batch; 64 buckets of 4 16-byte entries.
        let (ring, table) = (9_491 + 256, 64 * 4 * 16);
        let noise =
            |from: u32, modulus: u32| (from..from + 100_000).map(move |i| 32 + i.wrapping_mul(2_654_435_761) % modulus);
        // ASCII text: a byte a symbol. A short response takes a small ring...
        let mut chant = Chant::<u32>::new(config);
        chant.feed(noise(0, 95).take(10));
        assert_eq!(chant.heap_bytes(), 1024 + table);
        // ...a long stream grows it to the history and a batch, and no further.
        assert_eq!(chant.feed(noise(0, 95)), None);
        assert_eq!(chant.heap_bytes(), ring + table);
        assert_eq!(chant.feed(noise(7, 95)), None);
        assert_eq!(chant.position(), 200_010);
        assert_eq!(chant.heap_bytes(), ring + table);
        // Latin-1 is a byte a symbol too; the first wider one widens the ring to 4 bytes.
        assert_eq!(chant.feed(noise(3, 224)), None);
        assert_eq!(chant.heap_bytes(), ring + table);
        assert_eq!(chant.feed(noise(5, 50_000)), None);
        assert_eq!(chant.heap_bytes(), 4 * ring + table);
        // A reset narrows it again (with room for the whole history).
        chant.reset();
        assert_eq!(chant.heap_bytes(), ring + table);
        assert_eq!(chant.feed(noise(11, 95)), None);
        assert_eq!(chant.heap_bytes(), ring + table);
        assert_eq!(chant.feed(noise(13, 50_000)), None);
        assert_eq!(chant.heap_bytes(), 4 * ring + table);
        // Token ids below 2^32 take 4 bytes, others 8.
        let mut tokens = Chant::<Token>::new(config);
        assert_eq!(tokens.feed(noise(0, 1 << 31).map(|t| Token(u64::from(t)))), None);
        assert_eq!(tokens.heap_bytes(), 4 * ring + table);
        assert_eq!(tokens.feed([Token(u64::MAX)]), None);
        assert_eq!(tokens.heap_bytes(), 8 * ring + table);
    }

    #[test]
    // 50,000 symbols through a small ring: minutes under Miri.
    #[cfg_attr(miri, ignore)]
    fn a_ring_that_wraps_and_widens_keeps_the_verdict() {
        // A history of 101 symbols in a ring of 357: the ring wraps every 357 symbols (140
        // times here), so windows, gaps and chains straddle its end in every phase; the
        // chant starts in ASCII and widens the ring halfway.
        let config = ChantConfig {
            window: 5,
            min_repeats: 3,
            max_period: 20,
            ignore_whitespace: false,
        };
        assert_eq!(config.history(), 101);
        let key = HashKey {
            base: 0x9E37_79B9_7F4A_7C15,
            salt: 11,
        };
        let mut state = 7u64;
        let mut noise = Vec::new();
        while noise.len() < 50_000 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            // Random letters, with no window of 5 repeating with three equal gaps.
            noise.push(u32::from(b'a') + (state >> 33) as u32 % 26);
        }
        let mut clean = Chant::<u32>::with_key(config, key);
        let cut = clean
            .feed(noise.iter().copied())
            .map_or(noise.len(), |e| e.end as usize);
        noise.truncate(cut.saturating_sub(1));
        let unit = text("ab\u{1F600}cdefgh");
        let s: Vec<u32> = noise
            .iter()
            .chain(unit.iter().cycle().take(unit.len() * 6))
            .copied()
            .collect();
        let whole = Chant::<u32>::with_key(config, key)
            .feed(s.iter().copied())
            .expect("chant");
        assert_eq!(whole.period, Some(unit.len() as u64));
        assert!(whole.start <= noise.len() as u64 && whole.end > noise.len() as u64 + 20);
        for piece in [1, 2, 7, 255, 256, 257, 1000] {
            let mut chant = Chant::<u32>::with_key(config, key);
            let mut found = None;
            for chunk in s.chunks(piece) {
                found = found.or(chant.feed_text(TextInput::CodePoints(chunk)));
            }
            assert_eq!(found.as_ref(), Some(&whole), "pieces of {piece}");
        }
    }

    #[test]
    // A 100,000-symbol stream to fill the ring before the reset: minutes under Miri.
    #[cfg_attr(miri, ignore)]
    fn a_growing_ring_keeps_the_verdict() {
        // The same chant found with a ring that grows during the stream (fed in small pieces)
        // and with one already at full size (after a long stream and a reset).
        let unit = text("a line that repeats, with a period well over a hundred symbols long, see? ");
        let prose: Vec<u32> = (0..3000u32)
            .map(|i| 0x4e00 + i.wrapping_mul(2_654_435_761) % 3000)
            .collect();
        let s: Vec<u32> = prose
            .iter()
            .chain(unit.iter().cycle().take(unit.len() * 12))
            .copied()
            .collect();
        let key = HashKey { base: 7, salt: 11 };
        let mut growing = Chant::<u32>::with_key(ChantConfig::default(), key);
        let mut found = None;
        for piece in s.chunks(37) {
            found = found.or(growing.feed(piece.iter().copied()));
        }
        let mut full = Chant::<u32>::with_key(ChantConfig::default(), key);
        full.feed((0..100_000u32).map(|i| i.wrapping_mul(2_654_435_761) % 50_000));
        full.reset();
        let event = full.feed(s.iter().copied()).expect("chant");
        assert_eq!(found, Some(event.clone()));
        assert_eq!((event.start, event.period), (3000, Some(unit.len() as u64)));
    }

    #[test]
    fn bad_configurations_are_reported_and_clamped() {
        let huge = ChantConfig {
            min_repeats: 1 << 40,
            ..ChantConfig::default()
        };
        assert!(huge.problem().is_some());
        assert!(huge.clamped().problem().is_none());
        assert!(small(0, 3).problem().is_some());
        assert!(ChantConfig::default().problem().is_none());
        let mut chant = Chant::<u32>::new(huge);
        assert!(chant.config().problem().is_none());
        assert!(chant.feed(text(&"ab".repeat(10_000))).is_some());
    }

    #[test]
    fn short_batches_pick_the_anchors_the_doubling_passes_pick() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            state
        };
        let mut minima = [[NO_RANK; SPAN + BATCH]; 2];
        for span in [1, 2, 4, 8, 16, 32] {
            for n in 0..=span {
                for _ in 0..50 {
                    // Few distinct ranks, so ties are common; some positions have no window.
                    let ranks: Vec<i32> = (0..SPAN + n)
                        .map(|_| match next() % 9 {
                            0 => NO_RANK,
                            r => (r % 5) as i32,
                        })
                        .collect();
                    assert_eq!(
                        anchors_short(&ranks, span),
                        anchors_portable(&ranks, span, &mut minima),
                        "{span} {n} {ranks:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn byte_matches_are_found_eight_at_a_time() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 65) as usize;
            // Few distinct bytes (so matches are common), high bit set in some.
            let bytes: Vec<u8> = (0..len)
                .map(|k| [0, 1, 0x7F, 0x80, 0xFF, b'e'][(state >> (k % 60)) as usize % 6])
                .collect();
            for slot in [0u8, 1, 0x7F, 0x80, 0xFF, b'e', b'x'] {
                let expected = bytes
                    .iter()
                    .rev()
                    .enumerate()
                    .fold(0u64, |bits, (k, &b)| bits | (u64::from(b == slot) << k));
                assert_eq!(
                    <u8 as Slot<u32>>::matches_back(&bytes, slot, None),
                    expected,
                    "{bytes:?} {slot}"
                );
                // With the slot before each: bytes[1..] matched, bytes[..n-1] the ones before.
                if let (Some(later), Some(earlier)) = (bytes.get(1..), bytes.get(..len.saturating_sub(1))) {
                    for previous in [0u8, 0x80, b'e'] {
                        let both = later
                            .iter()
                            .rev()
                            .zip(earlier.iter().rev())
                            .enumerate()
                            .fold(0u64, |bits, (k, (&b, &p))| {
                                bits | (u64::from(b == slot && p == previous) << k)
                            });
                        let got = <u8 as Slot<u32>>::matches_back(later, slot, Some((earlier, previous)));
                        assert_eq!(got, both, "{bytes:?} {slot} {previous}");
                    }
                }
            }
        }
    }

    #[test]
    fn byte_matches_in_words_are_byte_matches() {
        let mut state = 0x1234_5678_9ABC_DEF1u64;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bytes: Vec<u8> = (0..20)
                .map(|k| [0u8, 1, 0x7F, 0x80, 0xFF, b' '][(state >> (2 * k)) as usize % 6])
                .collect();
            for byte in [0u8, 1, 0x7F, 0x80, 0xFF, b' ', b'x'] {
                for at in 0..6 {
                    let expected = (0..16)
                        .filter(|&j| bytes.get(at + j) == Some(&byte))
                        .fold(0u32, |bits, j| bits | 1 << j);
                    let expected = if at + 16 <= bytes.len() { expected } else { 0 };
                    assert_eq!(
                        byte_matches_in_words(&bytes, at, byte),
                        expected,
                        "{bytes:?} {at} {byte}"
                    );
                    assert_eq!(byte_matches(&bytes, at, byte), expected, "{bytes:?} {at} {byte}");
                }
            }
        }
    }

    #[test]
    fn byte_runs_are_compared_eight_at_a_time() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 40) as usize;
            let x: Vec<u8> = (0..len).map(|k| (k as u8).wrapping_mul(31)).collect();
            let mut y = x.clone();
            // Change one byte (or none) somewhere.
            let at = (state >> 8) as usize % (len + 1);
            if let Some(b) = y.get_mut(at) {
                *b ^= 1 << ((state >> 20) % 8);
            }
            let expected = x.iter().rev().zip(y.iter().rev()).take_while(|(a, b)| a == b).count();
            assert_eq!(<u8 as Slot<u32>>::same_ends(&x, &y), expected, "{x:?} {y:?}");
        }
    }

    fn settings_of(config: &ChantConfig) -> Vec<Value> {
        vec![
            Value::Count(config.window),
            Value::Count(config.min_repeats),
            Value::Switch(config.ignore_whitespace),
            Value::Count(config.max_period),
            Value::Unset,
        ]
    }

    #[test]
    fn a_restored_stream_answers_as_the_original() {
        let config = ChantConfig {
            window: 4,
            min_repeats: 3,
            max_period: 16,
            ignore_whitespace: true,
        };
        let key = HashKey::from_seed(11);
        // Long enough to turn the ring many times, widened halfway, with a chant at the end.
        let numbers: String = (0..300).map(|i| format!("{} ", i * 7919 % 1013)).collect();
        let symbols = text(&format!("{numbers}Ω{numbers}{}", "say it! ".repeat(8)));
        let tokens: Vec<Token> = symbols.iter().map(|&c| Token(u64::from(c) << 33)).collect();
        for cut in (0..symbols.len()).step_by(97) {
            let mut original = Chant::with_key(config, key);
            original.feed(symbols[..cut].iter().copied());
            let data = chant_snapshot(&settings_of(&config), key, ChantStream::Text(&original), false);
            let ChantStream::Text(mut twin) = restore_chant(&data).unwrap().stream else {
                panic!("a text stream");
            };
            assert_eq!(
                chant_snapshot(&settings_of(&config), key, ChantStream::Text(&twin), false),
                data
            );
            let rest = symbols[cut..].iter().copied();
            assert_eq!(twin.feed(rest.clone()), original.feed(rest));
            assert_eq!(twin.position(), original.position());

            let mut original = Chant::with_key(config, key);
            original.feed(tokens[..cut].iter().copied());
            let data = chant_snapshot(&settings_of(&config), key, ChantStream::Tokens(&original), false);
            let ChantStream::Tokens(mut twin) = restore_chant(&data).unwrap().stream else {
                panic!("a token stream");
            };
            let rest = tokens[cut..].iter().copied();
            assert_eq!(twin.feed(rest.clone()), original.feed(rest));
        }
    }

    #[test]
    fn every_truncation_and_flipped_bit_of_a_chant_snapshot_is_an_error() {
        let config = ChantConfig {
            window: 3,
            min_repeats: 2,
            max_period: 8,
            ignore_whitespace: true,
        };
        let key = HashKey::from_seed(3);
        let mut chant = Chant::with_key(config, key);
        chant.feed(text("one two three four five six é"));
        let data = chant_snapshot(&settings_of(&config), key, ChantStream::Text(&chant), false);
        for n in 0..data.len() {
            assert!(restore_chant(&data[..n]).is_err(), "truncated at {n}");
        }
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[i] ^= 1 << bit;
                assert!(restore_chant(&bad).is_err(), "bit {bit} of byte {i}");
            }
        }
    }

    #[test]
    fn anchor_span_fits_the_latency_bound() {
        let span = |window, min_repeats| small(window, min_repeats).anchor_span();
        assert_eq!(span(50, 8), 32);
        assert_eq!(span(10, 3), 8);
        assert_eq!(span(2, 2), 4);
        assert_eq!(span(1, 1), 2);
        assert_eq!(span(1 << 40, 1 << 40), 32);
    }

    #[test]
    fn white_space_matches_unicode() {
        for c in 0..0x3100u32 {
            let expected = char::from_u32(c).is_some_and(char::is_whitespace);
            assert_eq!(is_white_space(c), expected, "{c:#x}");
        }
        assert!(!is_white_space(0xD800));
    }
}
