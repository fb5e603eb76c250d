//! Content chanting: a streaming detector of output that repeats itself.
//!
//! The rule (mirrored by the pure-Python model in the tests):
//!
//! * Every position `i` ends a window: the last `window` symbols. Its *key* is a keyed
//!   polynomial hash of the window (mod 2^64, random key per detector), or "none" when
//!   `ignore_whitespace` is set and the window is whitespace only.
//! * A window is an *anchor* when it has a key no greater than the keys of the previous
//!   `anchor_span()` windows (16, or the largest power of two <= `window + min_repeats` when
//!   that is smaller, so the warm-up fits in the latency bound). Only anchors are counted:
//!   about one window in 17 of ordinary text, yet in any periodic text the period's
//!   smallest-key window is an anchor at every occurrence, so every chant keeps one chain
//!   per period.
//! * Each distinct window keeps its last *counted* occurrence, a chain gap and a count. An
//!   anchor less than one window after the last counted one is not counted (a long divider
//!   line is one window at every offset); one more than `max_distance()` after it starts a
//!   new chain.
//! * A counted occurrence extends the chain when its gap equals the chain's gap *and* the
//!   text between occurrences is the same as last time (`gap + window` symbols ending at the
//!   previous occurrence equal those ending here); otherwise it restarts a chain of two.
//!   Identical gaps are what separate a chant from code that shares boilerplate.
//! * A chain of `min_repeats` occurrences is chanting. The detector then latches until reset.
//!
//! Cost: O(1) per symbol (one multiply-add of the rolling hash, a minimum over the last few
//! keys, and a table probe for anchors only); memory fixed by the configuration. Before an
//! alarm is raised the whole chained span is compared symbol by symbol, so a hash collision
//! (crafted or not) can only ever cost a missed link, never an alarm.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Largest history (in symbols) a configuration may need; bounds memory per detector.
pub const MAX_HISTORY: u64 = 1 << 21;

/// Most previous windows an anchor is compared with (see `ChantConfig::anchor_span`).
pub const MAX_ANCHOR_SPAN: usize = 16;
const SPAN: usize = MAX_ANCHOR_SPAN;
/// Symbols hashed per pass of the scan.
const BATCH: usize = 256;

/// Largest chain distance the compact table entries can hold.
const MAX_DISTANCE: u64 = u16::MAX as u64;
const MAX_REPEATS: u64 = u16::MAX as u64;
const WAYS: usize = 4;
const NO_KEY: u64 = u64::MAX;

/// One unit of the stream: a Unicode code point or a token id.
pub trait Symbol: Copy + Eq + Default {
    /// The symbol's value for hashing.
    fn key(self) -> u64;
    /// Whitespace, for `ignore_whitespace` (token ids never are).
    fn is_blank(self) -> bool;
}

/// A Unicode code point (lone surrogates included, so any Python `str` can be fed).
impl Symbol for u32 {
    #[inline(always)]
    fn key(self) -> u64 {
        u64::from(self)
    }

    #[inline(always)]
    fn is_blank(self) -> bool {
        is_white_space(self)
    }
}

/// A token id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Token(pub u64);

impl Symbol for Token {
    #[inline(always)]
    fn key(self) -> u64 {
        self.0
    }

    #[inline(always)]
    fn is_blank(self) -> bool {
        false
    }
}

/// Unicode White_Space (what Rust's `char::is_whitespace` accepts), for any code point.
#[inline(always)]
pub fn is_white_space(c: u32) -> bool {
    const ASCII: u64 = (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 13) | (1 << 32);
    // No branch on `c < 64`: text mixes letters with spaces and punctuation unpredictably.
    let low = (ASCII >> (c & 63)) & u64::from(c < 64);
    if c < 0x85 {
        low == 1
    } else {
        char::from_u32(c).is_some_and(char::is_whitespace)
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

    /// Why this configuration is unusable, if it is.
    pub fn problem(&self) -> Option<&'static str> {
        if self.window == 0 || self.min_repeats == 0 || self.max_period == 0 {
            return Some("content_chunk_size, max_repeated_chunks and max_period must be >= 1");
        }
        if self.max_period.saturating_add(self.window) > MAX_DISTANCE || self.min_repeats > MAX_REPEATS {
            return Some("max_period + content_chunk_size and max_repeated_chunks must be <= 65535");
        }
        let history = self
            .min_repeats
            .checked_add(1)
            .and_then(|r| r.checked_mul(self.max_period + self.window))
            .and_then(|h| h.checked_add(self.window));
        match history {
            Some(h) if h <= MAX_HISTORY => None,
            _ => Some("(max_repeated_chunks + 1) * (max_period + content_chunk_size) is too large"),
        }
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
}

/// The chain table's parameters, borrowed apart from the table so the scan loop can update
/// chains without giving up its local state.
struct Chains<'a> {
    window: u64,
    max_distance: u64,
    bucket_mask: u64,
    mask: u64,
    origin: u64,
    powers: &'a [u64],
}

impl Chains<'_> {
    /// Update the chain of the window `key` ending at `i`; returns its table slot and state.
    #[inline(always)]
    fn count(&self, table: &mut [Entry], prefix: &[u64], key: u64, i: u64) -> (usize, Entry) {
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
            Some((way, entry, gap)) => {
                let span = gap + window;
                let extends = entry.count >= 2 && gap == u64::from(entry.gap) && i + 1 - self.origin >= gap + span && {
                    let power = self.powers.get(span as usize).copied().unwrap_or(0);
                    self.span_hash(prefix, i - gap, span, power) == self.span_hash(prefix, i, span, power)
                };
                let count = if extends { entry.count.saturating_add(1) } else { 2 };
                (
                    way,
                    Entry {
                        tag,
                        last: now,
                        gap: gap as u16,
                        count,
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

    /// Hash of the `length` symbols ending at position `end` (inclusive).
    #[inline(always)]
    fn span_hash(&self, prefix: &[u64], end: u64, length: u64, power: u64) -> u64 {
        let at = |n: u64| prefix.get((n & self.mask) as usize).copied().unwrap_or(0);
        at(end + 1).wrapping_sub(at(end + 1 - length).wrapping_mul(power))
    }
}

/// The streaming detector. Feed symbols in any chunking: the verdict is the same.
#[derive(Clone, Debug)]
pub struct Chant<S: Symbol> {
    config: ChantConfig,
    key: HashKey,
    /// `base^window`.
    window_power: u64,
    /// `base^k` for every compared span length (up to `max_distance + window`).
    powers: Vec<u64>,
    /// The recent symbols and prefix hashes, indexed by position & mask (allocated lazily).
    symbols: Vec<S>,
    prefix: Vec<u64>,
    mask: u64,
    table: Vec<Entry>,
    bucket_mask: u64,
    /// Window keys of the batch being scanned (`BATCH` items, allocated with the history).
    keys: Vec<u64>,
    /// Sliding minimum of the previous `anchor_span()` window keys, by aligned blocks of that
    /// many positions: the keys of the current block, the minimum of the current block so far,
    /// and the suffix minima of the previous block (NO_KEY for none).
    block: [u64; SPAN],
    block_min: u64,
    previous_suffix: [u64; SPAN],
    /// Absolute position where the current stream started. A reset moves it past every
    /// position a table entry could still chain to, so the table never needs clearing.
    origin: u64,
    /// Absolute position of the next symbol.
    len: u64,
    /// 1 + absolute position of the newest non-whitespace symbol (`origin`: none yet).
    solid_end: u64,
    event: Option<ChantEvent<S>>,
}

fn random_u64(tag: u64) -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(tag);
    hasher.finish()
}

impl<S: Symbol> Chant<S> {
    /// A detector with a secret random hash key; an unusable configuration is clamped (see
    /// `ChantConfig::clamped`).
    pub fn new(config: ChantConfig) -> Self {
        Self::with_key(config, HashKey::random())
    }

    /// A detector with a given hash key (tests; production uses `new`).
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
        let buckets = ((config.max_distance() + 1).next_power_of_two() / 2).max(1);
        Chant {
            key,
            window_power: key.base.wrapping_pow(u32::try_from(config.window).unwrap_or(u32::MAX)),
            // Filled with the other tables on first feed: a detector that never sees output
            // (most `DoomLoopDetector`s) costs a few hundred bytes, not tens of KiB.
            powers: Vec::new(),
            symbols: Vec::new(),
            prefix: Vec::new(),
            // A batch is hashed before its anchors are counted: room for it beyond the history.
            mask: (config.history() + BATCH as u64 + 1).next_power_of_two() - 1,
            table: Vec::new(),
            bucket_mask: buckets - 1,
            keys: Vec::new(),
            block: [NO_KEY; SPAN],
            block_min: NO_KEY,
            previous_suffix: [NO_KEY; SPAN],
            origin: 0,
            len: 0,
            solid_end: 0,
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

    /// Forget everything and start a new stream (allocations and the hash key are kept, so
    /// the same text gives the same event again).
    pub fn reset(&mut self) {
        // O(1): entries of the old stream are all older than `max_distance` from here on.
        let origin = self.len + self.config.max_distance() + 1;
        self.origin = origin;
        self.len = origin;
        self.solid_end = origin;
        self.block = [NO_KEY; SPAN];
        self.block_min = NO_KEY;
        self.previous_suffix = [NO_KEY; SPAN];
        self.event = None;
    }

    /// Bytes of heap this detector holds (for tests of the memory bound).
    pub fn heap_bytes(&self) -> usize {
        self.powers.capacity() * 8
            + self.symbols.capacity() * std::mem::size_of::<S>()
            + self.prefix.capacity() * 8
            + self.table.capacity() * std::mem::size_of::<Entry>()
            + self.keys.capacity() * 8
    }

    /// Feed symbols; returns the event when chanting is found during this call. After that
    /// the detector ignores further input until `reset`.
    pub fn feed<I: IntoIterator<Item = S>>(&mut self, symbols: I) -> Option<ChantEvent<S>> {
        if self.event.is_some() {
            return None;
        }
        if self.table.is_empty() {
            self.allocate();
        }
        let mut symbols = symbols.into_iter();
        // Taken out of `self` for the call (a pointer swap): the passes borrow `self`.
        let mut keys = std::mem::take(&mut self.keys);
        let found = self.scan(&mut symbols, &mut keys);
        self.keys = keys;
        if let Some(event) = &found {
            self.event = Some(event.clone());
        }
        found
    }

    fn scan<I: Iterator<Item = S>>(&mut self, symbols: &mut I, keys: &mut [u64]) -> Option<ChantEvent<S>> {
        loop {
            // Two passes per batch, each a tight loop with few live values: hash the windows,
            // then pick the anchors and update their chains.
            let first = self.len;
            let n = self.hash_batch(symbols, keys);
            if n == 0 {
                return None;
            }
            let keys = keys.get(..n).unwrap_or_default();
            // One copy of the loop per span, so the block arithmetic is on constants.
            let found = match self.config.anchor_span() {
                16 => self.count_anchors::<16>(first, keys),
                8 => self.count_anchors::<8>(first, keys),
                4 => self.count_anchors::<4>(first, keys),
                2 => self.count_anchors::<2>(first, keys),
                _ => self.count_anchors::<1>(first, keys),
            };
            if let Some(event) = found {
                return Some(event);
            }
        }
    }

    fn allocate(&mut self) {
        let longest = (self.config.max_distance() + self.config.window) as usize;
        let base = self.key.base;
        self.powers = std::iter::successors(Some(1u64), |p| Some(p.wrapping_mul(base)))
            .take(longest + 1)
            .collect();
        let size = (self.mask + 1) as usize;
        self.symbols = vec![S::default(); size];
        self.prefix = vec![0; size];
        self.table = vec![Entry::default(); (self.bucket_mask as usize + 1) * WAYS];
        self.keys = vec![NO_KEY; BATCH];
    }

    #[inline(always)]
    fn slot(&self, position: u64) -> usize {
        (position & self.mask) as usize
    }

    #[inline(always)]
    fn symbol_at(&self, position: u64) -> S {
        self.symbols.get(self.slot(position)).copied().unwrap_or_default()
    }

    /// Consume up to `BATCH` symbols into the history; `keys[k]` is the key of the window
    /// ending at the k-th of them (NO_KEY: no window yet, or whitespace only). Returns how
    /// many were consumed.
    #[inline(always)]
    fn hash_batch<I: Iterator<Item = S>>(&mut self, symbols: &mut I, keys: &mut [u64]) -> usize {
        let Chant {
            config,
            key: hash_key,
            window_power,
            symbols: ring,
            prefix,
            mask,
            origin,
            len,
            solid_end,
            ..
        } = self;
        let (window, mask, base, salt, window_power) =
            (config.window, *mask, hash_key.base, hash_key.salt, *window_power);
        let skip_blank = config.ignore_whitespace;
        let first_window = *origin + window;
        // Views of exactly `mask + 1` items, so masked indexes need no bounds checks.
        let size = mask as usize + 1;
        let (Some(ring), Some(prefix)) = (ring.get_mut(..size), prefix.get_mut(..size)) else {
            return 0;
        };
        let mut i = *len;
        let mut last_solid = *solid_end;
        let mut current = prefix.get((i & mask) as usize).copied().unwrap_or(0);
        let mut n = 0;
        // Keys first: zip must not pull a symbol it has no slot for.
        for (out, symbol) in keys.iter_mut().zip(symbols.by_ref()) {
            current = current.wrapping_mul(base).wrapping_add(symbol.key().wrapping_add(salt));
            if let Some(s) = ring.get_mut((i & mask) as usize) {
                *s = symbol;
            }
            if let Some(p) = prefix.get_mut(((i + 1) & mask) as usize) {
                *p = current;
            }
            i += 1;
            n += 1;
            // Branch-free: whitespace is frequent and irregular in text.
            let solid_mask = u64::from(!symbol.is_blank()).wrapping_neg();
            last_solid = (i & solid_mask) | (last_solid & !solid_mask);
            // The window ending here is symbols i - window .. i - 1.
            let before = prefix
                .get((i.wrapping_sub(window) & mask) as usize)
                .copied()
                .unwrap_or(0);
            // NO_KEY is reserved for "no window": a real key of that value counts as one less.
            let key = current.wrapping_sub(before.wrapping_mul(window_power)).min(NO_KEY - 1);
            let no_window = i < first_window || (skip_blank && last_solid <= i - window);
            *out = if no_window { NO_KEY } else { key };
        }
        *len = i;
        *solid_end = last_solid;
        n
    }

    /// Pick the anchors among the windows ending at `first..first + keys.len()` and update
    /// their chains; returns the event if one is confirmed (the stream then stops there).
    #[inline(always)]
    fn count_anchors<const SPAN_N: usize>(&mut self, first: u64, keys: &[u64]) -> Option<ChantEvent<S>> {
        let mut running_min = self.block_min;
        let span = SPAN_N;
        for (position, &key) in (first..).zip(keys) {
            // Minimum of the previous `span` keys (aligned blocks of `span` positions): the
            // rest of the previous block, then the current block so far.
            let offset = position as usize & (span - 1);
            let earlier = self
                .previous_suffix
                .get(offset)
                .copied()
                .unwrap_or(NO_KEY)
                .min(running_min);
            if let Some(k) = self.block.get_mut(offset) {
                *k = key;
            }
            running_min = running_min.min(key);
            if offset == span - 1 {
                let mut suffix = NO_KEY;
                let block = self.block.iter().take(span);
                for (k, out) in block.zip(self.previous_suffix.iter_mut()).rev() {
                    suffix = suffix.min(*k);
                    *out = suffix;
                }
                running_min = NO_KEY;
            }
            if key == NO_KEY || key > earlier {
                continue;
            }
            let chains = Chains {
                window: self.config.window,
                max_distance: self.config.max_distance(),
                bucket_mask: self.bucket_mask,
                mask: self.mask,
                origin: self.origin,
                powers: &self.powers,
            };
            let (way, chain) = chains.count(&mut self.table, &self.prefix, key, position);
            if u64::from(chain.count) >= self.config.min_repeats {
                if let Some(event) = self.confirm(way, chain, position) {
                    // The chant ends here: symbols after it in this batch are not counted.
                    self.len = position + 1;
                    return Some(event);
                }
            }
        }
        self.block_min = running_min;
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
        let valid = |&f: &u64| f >= self.origin && (count < 2 || self.is_periodic(f, i, gap));
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
            (1..=gap).find(|&q| gap % q == 0 && self.is_periodic(first, i, q))
        } else {
            None
        };
        // Extend the start back while the text keeps the period (within the history).
        let floor = (i + 1).saturating_sub(self.config.history()).max(self.origin);
        let mut start = first;
        if let Some(q) = period {
            while start > floor && self.symbol_at(start - 1) == self.symbol_at(start - 1 + q) {
                start -= 1;
            }
        }
        let window_symbols = (i + 1 - window..=i).map(|p| self.symbol_at(p)).collect();
        Some(ChantEvent {
            start: start - self.origin,
            end: i + 1 - self.origin,
            period,
            count,
            window: window_symbols,
        })
    }

    /// Symbols `from..=to` repeat with period `q`.
    fn is_periodic(&self, from: u64, to: u64, q: u64) -> bool {
        (from + q..=to).all(|p| self.symbol_at(p) == self.symbol_at(p - q))
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
        // its first occurrence, at most 16 + 1 windows into the chant (the windows
        // before it that overlap the prefix may hold smaller keys).
        let start = prefix.len() as u64;
        let latest = start + 400 + 17;
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
        fn key(self) -> u64 {
            7
        }
        fn is_blank(self) -> bool {
            false
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
    fn memory_is_fixed_by_the_configuration() {
        let mut chant = Chant::<u32>::new(ChantConfig::default());
        chant.feed((0..10u32).map(|i| i + 40000));
        let before = chant.heap_bytes();
        let noise = (0..1_000_000u32).map(|i| i.wrapping_mul(2_654_435_761) % 50_000);
        assert_eq!(chant.feed(noise), None);
        assert_eq!(chant.position(), 1_000_010);
        assert_eq!(chant.heap_bytes(), before);
        assert!(before < 512 * 1024, "{before}");
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
    fn anchor_span_fits_the_latency_bound() {
        let span = |window, min_repeats| small(window, min_repeats).anchor_span();
        assert_eq!(span(50, 8), 16);
        assert_eq!(span(10, 3), 8);
        assert_eq!(span(2, 2), 4);
        assert_eq!(span(1, 1), 2);
        assert_eq!(span(1 << 40, 1 << 40), 16);
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
