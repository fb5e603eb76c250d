//! The canonical value fingerprint: a typed, Merkle-style xxh3 hash.
//!
//! Every value hashes to a `u64` digest `H(v) = xxh3_64_with_seed(payload(v), seed(tag(v)))`
//! where `seed(tag) = SEED + tag` and `tag` is one ASCII letter per kind of value. Containers
//! hash the little-endian bytes of their children's digests, so no serialized copy of a value
//! is ever built: the only buffer is one digest (8 bytes) per child. Mappings and sets sort
//! their entry digests, which makes them order-free at every depth without comparing keys of
//! mixed types. The full encoding is published in docs/fingerprint.md and a
//! pure-Python model of it lives in the test suite.
//!
//! This module knows nothing of Python: the binding layer walks Python objects (iteratively,
//! never recursing on user data) and drives [`Canon`] and the scalar functions here.

use xxhash_rust::const_xxh3;
use xxhash_rust::xxh3::{xxh3_64_with_seed, Xxh3};

/// Base seed ("doomloop" in ASCII). Fixed forever: gateway replicas and stored digests must
/// agree across processes and releases.
pub const SEED: u64 = 0x646f_6f6d_6c6f_6f70;

/// One-letter tags of the canonical encoding.
pub mod tag {
    pub const NONE: u8 = b'N';
    pub const BOOL: u8 = b'B';
    pub const INT: u8 = b'I';
    pub const FLOAT: u8 = b'F';
    pub const STR: u8 = b'S';
    pub const BYTES: u8 = b'Y';
    pub const SEQ: u8 = b'L';
    pub const PAIR: u8 = b'P';
    pub const MAP: u8 = b'D';
    pub const SET: u8 = b'T';
    pub const OBJECT: u8 = b'O';
    pub const CYCLE: u8 = b'C';
    pub const TOO_DEEP: u8 = b'X';
    pub const OPAQUE: u8 = b'U';
    pub const ACTION: u8 = b'A';
    pub const ERROR: u8 = b'E';
}

#[inline]
pub const fn seed(tag: u8) -> u64 {
    SEED.wrapping_add(tag as u64)
}

#[inline]
pub fn hash_tagged(tag: u8, payload: &[u8]) -> u64 {
    xxh3_64_with_seed(payload, seed(tag))
}

#[inline]
pub fn hash_none() -> u64 {
    hash_tagged(tag::NONE, b"")
}

#[inline]
pub fn hash_bool(value: bool) -> u64 {
    hash_tagged(tag::BOOL, &[value as u8])
}

#[inline]
pub fn hash_str(utf8: &[u8]) -> u64 {
    hash_tagged(tag::STR, utf8)
}

/// [`hash_tagged`] over a payload given in pieces (a long text encoded piece by piece): the
/// same digest as one call over the pieces joined.
pub struct TaggedHasher(Xxh3);

impl TaggedHasher {
    pub fn new(tag: u8) -> Self {
        TaggedHasher(Xxh3::with_seed(seed(tag)))
    }

    pub fn update(&mut self, piece: &[u8]) {
        self.0.update(piece);
    }

    pub fn digest(&self) -> u64 {
        self.0.digest()
    }
}

/// [`hash_str`] evaluated at compile time, for names the binding layer hashes on every call
/// (result field names): the same digest, computed once.
pub const fn hash_str_const(utf8: &[u8]) -> u64 {
    const_xxh3::xxh3_64_with_seed(utf8, seed(tag::STR))
}

#[inline]
pub fn hash_bytes(data: &[u8]) -> u64 {
    hash_tagged(tag::BYTES, data)
}

/// Hash of an error message, kept apart from any result (an error "boom" is not a result "boom").
#[inline]
pub fn hash_error(utf8: &[u8]) -> u64 {
    hash_tagged(tag::ERROR, utf8)
}

/// An opaque object, known only by its type's qualified name.
#[inline]
pub fn hash_opaque(type_name: &[u8]) -> u64 {
    hash_tagged(tag::OPAQUE, type_name)
}

/// A reference back to a container `distance` levels up the current path.
#[inline]
pub fn hash_cycle(distance: u64) -> u64 {
    hash_tagged(tag::CYCLE, &distance.to_le_bytes())
}

/// A container nested deeper than the walker's depth limit.
#[inline]
pub fn hash_too_deep() -> u64 {
    hash_tagged(tag::TOO_DEEP, b"")
}

/// Hash of two digests under one tag (pairs, actions, objects).
#[inline]
pub fn hash_two(tag: u8, a: u64, b: u64) -> u64 {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&a.to_le_bytes());
    buf[8..].copy_from_slice(&b.to_le_bytes());
    hash_tagged(tag, &buf)
}

/// Identity of an action: its type's digest combined with its arguments' digest.
#[inline]
pub fn hash_action(type_digest: u64, args_digest: u64) -> u64 {
    hash_two(tag::ACTION, type_digest, args_digest)
}

/// An integer given as sign and little-endian magnitude bytes (any length, any trailing zeros).
pub fn hash_int_magnitude(negative: bool, magnitude_le: &[u8]) -> u64 {
    let used = magnitude_le.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    let magnitude = &magnitude_le[..used];
    // Zero has one encoding: no sign.
    let sign = (negative && used > 0) as u8;
    let mut small = [0u8; 17];
    if used <= 16 {
        small[0] = sign;
        small[1..=used].copy_from_slice(magnitude);
        hash_tagged(tag::INT, &small[..=used])
    } else {
        let mut buf = Vec::with_capacity(used + 1);
        buf.push(sign);
        buf.extend_from_slice(magnitude);
        hash_tagged(tag::INT, &buf)
    }
}

/// The same digest as `hash_int_magnitude` of the value's sign and magnitude, computed
/// without scanning for the minimal length (the common case: every JSON-sized integer).
#[inline]
pub fn hash_i64(value: i64) -> u64 {
    let magnitude = value.unsigned_abs();
    let used = 8 - (magnitude.leading_zeros() / 8) as usize;
    let mut buf = [0u8; 9];
    buf[0] = (value < 0) as u8;
    buf[1..].copy_from_slice(&magnitude.to_le_bytes());
    hash_tagged(tag::INT, &buf[..=used])
}

/// Floats hash by numeric value: an integral finite float hashes as the equal integer
/// (`1.0` as `1`, `-0.0` as `0`, `1e300` as its exact integer); NaNs share one encoding.
pub fn hash_f64(value: f64) -> u64 {
    if value.is_finite() && value.fract() == 0.0 {
        let negative = value < 0.0;
        let magnitude = value.abs();
        if magnitude < 18_446_744_073_709_551_616.0 {
            // Below 2^64 the conversion is exact.
            return hash_int_magnitude(negative, &(magnitude as u64).to_le_bytes());
        }
        return hash_int_magnitude(negative, &large_integral_magnitude(magnitude));
    }
    let bits = if value.is_nan() {
        0x7ff8_0000_0000_0000u64
    } else {
        value.to_bits()
    };
    hash_tagged(tag::FLOAT, &bits.to_le_bytes())
}

/// Exact little-endian magnitude bytes of an integral float >= 2^64.
fn large_integral_magnitude(magnitude: f64) -> Vec<u8> {
    let bits = magnitude.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1075;
    let mantissa = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    // magnitude = mantissa * 2^exponent, with exponent > 0 here.
    let shift = exponent.max(0) as usize;
    let mut out = vec![0u8; (53 + shift).div_ceil(8) + 1];
    let byte_shift = shift / 8;
    let bit_shift = shift % 8;
    let wide = (mantissa as u128) << bit_shift;
    for (i, byte) in wide.to_le_bytes().iter().enumerate() {
        if let Some(slot) = out.get_mut(byte_shift + i) {
            *slot |= *byte;
        }
    }
    out
}

/// Entries a small-map call ([`hash_map_entries`], [`hash_map_pairs`]) takes at most.
pub const SMALL_MAP_ENTRIES: usize = 8;

/// Digest of one mapping entry from its key's and value's digests.
#[inline]
pub fn hash_pair(key: u64, value: u64) -> u64 {
    hash_two(tag::PAIR, key, value)
}

/// Digest of a small mapping given as (key digest, value digest) entries: exactly what
/// [`Canon::finish_map`] gives for the same entries, without a heap allocation. `None` when
/// there are more than [`SMALL_MAP_ENTRIES`] entries.
pub fn hash_map_entries(entries: &[(u64, u64)]) -> Option<u64> {
    let mut pairs = [0u64; SMALL_MAP_ENTRIES];
    let used = pairs.get_mut(..entries.len())?;
    for (slot, &(key, value)) in used.iter_mut().zip(entries) {
        *slot = hash_pair(key, value);
    }
    hash_map_pairs(used)
}

/// The digest of the empty mapping (what [`hash_map_pairs`] and [`Canon::finish_map`] give for
/// no entries), computed once at compile time: `{}` and `None` arguments are common.
pub const EMPTY_MAP: u64 = const_xxh3::xxh3_64_with_seed(b"", seed(tag::MAP));

/// Digest of a small mapping given as its entries' [`hash_pair`] digests, in any order (sorted
/// in place): what [`hash_map_entries`] gives for the same entries. `None` when there are more
/// than [`SMALL_MAP_ENTRIES`].
pub fn hash_map_pairs(pairs: &mut [u64]) -> Option<u64> {
    let mut bytes = [0u8; SMALL_MAP_ENTRIES * 8];
    let used = bytes.get_mut(..pairs.len() * 8)?;
    pairs.sort_unstable();
    for (chunk, digest) in used.chunks_exact_mut(8).zip(pairs.iter()) {
        chunk.copy_from_slice(&digest.to_le_bytes());
    }
    Some(hash_tagged(tag::MAP, used))
}

/// The digest stack a container walk writes into. A container remembers `mark()` when it
/// opens, its children push their digests, and `finish_*` pops them and returns the
/// container's digest. One `Canon` can be reused across calls to avoid allocation.
#[derive(Default)]
pub struct Canon {
    stack: Vec<u64>,
    scratch: Vec<u8>,
}

impl Canon {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn mark(&self) -> usize {
        self.stack.len()
    }

    #[inline]
    pub fn push(&mut self, digest: u64) {
        self.stack.push(digest);
    }

    /// The single digest left when a walk is complete (the root's); empties the stack.
    pub fn pop_root(&mut self) -> u64 {
        let root = self.stack.pop().unwrap_or_else(hash_none);
        self.stack.clear();
        root
    }

    /// Drop everything (after an aborted walk).
    pub fn clear(&mut self) {
        self.stack.clear();
    }

    /// A sequence (list or tuple): children in order.
    pub fn finish_seq(&mut self, start: usize) -> u64 {
        self.finish(tag::SEQ, start)
    }

    /// A set: children in any order.
    pub fn finish_set(&mut self, start: usize) -> u64 {
        self.sort_from(start);
        self.finish(tag::SET, start)
    }

    /// A mapping: children are key, value, key, value, ...; entries in any order.
    pub fn finish_map(&mut self, start: usize) -> u64 {
        if (self.stack.len() - start) % 2 == 1 {
            // A walk always pushes whole entries; keep the encoding total regardless.
            self.stack.push(hash_none());
        }
        let entries = (self.stack.len() - start) / 2;
        for i in 0..entries {
            let key = self.stack[start + 2 * i];
            let value = self.stack[start + 2 * i + 1];
            self.stack[start + i] = hash_pair(key, value);
        }
        self.stack.truncate(start + entries);
        self.sort_from(start);
        self.finish(tag::MAP, start)
    }

    /// A typed object: exactly two children, its type name's digest then its state's digest.
    pub fn finish_object(&mut self, start: usize) -> u64 {
        let type_name = self.stack.get(start).copied().unwrap_or_else(hash_none);
        let state = self.stack.get(start + 1).copied().unwrap_or_else(hash_none);
        self.stack.truncate(start);
        hash_two(tag::OBJECT, type_name, state)
    }

    fn sort_from(&mut self, start: usize) {
        self.stack[start..].sort_unstable();
    }

    fn finish(&mut self, tag: u8, start: usize) -> u64 {
        self.scratch.clear();
        for digest in &self.stack[start..] {
            self.scratch.extend_from_slice(&digest.to_le_bytes());
        }
        self.stack.truncate(start);
        hash_tagged(tag, &self.scratch)
    }
}

// --- Similarity sketches ----------------------------------------------------------------------
//
// "Alike" compares two values by the features they share, not by digest: a [`Sketch`] keeps the
// smallest [`SKETCH_SIZE`] feature hashes of a value (a bottom-k sketch), so its size is fixed
// whatever the value's, and two sketches give the Jaccard similarity of the feature sets (exact
// while both sets fit, estimated beyond). The features are published in docs/session.md and
// modelled in the test suite.

/// How many feature hashes a [`Sketch`] keeps (the smallest ones).
pub const SKETCH_SIZE: usize = 32;

/// The context of features under no mapping key.
pub const SKETCH_ROOT: u64 = SEED;

/// The feature value of a number: numbers are masked, so `{"line": 3}` and `{"line": 40}` are
/// alike, as the digits of a string are.
pub const NUMBER_FEATURE: u64 = 0x4e55_4d42_4552; // "NUMBER"

/// murmur3's 64-bit finalizer: a bijection that spreads every input bit over the output.
#[inline]
pub const fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The hash of one feature: its value under its context (the digest of the mapping key it
/// sits under, or [`SKETCH_ROOT`]).
#[inline]
pub const fn feature_hash(context: u64, value: u64) -> u64 {
    fmix64(context ^ value)
}

/// The smallest [`SKETCH_SIZE`] distinct feature hashes of a value, sorted, and whether they
/// are all of them.
#[derive(Clone, Copy, Debug)]
pub struct Sketch {
    hashes: [u64; SKETCH_SIZE],
    /// The largest kept hash once `SKETCH_SIZE` are kept (`u64::MAX` before): anything above
    /// it is left out with one comparison.
    ceiling: u64,
    len: u8,
    /// No distinct feature was left out (at most `SKETCH_SIZE` were fed).
    complete: bool,
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch::EMPTY
    }
}

impl PartialEq for Sketch {
    fn eq(&self, other: &Sketch) -> bool {
        self.hashes() == other.hashes() && self.complete == other.complete
    }
}

impl Eq for Sketch {}

impl Sketch {
    /// The sketch of no features.
    pub const EMPTY: Sketch = Sketch {
        hashes: [0; SKETCH_SIZE],
        ceiling: u64::MAX,
        len: 0,
        complete: true,
    };

    /// The kept feature hashes, ascending.
    pub fn hashes(&self) -> &[u64] {
        &self.hashes[..usize::from(self.len).min(SKETCH_SIZE)]
    }

    /// Become a copy of `other` (copying only the hashes it keeps).
    #[inline]
    pub fn assign(&mut self, other: &Sketch) {
        let len = usize::from(other.len).min(SKETCH_SIZE);
        // A loop, not `copy_from_slice`: sketches are mostly short, a `memcpy` call costs more.
        for (to, &from) in self.hashes[..len].iter_mut().zip(&other.hashes[..len]) {
            *to = from;
        }
        self.ceiling = other.ceiling;
        self.len = other.len;
        self.complete = other.complete;
    }

    /// A sketch holding `hashes` (strictly ascending, at most `SKETCH_SIZE`), as
    /// [`Sketch::hashes`] and [`Sketch::is_complete`] gave them; `None` for any other list.
    pub fn from_parts(hashes: &[u64], complete: bool) -> Option<Sketch> {
        if hashes.len() > SKETCH_SIZE || hashes.windows(2).any(|pair| pair[0] >= pair[1]) {
            return None;
        }
        let mut sketch = Sketch::EMPTY;
        sketch.hashes[..hashes.len()].copy_from_slice(hashes);
        sketch.len = u8::try_from(hashes.len()).ok()?;
        sketch.complete = complete;
        if hashes.len() == SKETCH_SIZE {
            sketch.ceiling = hashes[SKETCH_SIZE - 1];
        }
        Some(sketch)
    }

    /// Whether every distinct feature fed is kept.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Add one feature hash (a no-op for one already kept).
    #[inline(always)]
    pub fn insert(&mut self, hash: u64) {
        if hash >= self.ceiling && usize::from(self.len) >= SKETCH_SIZE {
            // Not below every kept hash: left out (unless it is the largest itself).
            self.complete &= hash == self.ceiling;
            return;
        }
        self.insert_below(hash);
    }

    /// [`Sketch::insert`] of a hash that may belong among the kept ones.
    #[inline]
    fn insert_below(&mut self, hash: u64) {
        let len = usize::from(self.len).min(SKETCH_SIZE);
        // Where it goes: after the kept hashes below it, found from the top. A sketch of
        // arguments keeps a handful of hashes, and each one passed is one that moves up a slot
        // anyway, so this costs less than a binary search before the move.
        let mut at = len;
        while at > 0 && self.hashes[at - 1] > hash {
            at -= 1;
        }
        if at > 0 && self.hashes[at - 1] == hash {
            return;
        }
        let end = if len == SKETCH_SIZE {
            // The largest kept hash makes room.
            self.complete = false;
            len - 1
        } else {
            self.len += 1;
            len
        };
        let mut i = end;
        while i > at {
            self.hashes[i] = self.hashes[i - 1];
            i -= 1;
        }
        self.hashes[at] = hash;
        if usize::from(self.len) == SKETCH_SIZE {
            self.ceiling = self.hashes[SKETCH_SIZE - 1];
        }
    }

    /// A feature of `value` under `context`.
    #[inline]
    pub fn add(&mut self, context: u64, value: u64) {
        self.insert(feature_hash(context, value));
    }

    /// The Jaccard similarity of the two feature sets, in `0.0..=1.0`: exact when both
    /// sketches are complete; otherwise the share of the `SKETCH_SIZE` smallest hashes of
    /// both sketches together that both hold (the bottom-k estimate). Two empty sets are
    /// alike (1.0).
    pub fn similarity(&self, other: &Sketch) -> f64 {
        let (a, b) = (self.hashes(), other.hashes());
        if a.is_empty() && b.is_empty() {
            return 1.0;
        }
        let limit = if self.complete && other.complete {
            usize::MAX
        } else {
            SKETCH_SIZE
        };
        let (mut i, mut j, mut union, mut both) = (0, 0, 0usize, 0usize);
        while union < limit {
            match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) if x == y => {
                    both += 1;
                    i += 1;
                    j += 1;
                }
                (Some(x), Some(y)) if x < y => i += 1,
                (Some(_), Some(_)) | (None, Some(_)) => j += 1,
                (Some(_), None) => i += 1,
                (None, None) => break,
            }
            union += 1;
        }
        both as f64 / union as f64
    }
}

/// Where [`TextFeatures`] puts the features it reads.
pub trait FeatureSink {
    fn add(&mut self, context: u64, value: u64);
}

impl FeatureSink for Sketch {
    #[inline(always)]
    fn add(&mut self, context: u64, value: u64) {
        Sketch::add(self, context, value);
    }
}

/// Slots of [`SeenValues`].
pub const SEEN_SLOTS: usize = 64;

/// A direct-mapped cache of the feature values already fed under one context: feeding a hash
/// again never changes a sketch, so a value found here is skipped before it is hashed. Prose
/// repeats its words; this keeps its cost per word low.
#[derive(Clone, Copy, Debug)]
pub struct SeenValues {
    values: [u64; SEEN_SLOTS],
    /// Which slots hold a value.
    used: u64,
}

impl SeenValues {
    pub const EMPTY: SeenValues = SeenValues {
        values: [0; SEEN_SLOTS],
        used: 0,
    };

    /// Whether `value` is not in the cache (and put it there).
    #[inline(always)]
    fn first_time(&mut self, value: u64) -> bool {
        let slot = (value.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SEEN_SLOTS;
        let bit = 1u64 << slot;
        if self.used & bit != 0 && self.values[slot] == value {
            false
        } else {
            self.values[slot] = value;
            self.used |= bit;
            true
        }
    }
}

/// A sketch fed through a [`SeenValues`] cache.
pub struct CachedSketch<'a> {
    pub sketch: &'a mut Sketch,
    pub seen: &'a mut SeenValues,
}

impl FeatureSink for CachedSketch<'_> {
    #[inline(always)]
    fn add(&mut self, context: u64, value: u64) {
        if self.seen.first_time(value) {
            self.sketch.add(context, value);
        }
    }
}

/// FNV-1a's 64-bit offset basis and prime: a word's feature value is its folded bytes hashed
/// with them (and mixed again by [`feature_hash`]).
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Feeds the features of a text to a [`Sketch`], piece by piece (a word may span pieces).
///
/// The text is read as UTF-8 bytes. A *word* is a maximal run of ASCII letters, digits, `_`
/// and non-ASCII bytes; ASCII letters are lowercased and every run of digits in a word reads
/// as one `0`, except in a *path component*: a word with a letter in it that follows a `/` or
/// `\`, or is followed by `.`, `/` or `\`, keeps its digits. Everything else (spaces,
/// punctuation, quotes) only separates words. A word of three or more bytes is one feature
/// (the FNV-1a hash of its folded bytes), a shorter one gives each of its bytes: so `grep -rn`
/// and `grep -n -r` have the same features, and `--case 17` and `--case 18` too, while
/// `cat f1.py` and `cat f2.py` (another file) do not.
#[derive(Clone, Copy, Debug)]
pub struct TextFeatures {
    context: u64,
    /// The current word with its digit runs folded to one `0`.
    folded: Word,
    /// The current word with its digits as written (for a path component), once it has a
    /// digit: until then it is `folded`.
    raw: Word,
    has_digit: bool,
    last_was_digit: bool,
    /// Whether the current word has a byte other than a digit.
    has_letter: bool,
    /// Whether the separator just before the current word is `/` or `\`.
    after_slash: bool,
}

/// A word being read: FNV-1a of its bytes so far, its first bytes and its length (to 3).
#[derive(Clone, Copy, Debug)]
struct Word {
    hash: u64,
    /// The first two bytes, the second lowest (for a word of one or two).
    start: u32,
    len: u8,
}

impl Word {
    const EMPTY: Word = Word {
        hash: FNV_OFFSET,
        start: 0,
        len: 0,
    };

    #[inline(always)]
    fn push(&mut self, byte: u8) {
        self.hash = (self.hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        if self.len < 3 {
            self.start = (self.start << 8) | u32::from(byte);
            self.len += 1;
        }
    }

    #[inline]
    fn emit<S: FeatureSink>(&self, context: u64, sketch: &mut S) {
        match self.len {
            0 => {}
            1 => sketch.add(context, u64::from(self.start & 0xff)),
            2 => {
                sketch.add(context, u64::from((self.start >> 8) & 0xff));
                sketch.add(context, u64::from(self.start & 0xff));
            }
            _ => sketch.add(context, self.hash),
        }
    }
}

impl TextFeatures {
    pub fn new(context: u64) -> Self {
        TextFeatures {
            context,
            folded: Word::EMPTY,
            raw: Word::EMPTY,
            has_digit: false,
            last_was_digit: false,
            has_letter: false,
            after_slash: false,
        }
    }

    /// Feed UTF-8 bytes (or any bytes: each is read as above).
    #[inline]
    pub fn feed<S: FeatureSink>(&mut self, bytes: &[u8], sketch: &mut S) {
        // The state in locals for the loop: one short path per byte.
        let mut state = *self;
        for &byte in bytes {
            state.byte(byte, sketch);
        }
        *self = state;
    }

    /// Feed code points, read as their UTF-8 encoding (a lone surrogate encoded as such).
    pub fn feed_code_points<S: FeatureSink>(&mut self, code_points: &[u32], sketch: &mut S) {
        for &cp in code_points {
            if cp < 0x80 {
                self.byte(cp as u8, sketch);
                continue;
            }
            // Every byte of a multi-byte encoding is a word byte, so their values matter only
            // as the features' content: the generalized UTF-8 encoding, surrogates included.
            let (lead, continuation) = match cp {
                0..=0x7ff => (0xc0 | (cp >> 6), 1),
                0x800..=0xffff => (0xe0 | (cp >> 12), 2),
                _ => (0xf0 | ((cp >> 18) & 0x07), 3),
            };
            self.byte(lead as u8, sketch);
            for shift in (0..continuation).rev() {
                self.byte((0x80 | ((cp >> (6 * shift)) & 0x3f)) as u8, sketch);
            }
        }
    }

    /// The text is complete: its last word counts.
    #[inline]
    pub fn finish<S: FeatureSink>(&mut self, sketch: &mut S) {
        self.end_word(None, sketch);
    }

    #[inline(always)]
    fn byte<S: FeatureSink>(&mut self, byte: u8, sketch: &mut S) {
        let folded = FOLD[usize::from(byte)];
        if folded == SEPARATOR {
            if self.folded.len != 0 {
                self.end_word(Some(byte), sketch);
            }
            self.after_slash = byte == b'/' || byte == b'\\';
            return;
        }
        let digit = folded == b'0';
        if digit && !self.has_digit {
            // The word as written so far is the folded one: no digit was folded yet.
            self.raw = self.folded;
            self.has_digit = true;
        }
        if self.has_digit {
            self.raw.push(if digit { byte } else { folded });
        }
        self.has_letter |= !digit;
        if !(digit && self.last_was_digit) {
            self.folded.push(folded);
        }
        self.last_was_digit = digit;
    }

    /// The word ends (before the separator `next`, or with the text): its features.
    #[inline]
    fn end_word<S: FeatureSink>(&mut self, next: Option<u8>, sketch: &mut S) {
        // Digits in a file or path name are another file, not a counter.
        let path = self.has_digit && self.has_letter && (self.after_slash || matches!(next, Some(b'.' | b'/' | b'\\')));
        let word = if path { self.raw } else { self.folded };
        word.emit(self.context, sketch);
        *self = TextFeatures::new(self.context);
    }
}

/// What [`FOLD`] maps a byte that only separates words to.
const SEPARATOR: u8 = 0;

/// Each byte as a word reads it: ASCII letters lowercased, digits as `0`, `_` and non-ASCII
/// bytes as themselves, everything else [`SEPARATOR`].
static FOLD: [u8; 256] = {
    let mut table = [SEPARATOR; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        table[byte] = if b.is_ascii_digit() {
            b'0'
        } else if b.is_ascii_alphabetic() || b == b'_' || b >= 0x80 {
            b.to_ascii_lowercase()
        } else {
            SEPARATOR
        };
        byte += 1;
    }
    table
};

/// A byte as [`TextFeatures`] folds it: ASCII letters lowercased, digits as `0`, `_` and
/// non-ASCII bytes as themselves; 0 for a byte that only separates words.
#[inline]
pub fn word_byte(byte: u8) -> u8 {
    FOLD[usize::from(byte)]
}

/// The sketch of a whole text under `context`.
pub fn sketch_text(context: u64, text: &[u8]) -> Sketch {
    let mut sketch = Sketch::default();
    feed_text(context, text, &mut sketch);
    sketch
}

/// Feed the features of a whole text, as [`TextFeatures`] reads it in one piece and then
/// finishes: a word at a time, the rule's state in locals, rather than a state change a byte
/// (an action's arguments are short texts read whole).
pub fn feed_text<S: FeatureSink>(context: u64, text: &[u8], sketch: &mut S) {
    let mut at = 0;
    let mut after_slash = false;
    loop {
        // The separators before the next word: the last one says whether it follows a slash.
        while let Some(&byte) = text.get(at) {
            if FOLD[usize::from(byte)] != SEPARATOR {
                break;
            }
            after_slash = byte == b'/' || byte == b'\\';
            at += 1;
        }
        if at >= text.len() {
            return;
        }
        let start = at;
        let mut folded = Word::EMPTY;
        let (mut has_digit, mut has_letter, mut last_was_digit) = (false, false, false);
        while let Some(&byte) = text.get(at) {
            let byte = FOLD[usize::from(byte)];
            if byte == SEPARATOR {
                break;
            }
            let digit = byte == b'0';
            has_digit |= digit;
            has_letter |= !digit;
            if !(digit && last_was_digit) {
                folded.push(byte);
            }
            last_was_digit = digit;
            at += 1;
        }
        // Digits in a file or path name are another file, not a counter (see `end_word`).
        let path = has_digit && has_letter && (after_slash || matches!(text.get(at), Some(b'.' | b'/' | b'\\')));
        if path {
            let mut raw = Word::EMPTY;
            for &byte in &text[start..at] {
                let folded = FOLD[usize::from(byte)];
                raw.push(if folded == b'0' { byte } else { folded });
            }
            raw.emit(context, sketch);
        } else {
            folded.emit(context, sketch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_map_constant_is_the_empty_map_digest() {
        assert_eq!(hash_map_pairs(&mut []), Some(EMPTY_MAP));
        let mut canon = Canon::new();
        let start = canon.mark();
        assert_eq!(canon.finish_map(start), EMPTY_MAP);
    }

    fn seq(items: &[u64]) -> u64 {
        let mut canon = Canon::new();
        let start = canon.mark();
        items.iter().for_each(|&d| canon.push(d));
        canon.finish_seq(start)
    }

    fn map(entries: &[(u64, u64)]) -> u64 {
        let mut canon = Canon::new();
        let start = canon.mark();
        for &(k, v) in entries {
            canon.push(k);
            canon.push(v);
        }
        canon.finish_map(start)
    }

    fn features(text: &str) -> Vec<u64> {
        sketch_text(SKETCH_ROOT, text.as_bytes()).hashes().to_vec()
    }

    #[test]
    fn text_features_fold_case_digits_spacing_and_flag_order() {
        let grep = features("grep -rn 'parse_header' src");
        for same in [
            "GREP  -nr \"parse_header\" src/",
            "grep -r -n parse_header src",
            "grep -n -r parse_header 'src'",
        ] {
            assert_eq!(features(same), grep, "{same}");
        }
        assert_eq!(features("--case 17"), features("--case 123456"));
        assert_ne!(features("--case 17"), features("--case a"));
        // Digits in a file or path name are another file: kept; elsewhere a counter: folded.
        assert_ne!(features("cat f1.py"), features("cat f2.py"));
        assert_ne!(features("src/module_3"), features("src/module_4"));
        assert_ne!(features("C:\\logs\\run7"), features("C:\\logs\\run8"));
        assert_eq!(features("pytest -k case_17"), features("pytest -k case_18"));
        assert_eq!(features("sed -n '10,20p' a"), features("sed -n '11,29p' a"));
        assert_eq!(features("logs/2024/x"), features("logs/2025/x"));
        assert_eq!(features("  ... !? "), Vec::<u64>::new());
        // "ab" gives the features of its bytes, "abc" one: the FNV-1a hash of its bytes.
        let ab = [
            feature_hash(SKETCH_ROOT, u64::from(b'a')),
            feature_hash(SKETCH_ROOT, u64::from(b'b')),
        ];
        let mut expected = ab.to_vec();
        expected.sort_unstable();
        assert_eq!(features("ab"), expected);
        let fnv = b"abc"
            .iter()
            .fold(FNV_OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME));
        assert_eq!(features("ABC"), vec![feature_hash(SKETCH_ROOT, fnv)]);
    }

    #[test]
    fn text_features_span_pieces_and_code_points_match_utf8() {
        let text = "Ünïcode wörds and 12 numbers, split anywhere";
        let whole = sketch_text(7, text.as_bytes());
        for split in 0..text.len() {
            let mut sketch = Sketch::default();
            let mut feed = TextFeatures::new(7);
            let (a, b) = text.as_bytes().split_at(split);
            feed.feed(a, &mut sketch);
            feed.feed(b, &mut sketch);
            feed.finish(&mut sketch);
            assert_eq!(sketch, whole, "split at {split}");
        }
        let code_points: Vec<u32> = text.chars().map(u32::from).collect();
        let mut sketch = Sketch::default();
        let mut feed = TextFeatures::new(7);
        feed.feed_code_points(&code_points, &mut sketch);
        feed.finish(&mut sketch);
        assert_eq!(sketch, whole);
        // A lone surrogate reads as its three-byte encoding.
        let mut lone = Sketch::default();
        let mut feed = TextFeatures::new(7);
        feed.feed_code_points(&[0xd800], &mut lone);
        feed.finish(&mut lone);
        assert_eq!(lone, sketch_text(7, &[0xed, 0xa0, 0x80]));
    }

    #[test]
    fn whole_texts_read_as_the_streaming_reader_reads_them_byte_by_byte() {
        // The whole-text reader against the streaming one fed a byte at a time.
        let alphabet = b"abcXYZ_09/\\.- \xc3\xa9\t";
        let mut next = crate::chant::xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let length = (next() % 40) as usize;
            let text: Vec<u8> = (0..length)
                .map(|_| {
                    // Mostly letters, so that long words are common.
                    let pick = (next() >> 32) as usize % (alphabet.len() * 2);
                    if pick < alphabet.len() {
                        alphabet[pick]
                    } else {
                        b'a' + (pick % 26) as u8
                    }
                })
                .collect();
            let mut one_by_one = Sketch::default();
            let mut feed = TextFeatures::new(3);
            for byte in &text {
                feed.feed(std::slice::from_ref(byte), &mut one_by_one);
            }
            feed.finish(&mut one_by_one);
            assert_eq!(
                sketch_text(3, &text),
                one_by_one,
                "{:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }

    #[test]
    fn sketches_keep_the_smallest_hashes_and_know_when_complete() {
        let mut sketch = Sketch::default();
        assert!(sketch.is_empty() && sketch.is_complete());
        for hash in (1..=SKETCH_SIZE as u64).rev() {
            sketch.insert(hash * 10);
            sketch.insert(hash * 10);
        }
        assert!(sketch.is_complete());
        assert_eq!(sketch.hashes().len(), SKETCH_SIZE);
        sketch.insert(SKETCH_SIZE as u64 * 10);
        assert!(sketch.is_complete(), "the largest kept hash again is no new feature");
        sketch.insert(5);
        assert!(!sketch.is_complete());
        assert_eq!(sketch.hashes()[0], 5);
        assert_eq!(*sketch.hashes().last().unwrap(), (SKETCH_SIZE as u64 - 1) * 10);
        let mut other = Sketch::default();
        other.insert(u64::MAX);
        other.insert(u64::MAX);
        assert_eq!(other.hashes(), &[u64::MAX]);
        assert!(sketch.hashes().windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn sketches_match_a_sorted_set_of_everything_fed() {
        // Hash streams with repeats, fed through the cache or not: the sketch is always the
        // smallest SKETCH_SIZE distinct hashes, complete exactly when there are no more.
        let mut state = 0x1234_5678_9abc_def0u64;
        for round in 0..200 {
            let distinct = [1usize, 5, 31, 32, 33, 40, 200][round % 7];
            let mut all = std::collections::BTreeSet::new();
            let (mut plain, mut cached, mut seen) = (Sketch::default(), Sketch::default(), SeenValues::EMPTY);
            for _ in 0..3 * distinct {
                state = fmix64(state.wrapping_add(0x9e37_79b9_7f4a_7c15));
                let value = state % distinct as u64;
                all.insert(feature_hash(7, value));
                plain.add(7, value);
                CachedSketch {
                    sketch: &mut cached,
                    seen: &mut seen,
                }
                .add(7, value);
            }
            let smallest: Vec<u64> = all.iter().copied().take(SKETCH_SIZE).collect();
            for sketch in [plain, cached] {
                assert_eq!(sketch.hashes(), smallest.as_slice());
                assert_eq!(sketch.is_complete(), all.len() <= SKETCH_SIZE);
            }
        }
    }

    #[test]
    fn similarity_is_jaccard_exact_while_complete() {
        let of = |hashes: &[u64]| {
            let mut sketch = Sketch::default();
            hashes.iter().for_each(|&h| sketch.insert(h));
            sketch
        };
        assert_eq!(Sketch::default().similarity(&Sketch::default()), 1.0);
        assert_eq!(of(&[1]).similarity(&Sketch::default()), 0.0);
        assert_eq!(of(&[1, 2, 3]).similarity(&of(&[2, 3, 4])), 0.5);
        assert_eq!(of(&[1, 2, 3]).similarity(&of(&[3, 2, 1])), 1.0);
        // Beyond SKETCH_SIZE features: the share of the smallest SKETCH_SIZE of the union.
        let evens: Vec<u64> = (0..200).map(|i| 2 * i).collect();
        let all: Vec<u64> = (0..400).collect();
        let (a, b) = (of(&evens), of(&all));
        assert!(!a.is_complete() && !b.is_complete());
        // The union's 32 smallest are 0..32, of which the 16 even ones are in both.
        assert_eq!(a.similarity(&b), 0.5);
        assert_eq!(a.similarity(&a), 1.0);
    }

    #[test]
    fn numbers_hash_by_value() {
        assert_eq!(hash_f64(1.0), hash_i64(1));
        assert_eq!(hash_f64(-0.0), hash_i64(0));
        assert_eq!(hash_f64(0.0), hash_i64(0));
        assert_eq!(hash_f64(-7.0), hash_i64(-7));
        assert_ne!(hash_f64(1.5), hash_i64(1));
        assert_ne!(hash_i64(1), hash_i64(-1));
        assert_eq!(hash_f64(f64::NAN), hash_f64(-f64::NAN));
        assert_ne!(hash_f64(f64::INFINITY), hash_f64(f64::NEG_INFINITY));
    }

    #[test]
    fn hash_i64_matches_the_magnitude_encoding() {
        for value in [
            0i64,
            1,
            -1,
            255,
            256,
            -256,
            65_535,
            i64::MAX,
            i64::MIN,
            1 << 40,
            -(1 << 56),
        ] {
            assert_eq!(
                hash_i64(value),
                hash_int_magnitude(value < 0, &value.unsigned_abs().to_le_bytes())
            );
        }
    }

    #[test]
    fn big_integral_floats_match_their_integers() {
        // 2^64 exactly: magnitude bytes 00 x8, 01
        let mut two_64 = [0u8; 9];
        two_64[8] = 1;
        assert_eq!(
            hash_f64(18_446_744_073_709_551_616.0),
            hash_int_magnitude(false, &two_64)
        );
        // 2^100 = 1 << 100: byte 12 holds 1 << 4. (Built by an exact conversion: `powi`'s
        // precision is unspecified, and Miri makes it inexact on purpose.)
        let mut two_100 = [0u8; 13];
        two_100[12] = 0x10;
        let float_2_100 = (1u128 << 100) as f64;
        assert_eq!(hash_f64(float_2_100), hash_int_magnitude(false, &two_100));
        assert_eq!(hash_f64(-float_2_100), hash_int_magnitude(true, &two_100));
        // The largest float does not panic.
        let _ = hash_f64(f64::MAX);
    }

    #[test]
    fn integer_magnitude_is_minimal() {
        assert_eq!(hash_int_magnitude(false, &[5, 0, 0, 0]), hash_i64(5));
        assert_eq!(hash_int_magnitude(true, &[]), hash_i64(0));
        assert_eq!(
            hash_i64(i64::MIN),
            hash_int_magnitude(true, &[0, 0, 0, 0, 0, 0, 0, 0x80])
        );
        let long = vec![0xffu8; 40];
        assert_ne!(hash_int_magnitude(false, &long), hash_int_magnitude(true, &long));
    }

    #[test]
    fn kinds_are_distinct() {
        let digests = [
            hash_none(),
            hash_bool(false),
            hash_bool(true),
            hash_i64(0),
            hash_i64(1),
            hash_str(b""),
            hash_str(b"1"),
            hash_bytes(b"1"),
            hash_error(b"1"),
            seq(&[]),
            map(&[]),
        ];
        for (i, a) in digests.iter().enumerate() {
            for b in &digests[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn maps_are_order_free_and_sequences_are_not() {
        let (a, b, c) = (hash_str(b"a"), hash_str(b"b"), hash_i64(3));
        assert_eq!(map(&[(a, c), (b, a)]), map(&[(b, a), (a, c)]));
        assert_ne!(map(&[(a, b)]), map(&[(b, a)]));
        assert_ne!(seq(&[a, b]), seq(&[b, a]));
        let mut canon = Canon::new();
        let start = canon.mark();
        canon.push(b);
        canon.push(a);
        let set_ba = canon.finish_set(start);
        canon.push(a);
        canon.push(b);
        assert_eq!(set_ba, canon.finish_set(start));
        assert_eq!(canon.mark(), 0);
    }

    #[test]
    fn nested_containers_finish_innermost_first() {
        let mut canon = Canon::new();
        let outer = canon.mark();
        canon.push(hash_str(b"k"));
        let inner = canon.mark();
        canon.push(hash_i64(1));
        let inner_digest = canon.finish_seq(inner);
        canon.push(inner_digest);
        let nested = canon.finish_map(outer);
        assert_eq!(nested, map(&[(hash_str(b"k"), seq(&[hash_i64(1)]))]));
    }

    #[test]
    fn small_maps_hash_like_canon() {
        let entries = [(hash_str(b"a"), hash_i64(1)), (hash_str(b"b"), hash_i64(2))];
        let reversed: Vec<_> = entries.iter().rev().copied().collect();
        assert_eq!(hash_map_entries(&entries), Some(map(&reversed)));
        assert_eq!(hash_map_entries(&[]), Some(map(&[])));
        assert_eq!(hash_map_entries(&[(1, 1); SMALL_MAP_ENTRIES + 1]), None);
        let mut pairs: Vec<_> = entries.iter().map(|&(k, v)| hash_pair(k, v)).collect();
        assert_eq!(hash_map_pairs(&mut pairs), hash_map_entries(&entries));
        assert_eq!(hash_map_pairs(&mut [0; SMALL_MAP_ENTRIES + 1]), None);
    }

    #[test]
    fn pieces_hash_like_the_whole() {
        let text = "a long text, hashed in pieces of every size ".repeat(100);
        for size in [1, 7, 64, 1000, text.len()] {
            let mut hasher = TaggedHasher::new(tag::STR);
            text.as_bytes().chunks(size).for_each(|piece| hasher.update(piece));
            assert_eq!(hasher.digest(), hash_str(text.as_bytes()));
        }
        assert_eq!(TaggedHasher::new(tag::ERROR).digest(), hash_error(b""));
    }

    #[test]
    fn compile_time_strings_hash_like_runtime_ones() {
        for text in ["", "details", "text", "exitCode", "a longer name, past sixteen bytes"] {
            assert_eq!(hash_str_const(text.as_bytes()), hash_str(text.as_bytes()));
        }
    }

    #[test]
    fn odd_map_children_do_not_panic() {
        let mut canon = Canon::new();
        let start = canon.mark();
        canon.push(hash_str(b"k"));
        let odd = canon.finish_map(start);
        assert_eq!(odd, map(&[(hash_str(b"k"), hash_none())]));
    }

    #[test]
    fn object_needs_two_children_but_never_panics() {
        let mut canon = Canon::new();
        let start = canon.mark();
        let empty = canon.finish_object(start);
        assert_eq!(empty, hash_two(tag::OBJECT, hash_none(), hash_none()));
    }
}
