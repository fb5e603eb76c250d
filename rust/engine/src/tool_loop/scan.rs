//! The passes over the history that the rules read: the fused scan (the unknown-tool run,
//! the streak, recent calls and the ping-pong tail), and the cycle and argument-churn matches.

use crate::fingerprint::hash_two;
use crate::ring::Ring;

use super::{
    cycle_key, key_tag, CallKey, Ids, Record, RunScope, CHURN_PROBE_SHARE, HAS_RESULT, HAS_UNKNOWN, MAX_CHURN_VARIANTS,
    MAX_CYCLE_PERIOD, MIN_CHURN_REPEATS, MIN_CYCLE_PERIOD,
};

/// The run-scoped records, newest first.
pub(super) fn scoped<N>(history: &Ring<Record<N>>, run: Option<u64>) -> impl Iterator<Item = &Record<N>> + '_ {
    let scope = RunScope::of(run);
    history.iter_newest_first().filter(move |r| r.in_run(scope))
}

/// A cycle the call continues.
pub(super) struct CycleMatch {
    pub(super) period: usize,
    /// The cycle's tail plus this call.
    pub(super) count: u32,
    /// Every tail record has a result, and each call's results are all one.
    pub(super) no_progress: bool,
    /// The warning key's digest.
    pub(super) key: u64,
}

/// Whether `calls` is no repetition of a shorter pattern (`a b a c` is primitive, `a b a b`
/// is not): a cycle's period is its shortest.
pub(super) fn primitive(calls: &[u64]) -> bool {
    let n = calls.len();
    (1..n)
        .filter(|d| n % d == 0)
        .all(|d| (d..n).any(|i| calls[i] != calls[i - d]))
}

/// The longest cycle of 3 to 8 calls that `key` continues: for a period `p`, the newest
/// run-scoped records `s[0], s[1], ...` repeat with period `p` (`s[j] == s[j - p]`) for as
/// long as the tail runs, the `p` newest form no shorter pattern, and `key` is `s[p - 1]`,
/// the call that comes next. Its count is the tail's length plus this call, and it is a
/// cycle once that count makes two full rounds (`2 * p`): the calls were repeated, not just
/// made once and begun again. Ties go to the shorter period. Only cycles whose count can
/// reach `threshold` (the lower of the warning and critical thresholds) are looked for: a
/// shorter one gives no finding. `every_record_in_run`: every record is known to be in `key`'s
/// run scope (the session holds no run ids and `key` has none), so none is checked.
pub(super) fn cycle_match<N>(
    history: &Ring<Record<N>>,
    key: &CallKey,
    threshold: u32,
    every_record_in_run: bool,
) -> Option<CycleMatch> {
    // The newest records' args, one more than the longest period: enough to rule out nearly
    // every period without walking the history again.
    const SEEN: usize = MAX_CYCLE_PERIOD + 1;
    let mut newest = [0u64; SEEN];
    let mut newest_results = [0u64; SEEN];
    let mut seen = 0;
    let scope = RunScope::of(key.run);
    'gather: for half in history.halves() {
        for r in half.iter().rev() {
            if every_record_in_run || r.in_run(scope) {
                newest[seen] = r.args;
                newest_results[seen] = r.result;
                seen += 1;
                if seen == SEEN {
                    break 'gather;
                }
            }
        }
    }
    // The usual repetitions are ruled out at once: one call over and over (no pattern of
    // several calls), or two alternating over all the records read (an odd period would
    // break at its first repeat, an even one is no shortest period).
    let repeats = |shift: usize| (shift..seen).all(|j| newest[j] == newest[j - shift]);
    if repeats(1) || (seen == SEEN && repeats(2)) {
        return None;
    }
    let mut best: Option<CycleMatch> = None;
    for period in MIN_CYCLE_PERIOD..=seen.min(MAX_CYCLE_PERIOD) {
        let pattern = &newest[..period];
        if pattern[period - 1] != key.args {
            continue;
        }
        // The tail a finding needs (two rounds, the threshold, less this call), as far as the
        // records read above go: a shorter one rules the period out.
        let needed = (2 * period).max(threshold as usize).saturating_sub(1).min(seen);
        if (period..needed).any(|j| newest[j] != newest[j - period]) || !primitive(pattern) {
            continue;
        }
        // Each position's result (records at one position of the cycle are one call).
        // A plain loop over the ring's halves, the position wrapping by hand: a warned cycle
        // walks its whole tail on every call. Each position's result is the first round's
        // (the newest records', read above), which every round must repeat; a record without
        // a result is no evidence, whatever its result field holds.
        let mut results = [0u64; MAX_CYCLE_PERIOD];
        results[..period].copy_from_slice(&newest_results[..period]);
        // Differences and flags are gathered bitwise and read once after the walk.
        let (mut differs, mut flags) = (0u64, HAS_RESULT);
        let mut tail = 0u32;
        let mut position = 0;
        'walk: for half in history.halves() {
            for r in half.iter().rev() {
                if !every_record_in_run && !r.in_run(scope) {
                    continue;
                }
                if r.args != pattern[position] {
                    break 'walk;
                }
                differs |= r.result ^ results[position];
                flags &= r.flags;
                tail += 1;
                position += 1;
                if position == period {
                    position = 0;
                }
            }
        }
        let mut no_progress = differs == 0 && flags & HAS_RESULT != 0;
        // A call at two positions of the cycle (`a` in `a b a c`) must have one result too.
        for i in 0..period {
            for k in i + 1..period {
                if pattern[i] == pattern[k] && results[i] != results[k] {
                    no_progress = false;
                }
            }
        }
        let count = tail + 1;
        if count >= 2 * period as u32 && best.as_ref().is_none_or(|b| count > b.count) {
            // In call order from this call: s[p-1], ..., s[0].
            let mut calls = [0u64; MAX_CYCLE_PERIOD];
            for (slot, &args) in calls.iter_mut().zip(pattern.iter().rev()) {
                *slot = args;
            }
            best = Some(CycleMatch {
                period,
                count,
                no_progress,
                key: cycle_key(&calls[..period]),
            });
        }
    }
    best
}

/// Argument churn of the call's tool.
pub(super) struct ChurnMatch {
    /// Calls in the churning tail.
    pub(super) count: u32,
    /// The argument sets repeated at least [`MIN_CHURN_REPEATS`] times.
    pub(super) variants: u32,
    /// Digest of those argument sets (sorted), for the warning key.
    pub(super) sets: u64,
}

/// One tool cycling through a few argument sets whose outcomes do not change. The tail is
/// the newest run-scoped records that are all calls of `key`'s tool with a result, each
/// argument set's result the same every time, and at most [`MAX_CHURN_VARIANTS`] argument
/// sets; it ends at the first record that breaks one of these. It churns when at least two of
/// its argument sets recur [`MIN_CHURN_REPEATS`] times or more, `key`'s among them, and the
/// other (one-off) calls are at most one in [`CHURN_PROBE_SHARE`] of the tail (at least one).
pub(super) fn churn_match<N>(history: &Ring<Record<N>>, key: &CallKey) -> Option<ChurnMatch> {
    // (args, result, calls) per argument set, in order of appearance.
    let mut sets = [(0u64, 0u64, 0u32); MAX_CHURN_VARIANTS];
    let mut used = 0;
    let mut count = 0u32;
    for r in scoped(history, key.run) {
        let Some(result) = r.result().filter(|_| r.tool == key.tool) else {
            break;
        };
        match sets[..used].iter_mut().find(|(args, _, _)| *args == r.args) {
            Some((_, seen, _)) if *seen != result => break,
            Some((_, _, calls)) => *calls += 1,
            None if used == MAX_CHURN_VARIANTS => break,
            None => {
                sets[used] = (r.args, result, 1);
                used += 1;
            }
        }
        count += 1;
    }
    let sets = &mut sets[..used];
    let (mut variants, mut repeated_calls, mut this_one) = (0, 0, false);
    for &(args, _, calls) in sets.iter().filter(|s| s.2 >= MIN_CHURN_REPEATS) {
        variants += 1;
        repeated_calls += calls;
        this_one |= args == key.args;
    }
    let probes = count - repeated_calls;
    if variants < 2 || probes > (count / CHURN_PROBE_SHARE).max(1) || !this_one {
        return None;
    }
    sets.sort_unstable_by_key(|&(args, _, calls)| (calls < MIN_CHURN_REPEATS, args));
    Some(ChurnMatch {
        count,
        variants,
        sets: sets[..variants as usize]
            .iter()
            .fold(0, |digest, s| hash_two(key_tag::CHURN, digest, s.0)),
    })
}

/// One fused newest-to-oldest pass over the run-scoped history.
pub(super) struct Scan {
    pub(super) unknown_run: u32,
    pub(super) unknown_name: u64,
    pub(super) streak: u32,
    pub(super) latest_result: u64,
    pub(super) recent: u32,
    pub(super) newest_back: Option<usize>,
    pub(super) newest_args: u64,
    pub(super) other_args: u64,
    /// Length of the alternating tail ending at the newest record.
    pub(super) tail: u32,
    /// Every tail record has a result and each side's result is constant.
    pub(super) tail_no_progress: bool,
}

impl Scan {
    /// Three short passes over the run-scoped records, newest first. The unknown-tool run and
    /// the alternating tail usually end within a record or two; only the streak and recent
    /// counts need the whole window, and are left at 0 unless `count_window`.
    pub(super) fn run<N>(
        history: &Ring<Record<N>>,
        ids: Option<&Ring<Ids>>,
        key: &CallKey,
        count_window: bool,
    ) -> Scan {
        let mut s = Scan {
            unknown_run: 0,
            unknown_name: 0,
            streak: 0,
            latest_result: 0,
            recent: 0,
            newest_back: None,
            newest_args: 0,
            other_args: 0,
            tail: 0,
            tail_no_progress: true,
        };
        let scope = RunScope::of(key.run);
        let scoped = || {
            history
                .iter_newest_first()
                .enumerate()
                .filter(move |(_, r)| r.in_run(scope))
        };
        // Unknown tool: the run of newest records of this tool naming one missing tool.
        for (position, (back, r)) in scoped().enumerate() {
            let named = r.tool == key.tool && r.has(HAS_UNKNOWN);
            let unknown = ids.and_then(|ids| ids.back(back)).map_or(0, |ids| ids.unknown);
            if !named || (position > 0 && unknown != s.unknown_name) {
                break;
            }
            s.unknown_name = unknown;
            s.unknown_run += 1;
        }
        // Streak of one result and recent count of this call: the only pass over the whole
        // window, so a plain loop over the ring's halves.
        if count_window {
            let mut streak_open = true;
            for half in history.halves() {
                for r in half.iter().rev() {
                    if !r.same_call(key, scope) {
                        continue;
                    }
                    s.recent += 1;
                    if streak_open && r.has(HAS_RESULT) {
                        if s.streak == 0 {
                            s.latest_result = r.result;
                            s.streak = 1;
                        } else if r.result == s.latest_result {
                            s.streak += 1;
                        } else {
                            streak_open = false;
                        }
                    }
                }
            }
        }
        // Ping-pong: the tail alternating between the newest args and the other args, and
        // whether every tail record has a result, constant on each side.
        let (mut side_a, mut side_b): (Option<u64>, Option<u64>) = (None, None);
        for (position, (back, r)) in scoped().enumerate() {
            if position == 0 {
                s.newest_back = Some(back);
                s.newest_args = r.args;
            } else if position == 1 && r.args != s.newest_args {
                s.other_args = r.args;
            } else {
                let expected = if position % 2 == 0 { s.newest_args } else { s.other_args };
                if position == 1 || r.args != expected {
                    break;
                }
            }
            s.tail += 1;
            if !r.has(HAS_RESULT) {
                s.tail_no_progress = false;
                continue;
            }
            let side = if r.args == s.newest_args {
                &mut side_a
            } else {
                &mut side_b
            };
            match side {
                None => *side = Some(r.result),
                Some(seen) if *seen != r.result => s.tail_no_progress = false,
                Some(_) => {}
            }
        }
        if side_a.is_none() || side_b.is_none() {
            s.tail_no_progress = false;
        }
        s
    }

    /// `(count, no-progress evidence)` when `key` continues an alternating tail of >= 2.
    pub(super) fn ping_pong(&self, key: &CallKey) -> Option<(u32, bool)> {
        if self.tail < 2 || key.args != self.other_args {
            return None;
        }
        Some((self.tail + 1, self.tail_no_progress))
    }
}
