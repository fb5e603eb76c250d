//! The ring of recent symbols a detector reads back.

use super::{ChantConfig, Slot, Symbol, BATCH};

/// The recent symbols, in a ring of `slots`: position `p` is in slot `(p - start) % len`. The
/// ring starts with room for `FIRST_HISTORY` symbols and grows while a stream outgrows it
/// (short responses never pay for the whole history), up to exactly what a scan can read
/// back plus a batch (no power-of-two rounding: at default settings that would be 68% more);
/// positions only wrap around once it is full. It stays narrow (a byte per ASCII or Latin-1
/// character, 32 bits per token id below 2^32) until a symbol of the stream needs more.
#[derive(Clone, Debug)]
pub(super) struct History<S: Symbol> {
    pub(super) slots: Slots<S>,
    /// The position in slot 0 in the ring's current turn (the stream's first position
    /// until the ring is full and wraps). A scan reads back less than one turn from it.
    pub(super) start: u64,
    /// Slots of the full ring.
    pub(super) full: usize,
}

#[derive(Clone, Debug)]
pub(super) enum Slots<S: Symbol> {
    Narrow(Vec<S::Narrow>),
    Wide(Vec<S>),
}

/// Symbols of room the history starts with.
const FIRST_HISTORY: usize = 1 << 10;

/// The aligned runs of two spans of a ring of `size` slots, in order: `(first slot of one,
/// first slot of the other, length)`, each contiguous in both (at most three).
pub(super) struct Runs {
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

/// `out[k] = convert(input[k])`.
#[inline(always)]
fn store<T: Copy, N>(out: Option<&mut [N]>, input: &[T], convert: impl Fn(T) -> N) {
    for (o, &t) in out.unwrap_or_default().iter_mut().zip(input) {
        *o = convert(t);
    }
}

impl<S: Symbol> History<S> {
    pub(super) fn new(config: &ChantConfig) -> Self {
        History {
            slots: Slots::Narrow(Vec::new()),
            start: 0,
            // A batch is written before its windows are counted, and counting one reads
            // back at most the history from it.
            full: usize::try_from(config.history()).map_or(usize::MAX, |h| h.saturating_add(BATCH)),
        }
    }

    pub(super) fn len(&self) -> usize {
        match &self.slots {
            Slots::Narrow(v) => v.len(),
            Slots::Wide(v) => v.len(),
        }
    }

    /// Start a stream at `position` (the symbols held are never read again). A ring widened
    /// by the last stream is narrow again, with room for as many symbols.
    pub(super) fn restart(&mut self, position: u64) {
        self.start = position;
        if let Slots::Wide(wide) = &self.slots {
            self.slots = Slots::Narrow(Vec::with_capacity(wide.len()));
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        match &self.slots {
            Slots::Narrow(v) => v.capacity() * std::mem::size_of::<S::Narrow>(),
            Slots::Wide(v) => v.capacity() * std::mem::size_of::<S>(),
        }
    }

    /// The slot of `position`: in this turn of the ring, the next or the last.
    #[inline(always)]
    pub(super) fn slot(&self, position: u64) -> usize {
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
    pub(super) fn runs(&self, a: u64, b: u64, n: usize) -> Runs {
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
    pub(super) fn append<T: Copy>(&mut self, at: u64, batch: &[T], convert: &impl Fn(T) -> S) {
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
    pub(super) fn at(&self, position: u64) -> S {
        let slot = self.slot(position);
        match &self.slots {
            Slots::Narrow(v) => v.get(slot).map(|n| n.load()),
            Slots::Wide(v) => v.get(slot).copied(),
        }
        .unwrap_or_default()
    }

    /// Symbols `from..=to` (within the history) repeat with period `q`.
    pub(super) fn is_periodic(&self, from: u64, to: u64, q: u64) -> bool {
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
