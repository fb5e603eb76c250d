//! The keyed rolling hash of the windows and their ranks for anchor selection.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use super::kernels::roll_bytes;
use super::{Slot, Symbol, NO_RANK};

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

fn random_u64(tag: u64) -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(tag);
    hasher.finish()
}

/// A window's rank for anchor selection: the top 30 bits of its hash (any fixed order works;
/// 32-bit lanes let the minimum run as vector code, and 30 bits leave NO_RANK, "no window",
/// above every real rank).
#[inline(always)]
pub(super) fn rank(hash: u32) -> i32 {
    (hash >> 2) as i32
}

/// NO_RANK, behind a branch the compiler keeps: windows made only of whitespace are rare
/// enough that a predicted branch beats computing a select at every position.
#[cold]
#[inline(never)]
pub(super) fn no_rank() -> i32 {
    NO_RANK
}

/// The rolling hash of the window ending at the newest symbol, with the run of whitespace
/// there. The hash is mod 2^32, with the low halves of the key's base and salt: 32-bit
/// lanes hash eight windows a vector, and a collision costs at most a missed link (the text
/// is compared before anything counts). It is the low half of the same hash mod 2^64, so a
/// stream state saved with 64 bits reads as its own low half.
#[derive(Clone, Copy)]
pub(super) struct Roll {
    pub(super) base: u32,
    pub(super) salt: u32,
    /// `base^window`.
    pub(super) window_power: u32,
    /// A whitespace run this long makes a whitespace-only window.
    pub(super) blank_limit: u64,
    pub(super) hash: u32,
    pub(super) blank_run: u64,
}

impl Roll {
    /// One symbol in (and, when `leaving` is given, one out); returns the new hash and
    /// whether the window ending here is whitespace only.
    #[inline(always)]
    pub(super) fn step<S: Symbol>(&mut self, entering: S, leaving: Option<S>) -> (u32, bool) {
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
    pub(super) fn warm_up<S: Symbol, N: Slot<S>>(
        &mut self,
        slots: Option<&[N]>,
        from: u64,
        hashes: Option<&mut [u32]>,
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
    pub(super) fn run<S: Symbol, N: Slot<S>>(
        &mut self,
        entering: Option<&[N]>,
        leaving: Option<&[N]>,
        hashes: Option<&mut [u32]>,
        ranks: Option<&mut [i32]>,
    ) {
        let (Some(entering), Some(leaving), Some(hashes), Some(ranks)) = (entering, leaving, hashes, ranks) else {
            return;
        };
        if let (Some(e), Some(l)) = (N::code_point_bytes(entering), N::code_point_bytes(leaving)) {
            if roll_bytes(self, e, l, hashes, ranks) {
                return;
            }
        }
        let mut roll = *self;
        for (((slot, out), hash_out), rank_out) in entering.iter().zip(leaving).zip(hashes).zip(ranks) {
            let (hash, blank) = roll.step(slot.load(), Some(out.load()));
            *hash_out = hash;
            *rank_out = if blank { no_rank() } else { rank(hash) };
        }
        *self = roll;
    }
}
