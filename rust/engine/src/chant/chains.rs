//! The chain table: each anchor window's last counted occurrence, gap and count, the
//! restart that reads a chain's gap back from the text, and the check of a chain against
//! the text before it is reported.

use super::history::{History, Slots};
use super::{ChantEvent, Slot, Symbol, WAYS};

/// A window's chain, 16 bytes so a bucket of four is one cache line.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Entry {
    /// The window's hash (the bucket comes from a mix of it).
    pub(super) tag: u32,
    /// Low 32 bits of the last counted position (ages are taken modulo 2^32).
    pub(super) last: u32,
    pub(super) gap: u16,
    /// 0: vacant.
    pub(super) count: u16,
    pub(super) _pad: u32,
}

/// The chain table's parameters, borrowed apart from the table so the scan loop can update
/// chains without giving up its local state.
pub(super) struct Chains<'a, S: Symbol> {
    pub(super) window: u64,
    pub(super) min_repeats: u64,
    pub(super) max_distance: u64,
    /// Symbols of history (`ChantConfig::history`): how far back a chant's start is sought.
    pub(super) reach: u64,
    pub(super) bucket_mask: u64,
    pub(super) origin: u64,
    pub(super) history: &'a History<S>,
}

impl<S: Symbol> Chains<'_, S> {
    /// Update the chain of the window `key` ending at `i`; returns its table slot and state.
    #[inline(always)]
    pub(super) fn count(&self, table: &mut [Entry], key: u32, i: u64) -> (usize, Entry) {
        let (window, max_distance) = (self.window, self.max_distance);
        let tag = key;
        let bucket = ((u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) & self.bucket_mask) as usize * WAYS;
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

    /// Check the chain ending at `i` against the real symbols; on success build the event
    /// and on failure (a hash collision) restart the chain.
    #[cold]
    pub(super) fn confirm(&self, table: &mut [Entry], way: usize, chain: Entry, i: u64) -> Option<ChantEvent<S>> {
        let window = self.window;
        let count = u64::from(chain.count);
        let gap = u64::from(chain.gap);
        let first = (i + 1).checked_sub(window + (count - 1) * gap);
        let ring = self.history;
        let valid = |&f: &u64| f >= self.origin && (count < 2 || ring.is_periodic(f, i, gap));
        let Some(first) = first.filter(valid) else {
            if let Some(e) = table.get_mut(way) {
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
        let floor = (i + 1).saturating_sub(self.reach).max(self.origin);
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
