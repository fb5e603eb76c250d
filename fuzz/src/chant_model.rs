//! A brute-force model of the chant rule (a port of `tests/chant_model.py`) and the checks the
//! chant targets apply to the engine's events.
//!
//! The model keeps one chain per distinct window, keyed by the window's symbols (never by a
//! hash), in a map that forgets nothing, and compares spans symbol by symbol. It shares the
//! engine's hash key only to pick the same anchors (a window's rank is part of the rule).
//! The engine keeps its chains in a bounded 4-way table keyed by a hash tag; its documented
//! behaviour is that a chain lost to a full bucket (or to a tag collision) only restarts.
//! So the model also reports whether this input could have made the engine's table differ
//! (`exact`): only then must the two agree exactly. Whatever the table does, every event
//! must be genuine, which [`check_sound`] verifies from the symbols alone.

use std::collections::HashMap;

use doomloop_engine::chant::{ChantConfig, HashKey};

/// Ways per bucket of the engine's chain table (documented: "a bucket of four").
const WAYS: usize = 4;

/// An event in plain numbers: `window` holds the symbols' hash keys (code points or token
/// ids, which are injective, so comparing keys compares symbols).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub start: u64,
    pub end: u64,
    pub period: Option<u64>,
    pub count: u64,
    pub window: Vec<u64>,
}

pub struct ModelRun {
    pub event: Option<Event>,
    /// No insertion ever met `WAYS` live chains and no two live windows shared a hash tag:
    /// the engine's table cannot have lost or merged a chain, so its verdict must be the
    /// model's.
    pub exact: bool,
}

/// The largest power of two <= min(32, window + repeats) (README: "fewer, a power of two,
/// when `content_chunk_size + max_repeated_chunks` is below 32").
pub fn anchor_span(window: u64, repeats: u64) -> usize {
    let limit = window.saturating_add(repeats).clamp(1, 32);
    1usize << (63 - limit.leading_zeros())
}

fn periodic(s: &[u64], first: usize, last: usize, q: usize) -> bool {
    (first + q..=last).all(|p| s[p] == s[p - q])
}

/// `symbol_key` is what the window hash takes of a symbol (`Symbol::key`).
pub fn model(
    symbols: &[u64],
    symbol_key: &dyn Fn(u64) -> u32,
    blank: &dyn Fn(u64) -> bool,
    config: &ChantConfig,
    key: HashKey,
) -> ModelRun {
    let w = config.window as usize;
    let repeats = config.min_repeats;
    let max_distance = (config.max_period + config.window - 1) as usize;
    let history = (config.min_repeats + 1) * max_distance as u64 + config.window;
    let (base, salt) = (key.base | 1, key.salt);
    let n = symbols.len();
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0u64);
    for &x in symbols {
        let last = prefix.last().copied().unwrap_or(0);
        prefix.push(
            last.wrapping_mul(base)
                .wrapping_add(u64::from(symbol_key(x)))
                .wrapping_add(salt),
        );
    }
    let base_w = base.wrapping_pow(w as u32);
    let span = anchor_span(config.window, repeats);
    // Ranks of the windows seen so far (None: whitespace only).
    let mut ranks: Vec<Option<u64>> = Vec::new();
    // Window -> (last counted position, gap, count).
    let mut chains: HashMap<&[u64], (usize, usize, u64)> = HashMap::new();
    // For each position that is some chain's last counted occurrence: that window's hash.
    let mut last_hash: Vec<Option<u32>> = vec![None; n];
    let mut exact = true;
    if w == 0 || n < w {
        return ModelRun { event: None, exact };
    }
    for i in w - 1..n {
        let win = &symbols[i + 1 - w..=i];
        // The hash is mod 2^32: the low half of the same polynomial mod 2^64.
        let hash = prefix[i + 1].wrapping_sub(prefix[i + 1 - w].wrapping_mul(base_w)) as u32;
        let rank = if config.ignore_whitespace && win.iter().all(|&c| blank(c)) {
            None
        } else {
            Some(u64::from(hash >> 2))
        };
        let earlier_min = ranks.iter().rev().take(span).flatten().min().copied();
        ranks.push(rank);
        let Some(rank) = rank else { continue };
        if earlier_min.is_some_and(|m| rank > m) {
            continue;
        }
        // The chains live at this lookup (their last counted occurrence within reach).
        let from = i.saturating_sub(max_distance);
        let mut live = 0;
        for (at, h) in last_hash[from..i].iter().enumerate() {
            let Some(h) = *h else { continue };
            live += 1;
            let at = from + at;
            if h == hash && symbols[at + 1 - w..=at] != *win {
                exact = false; // two live windows share the engine's 32-bit tag
            }
        }
        let chain = chains.get(win).copied();
        let updated = match chain {
            Some((last, _, _)) if i - last > max_distance => None,
            Some((last, _, _)) if i - last < w => continue,
            other => other,
        };
        let (gap, count) = match updated {
            None => {
                if live >= WAYS {
                    exact = false; // a new entry may have evicted a live chain
                }
                (0, 1)
            }
            Some((last, gap, old_count)) => {
                let length = gap + w;
                let extends = old_count >= 2
                    && i - last == gap
                    && i + 1 >= gap + length
                    && symbols[i + 1 - gap - length..=i - gap] == symbols[i + 1 - length..=i];
                if extends {
                    (gap, old_count + 1)
                } else {
                    restart(symbols, i, w, repeats, max_distance)
                }
            }
        };
        if let Some((last, _, _)) = chain {
            last_hash[last] = None;
        }
        last_hash[i] = Some(hash);
        chains.insert(win, (i, gap, count));
        if count >= repeats {
            return ModelRun {
                event: Some(event(symbols, i, w, gap, count, history)),
                exact,
            };
        }
    }
    ModelRun { event: None, exact }
}

/// How many times the window ending at `i` occurs at `i`, `i - q`, `i - 2q`, ... with the same
/// text between each two (the symbols from the first one's start to `i` repeat with period
/// `q`), at most `most`.
fn occurrences(s: &[u64], i: usize, q: usize, w: usize, most: u64) -> u64 {
    let mut count = 1;
    while count < most {
        match (i + 1).checked_sub(w + count as usize * q) {
            Some(first) if periodic(s, first, i, q) => count += 1,
            _ => break,
        }
    }
    count
}

/// (gap, count) of the chain a counted occurrence starts when it does not extend its own: the
/// gap from `w` to `max_distance` with the most occurrences, the smallest on a tie; (0, 1) when
/// no gap gives two.
fn restart(s: &[u64], i: usize, w: usize, repeats: u64, max_distance: usize) -> (usize, u64) {
    let mut best = (0, 1);
    for q in w..=max_distance {
        let count = occurrences(s, i, q, w, repeats);
        if count > best.1 {
            best = (q, count);
        }
    }
    best
}

fn event(s: &[u64], i: usize, w: usize, gap: usize, count: u64, history: u64) -> Event {
    let first = i + 1 - w - (count as usize - 1) * gap;
    let period = if count >= 2 {
        (1..=gap).find(|&q| gap.is_multiple_of(q) && periodic(s, first, i, q))
    } else {
        None
    };
    let floor = (i as u64 + 1).saturating_sub(history) as usize;
    let mut start = first;
    if let Some(q) = period {
        while start > floor && s[start - 1] == s[start - 1 + q] {
            start -= 1;
        }
    }
    Event {
        start: start as u64,
        end: i as u64 + 1,
        period: period.map(|q| q as u64),
        count,
        window: s[i + 1 - w..=i].to_vec(),
    }
}

/// Everything an event promises that the symbols alone can confirm, whatever the hash key
/// and the table did: it is a genuine chant, described as the README describes it.
pub fn check_sound(s: &[u64], blank: &dyn Fn(u64) -> bool, config: &ChantConfig, e: &Event) {
    let w = config.window;
    let history = config.history();
    assert_eq!(
        e.count, config.min_repeats,
        "an event has exactly min_repeats occurrences: {e:?}"
    );
    assert!(e.end as usize <= s.len() && e.end >= w && e.start <= e.end - w, "{e:?}");
    let (start, end) = (e.start as usize, e.end as usize);
    assert_eq!(
        e.window,
        s[end - w as usize..end],
        "the event's window is the last window"
    );
    if config.ignore_whitespace {
        assert!(!e.window.iter().all(|&c| blank(c)), "whitespace-only window reported");
    }
    let floor = (e.end).saturating_sub(history) as usize;
    assert!(start >= floor, "start {start} before the history floor {floor}");
    match e.period {
        None => {
            assert_eq!(config.min_repeats, 1, "no period only when one occurrence is a chant");
            assert_eq!(start, end - w as usize);
        }
        Some(q) => {
            assert!(config.min_repeats >= 2);
            // The chain's gap is a multiple of q, at least one window and at most max_distance.
            assert!(q >= 1 && q <= config.max_distance(), "{e:?}");
            let q = q as usize;
            let gap_min = q * (w as usize).div_ceil(q);
            assert!(
                end - start >= w as usize + (config.min_repeats as usize - 1) * gap_min,
                "span too short for the chain: {e:?}"
            );
            assert!(
                periodic(s, start, end - 1, q),
                "the reported span does not repeat: {e:?}"
            );
            // q is the smallest period dividing the gap, so no proper divisor of q is one.
            for d in (1..q).filter(|&d| q.is_multiple_of(d)) {
                assert!(
                    !periodic(s, start, end - 1, d),
                    "period {q} is not the smallest ({d}): {e:?}"
                );
            }
            // The start was extended back as far as the period (and the history) allow.
            assert!(
                start == floor || s[start - 1] != s[start - 1 + q],
                "start not extended: {e:?}"
            );
        }
    }
}

/// A chant planted by a fuzz input: `reps` copies of `unit` after `prefix_len` symbols.
pub struct Planted {
    pub prefix_len: usize,
    pub unit_len: usize,
    pub body_len: usize,
}

/// The documented guarantee (docs/chanting.md): "a chant of period p <= max_period that is
/// not only whitespace is reported within `window + min_repeats * (p + window)` symbols of
/// its start", whatever the hash key, including periods in which windows recur (a sentence
/// repeated four and a half times, "abXabY"). Returns `(start, bound)` when the planted chant
/// qualifies.
pub fn guaranteed(
    s: &[u64],
    blank: &dyn Fn(u64) -> bool,
    config: &ChantConfig,
    planted: &Planted,
) -> Option<(u64, u64)> {
    let (p, w) = (planted.unit_len, config.window as usize);
    let body = s.get(planted.prefix_len..planted.prefix_len + planted.body_len)?;
    if p == 0 || p as u64 > config.max_period || body.len() < p {
        return None;
    }
    let unit = &body[..p];
    let at = |o: usize| unit[o % p];
    // Primitive unit: no smaller period of the cycle.
    if (1..p).any(|d| p.is_multiple_of(d) && (0..p).all(|o| at(o) == at(o + d))) {
        return None;
    }
    let windows: Vec<Vec<u64>> = (0..p).map(|o| (o..o + w).map(at).collect()).collect();
    if config.ignore_whitespace && windows.iter().all(|win| win.iter().all(|&c| blank(c))) {
        return None;
    }
    // Where the periodic run really starts (the prefix may already follow the period).
    let end = planted.prefix_len + planted.body_len;
    let mut start = planted.prefix_len;
    while start > 0 && s[start - 1] == s[start - 1 + p] {
        start -= 1;
    }
    let bound = config.window + config.min_repeats * (p as u64 + config.window);
    ((end - start) as u64 >= bound).then_some((start as u64, bound))
}
