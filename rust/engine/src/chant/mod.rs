//! Content chanting: a streaming detector of output that repeats itself.
//!
//! The rule (mirrored by the pure-Python model in the tests):
//!
//! * Every position `i` ends a window: the last `window` symbols. Its *hash* is a keyed
//!   polynomial hash of the window (mod 2^32, random key per detector) and its *rank* the top
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
//! the rolling hash and rank of every window (for text held as bytes, eight windows at a time
//! in AVX2 lanes where the processor has them, whitespace runs from bitmasks); the minimum
//! rank of the windows before each (vector code: doubling minima on 32-bit lanes); the table
//! probe of the anchors only. A restart scans the `max_distance` symbols before it (64 at a
//! time with AVX2, else 16) for the window's last and first symbols; only anchors whose window recurred within
//! `max_distance` restart (about one character in 1,300 of source code, none in prose that
//! does not repeat).
//! Memory is fixed by the configuration. The text between occurrences is compared symbol by
//! symbol, and the whole chained span again before an alarm is raised, so a hash collision
//! (crafted or not) can only ever cost a missed link, never an alarm.
//!
//! The detector and its scan are here; `symbols` holds what it reads, `history` the ring of
//! recent symbols, `hash` the rolling hash and the ranks, `kernels` the vector passes,
//! `chains` the chain table, `config` the settings and `snapshot` the snapshot format.

mod chains;
mod config;
mod hash;
mod history;
mod kernels;
mod snapshot;
mod symbols;

use std::cell::RefCell;

use chains::{Chains, Entry};
pub use config::{ChantConfig, CHANT};
pub use hash::HashKey;
use hash::Roll;
use history::{History, Slots};
use kernels::{anchors, Anchors, Minima, Ranks};
pub use snapshot::{chant_snapshot, read_event, restore_chant, write_event, ChantSnapshot, ChantStream, Stored};
pub use symbols::{is_white_space, Slot, Symbol, TextInput, Token};

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

/// The streaming detector. Feed symbols in any chunking: the verdict is the same.
#[derive(Clone, Debug)]
pub struct Chant<S: Symbol> {
    config: ChantConfig,
    key: HashKey,
    /// `base^window` (mod 2^32, as the hash).
    window_power: u32,
    /// Hash of the window ending at the newest symbol (of all symbols so far while fewer than
    /// a window have been seen).
    hash: u32,
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

/// Work space for the batches of a feed, one per thread: detectors carry no batch buffers,
/// and a token-sized feed touches only the few entries it uses.
struct Scratch {
    hashes: [u32; BATCH],
    /// Ranks of the `SPAN` positions before a batch, then the batch's.
    ranks: Ranks,
    /// The doubling minima of `anchors` (two buffers, alternating).
    minima: [Minima; 2],
}

impl Scratch {
    const EMPTY: Scratch = Scratch {
        hashes: [0; BATCH],
        ranks: [NO_RANK; SPAN + BATCH],
        minima: [[NO_RANK; SPAN + BATCH + 8]; 2],
    };
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::EMPTY) };
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
            window_power: (key.base as u32).wrapping_pow(u32::try_from(config.window).unwrap_or(u32::MAX)),
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
    fn hash_batch(&mut self, n: usize, hashes: &mut [u32], ranks: &mut [i32]) {
        let window = self.config.window;
        // The hash is mod 2^32: the key's low halves.
        let mut roll = Roll {
            base: self.key.base as u32,
            salt: self.key.salt as u32,
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
    fn count_anchors(&mut self, first: u64, hashes: &[u32], words: Anchors) -> Option<ChantEvent<S>> {
        let chains = Chains {
            window: self.config.window,
            min_repeats: self.config.min_repeats,
            max_distance: self.config.max_distance(),
            reach: self.config.history(),
            bucket_mask: self.bucket_mask,
            origin: self.origin,
            history: &self.history,
        };
        for (word_index, &word) in words.iter().enumerate().take(hashes.len().div_ceil(64)) {
            let mut word = word;
            while word != 0 {
                let j = word_index * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let (position, hash) = (first + j as u64, hashes.get(j).copied().unwrap_or_default());
                let (way, chain) = chains.count(&mut self.table, hash, position);
                if u64::from(chain.count) >= chains.min_repeats {
                    if let Some(event) = chains.confirm(&mut self.table, way, chain, position) {
                        // The chant ends here: symbols after it in this batch are not counted.
                        self.len = position + 1;
                        return Some(event);
                    }
                }
            }
        }
        None
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

/// A xorshift64 stream for the engine's randomised tests: no dependency, the same inputs on
/// every run.
#[cfg(test)]
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
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

        fn key(self) -> u32 {
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
    fn anchor_span_fits_the_latency_bound() {
        let span = |window, min_repeats| small(window, min_repeats).anchor_span();
        assert_eq!(span(50, 8), 32);
        assert_eq!(span(10, 3), 8);
        assert_eq!(span(2, 2), 4);
        assert_eq!(span(1, 1), 2);
        assert_eq!(span(1 << 40, 1 << 40), 32);
    }
}
