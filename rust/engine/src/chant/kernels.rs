//! The vector kernels of the scan: byte matches sixteen at a time (SSE2), the rolling hash of
//! ASCII and Latin-1 text eight windows at a time and the anchor minima (AVX2 where the
//! processor has it), each with its portable twin.

use super::hash::Roll;
use super::{BATCH, NO_RANK, SPAN};

/// Bit j set when `bytes[at + j] == byte`, for the 16 bytes from `at` (none when there are not
/// 16): one compare of two 128-bit vectors (SSE2 is part of x86-64).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn byte_matches(bytes: &[u8], at: usize, byte: u8) -> u32 {
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

/// `Slot::matches_back` of 64 bytes (`slots`, and `before` when given) as AVX2 compares: bit
/// k set when `slots[63 - k]` is `last` and `before[63 - k]` is its byte. None for any other
/// length, or where the processor lacks AVX2.
#[inline(always)]
pub(super) fn matches_back_64(slots: &[u8], last: u8, before: Option<(&[u8], u8)>) -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    if let (Ok(slots), Ok(before)) = (
        <&[u8; 64]>::try_from(slots),
        before
            .map(|(b, byte)| <&[u8; 64]>::try_from(b).map(|b| (b, byte)))
            .transpose(),
    ) {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor supports AVX2, checked just above.
            return Some(unsafe { matches_back_avx2(slots, last, before) });
        }
    }
    let _ = (slots, last, before);
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn matches_back_avx2(slots: &[u8; 64], last: u8, before: Option<(&[u8; 64], u8)>) -> u64 {
    use std::arch::x86_64::{
        _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let equal = |bytes: &[u8; 64], byte: u8| {
        let wanted = _mm256_set1_epi8(byte as i8);
        // SAFETY: both halves are 32 bytes of `bytes`, what the unaligned loads read; AVX2 is
        // enabled for this function.
        unsafe {
            (
                _mm256_cmpeq_epi8(_mm256_loadu_si256(bytes.as_ptr().cast()), wanted),
                _mm256_cmpeq_epi8(_mm256_loadu_si256(bytes.as_ptr().add(32).cast()), wanted),
            )
        }
    };
    let (mut low, mut high) = equal(slots, last);
    if let Some((before, byte)) = before {
        let (b_low, b_high) = equal(before, byte);
        (low, high) = (_mm256_and_si256(low, b_low), _mm256_and_si256(high, b_high));
    }
    // Bit p of the mask is slot p; the caller counts from the end.
    let mask = u64::from(_mm256_movemask_epi8(low) as u32) | u64::from(_mm256_movemask_epi8(high) as u32) << 32;
    mask.reverse_bits()
}

/// `byte_matches` elsewhere.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn byte_matches(bytes: &[u8], at: usize, byte: u8) -> u32 {
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

/// Runs shorter than this take the scalar loop.
const SHORT_RUN: usize = 32;

/// `Roll::run` over code points below 256 held as bytes, as vector code where the processor
/// has AVX2 (false elsewhere: the caller then takes the scalar loop). `entering`, `leaving`,
/// `hashes` and `ranks` are of one length (the shortest counts).
#[inline(always)]
pub(super) fn roll_bytes(
    roll: &mut Roll,
    entering: &[u8],
    leaving: &[u8],
    hashes: &mut [u32],
    ranks: &mut [i32],
) -> bool {
    // A token-sized run costs less one symbol at a time than the vector constants' setup.
    #[cfg(target_arch = "x86_64")]
    if entering.len() >= SHORT_RUN
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("popcnt")
    {
        // SAFETY: the processor supports AVX2 and POPCNT, checked just above.
        unsafe { roll_bytes_avx2(roll, entering, leaving, hashes, ranks) };
        return true;
    }
    let _ = (roll, entering, leaving, hashes, ranks);
    false
}

/// The hashes of a run, eight windows a vector of 32-bit lanes: with `a[k]` what the k-th
/// step adds (`Roll::step`: its symbol in, the one a window before out), `h[k] = h[k - 1] *
/// base + a[k]`, so for eight steps from `h`: the prefix sums `a[k] + a[k - 1] b + ... + a[0]
/// b^k` (three shifted multiply-adds, by lanes 1, 2 and 4) plus `h * [b, b^2, ..., b^8]`.
/// Then the whitespace runs, from bitmasks of 64 symbols at a time (`blank_runs`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
fn roll_bytes_avx2(roll: &mut Roll, entering: &[u8], leaving: &[u8], hashes: &mut [u32], ranks: &mut [i32]) {
    use std::arch::x86_64::{
        _mm256_add_epi32, _mm256_cvtepu8_epi32, _mm256_cvtsi256_si32, _mm256_mullo_epi32, _mm256_permutevar8x32_epi32,
        _mm256_set1_epi32, _mm256_setr_epi32, _mm256_srli_epi32, _mm256_storeu_si256, _mm256_sub_epi32,
        _mm_cvtsi64_si128,
    };
    let n = entering.len().min(leaving.len()).min(hashes.len()).min(ranks.len());
    let b = roll.base;
    let power = |k: u32| b.wrapping_pow(k) as i32;
    let splat = |x: u32| _mm256_set1_epi32(x as i32);
    // Lane k takes lane k - 1, k - 2 or k - 4 (lane 0 where there is none: its multiplier
    // below is 0, which drops it).
    let by_one = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
    let by_two = _mm256_setr_epi32(0, 0, 0, 1, 2, 3, 4, 5);
    let by_four = _mm256_setr_epi32(0, 0, 0, 0, 0, 1, 2, 3);
    let (b1, b2, b4) = (power(1), power(2), power(4));
    let times_one = _mm256_setr_epi32(0, b1, b1, b1, b1, b1, b1, b1);
    let times_two = _mm256_setr_epi32(0, 0, b2, b2, b2, b2, b2, b2);
    let times_four = _mm256_setr_epi32(0, 0, 0, 0, b4, b4, b4, b4);
    let powers = _mm256_setr_epi32(
        power(1),
        power(2),
        power(3),
        power(4),
        power(5),
        power(6),
        power(7),
        power(8),
    );
    let last_lane = _mm256_set1_epi32(7);
    let out = splat(roll.window_power);
    // What every step adds besides its symbols: the salt in, the salt a window ago out.
    let constant = splat(roll.salt.wrapping_sub(roll.salt.wrapping_mul(roll.window_power)));
    let load = |bytes: &[u8]| {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(bytes);
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(eight)))
    };
    let mut last = splat(roll.hash);
    let groups = n / 8;
    for (((e, l), h), r) in entering
        .chunks_exact(8)
        .zip(leaving.chunks_exact(8))
        .zip(hashes.chunks_exact_mut(8))
        .zip(ranks.chunks_exact_mut(8))
        .take(groups)
    {
        let add = _mm256_add_epi32(_mm256_sub_epi32(load(e), _mm256_mullo_epi32(load(l), out)), constant);
        let sums = _mm256_add_epi32(
            add,
            _mm256_mullo_epi32(_mm256_permutevar8x32_epi32(add, by_one), times_one),
        );
        let sums = _mm256_add_epi32(
            sums,
            _mm256_mullo_epi32(_mm256_permutevar8x32_epi32(sums, by_two), times_two),
        );
        let sums = _mm256_add_epi32(
            sums,
            _mm256_mullo_epi32(_mm256_permutevar8x32_epi32(sums, by_four), times_four),
        );
        let next = _mm256_add_epi32(sums, _mm256_mullo_epi32(last, powers));
        last = _mm256_permutevar8x32_epi32(next, last_lane);
        // SAFETY: `h` and `r` are 8 u32 and 8 i32 (32 bytes each), what the unaligned stores
        // write; AVX2 is enabled for this function.
        unsafe {
            _mm256_storeu_si256(h.as_mut_ptr().cast(), next);
            _mm256_storeu_si256(r.as_mut_ptr().cast(), _mm256_srli_epi32::<2>(next));
        }
    }
    roll.hash = _mm256_cvtsi256_si32(last) as u32;
    let done = groups * 8;
    // The last few hashes one by one (the whitespace run is followed below, from the start).
    let blank_run = roll.blank_run;
    for (((&e, &l), h), r) in entering
        .iter()
        .zip(leaving)
        .zip(hashes.iter_mut())
        .zip(ranks.iter_mut())
        .take(n)
        .skip(done)
    {
        let (hash, _) = roll.step(u32::from(e), Some(u32::from(l)));
        *h = hash;
        *r = super::hash::rank(hash);
    }
    roll.blank_run = blank_run;
    blank_runs(roll, entering.get(..n).unwrap_or_default(), ranks);
}

/// Bit k set when `bytes[k]`, a code point, is whitespace (at most 64 bytes; 32 at a time
/// as vector compares).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn blank_mask(bytes: &[u8]) -> u64 {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi8, _mm256_sub_epi8,
    };
    let mut mask = 0u64;
    let mut halves = bytes.chunks_exact(32);
    for (k, half) in halves.by_ref().enumerate().take(2) {
        // SAFETY: `half` holds the 32 bytes the unaligned load reads; AVX2 is enabled for
        // this function.
        let x = unsafe { _mm256_loadu_si256(half.as_ptr().cast()) };
        // Tab to carriage return (9..=13), space, NEL (0x85) and no-break space (0xA0).
        let controls = _mm256_sub_epi8(x, _mm256_set1_epi8(9));
        let control = _mm256_cmpeq_epi8(_mm256_min_epu8(controls, _mm256_set1_epi8(4)), controls);
        let other = _mm256_or_si256(
            _mm256_cmpeq_epi8(x, _mm256_set1_epi8(b' ' as i8)),
            _mm256_or_si256(
                _mm256_cmpeq_epi8(x, _mm256_set1_epi8(0x85u8 as i8)),
                _mm256_cmpeq_epi8(x, _mm256_set1_epi8(0xA0u8 as i8)),
            ),
        );
        let bits = _mm256_movemask_epi8(_mm256_or_si256(control, other)) as u32;
        mask |= u64::from(bits) << (32 * k);
    }
    let done = bytes.len() - halves.remainder().len();
    for (k, &byte) in bytes.iter().enumerate().skip(done).take(64 - done.min(64)) {
        mask |= u64::from(super::is_white_space(u32::from(byte))) << k;
    }
    mask
}

/// The whitespace runs of the run `entering` (whose window ranks are in `ranks`): the run at
/// its end goes to `roll.blank_run`, and each window that is whitespace only (a run of at
/// least `blank_limit` ends there) gets NO_RANK. 64 symbols at a time from a bitmask: only
/// a run that could reach the limit is followed symbol by symbol.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
fn blank_runs(roll: &mut Roll, entering: &[u8], ranks: &mut [i32]) {
    let limit = roll.blank_limit;
    for (bytes, ranks) in entering.chunks(64).zip(ranks.chunks_mut(64)) {
        let c = bytes.len() as u32;
        let mask = blank_mask(bytes);
        let all = u64::MAX >> (64 - c);
        // The longest run in this piece is the one carried in (with the leading blanks), or
        // one within the piece: `within` keeps bit p when bits p.. p + limit - 1 are set.
        let leading = u64::from(mask.trailing_ones());
        let mut within = 0;
        // A piece with fewer blanks than the limit holds no such run (the usual case: one
        // popcount instead of the doubling shifts).
        if limit <= 64 && u64::from(mask.count_ones()) >= limit {
            within = mask;
            let mut width = 1;
            while width * 2 <= limit {
                within &= within >> width;
                width *= 2;
            }
            if width < limit {
                within &= within >> (limit - width);
            }
        }
        if within != 0 || roll.blank_run.saturating_add(leading) >= limit {
            let mut run = roll.blank_run;
            for (k, rank) in ranks.iter_mut().enumerate() {
                run = (run + 1) & ((mask >> k) & 1).wrapping_neg();
                if run >= limit {
                    *rank = NO_RANK;
                }
            }
            roll.blank_run = run;
        } else if mask == all {
            roll.blank_run += u64::from(c);
        } else {
            // The blanks after the piece's last non-blank.
            roll.blank_run = u64::from((!mask << (64 - c)).leading_zeros());
        }
    }
}

/// Window ranks: `SPAN` positions before a batch, then the batch's.
pub(super) type Ranks = [i32; SPAN + BATCH];

/// A buffer of the minima passes: `Ranks` and one vector more, so a pass reads and writes
/// whole vectors up to its last minimum (what lies past it is never used).
pub(super) type Minima = [i32; SPAN + BATCH + 8];

#[inline(always)]
fn min_pairs(target: &mut [i32], source: &[i32], width: usize) {
    let ahead = source.get(width..).unwrap_or_default();
    for ((out, &a), &b) in target.iter_mut().zip(source).zip(ahead) {
        *out = a.min(b);
    }
}

/// One bit per window of a batch.
pub(super) type Anchors = [u64; BATCH / 64];

/// Bit j of the result is set when the batch's j-th window is an anchor: a window no greater
/// than any of the `span` before it. `ranks` holds the ranks of the `SPAN` positions before
/// the batch, then the batch's. Slice passes the compiler turns into vector code (with AVX2
/// where the processor has it: twice the lanes, a one-instruction minimum).
pub(super) fn anchors(ranks: &[i32], span: usize, minima: &mut [Minima; 2]) -> Anchors {
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

/// `anchors_portable` as vector code: the minima of 8 consecutive ranks by three doubling
/// passes, the minimum of the `span` before each window from `span / 8` of them, and the
/// anchor bits eight at a time from compares of that with the windows' ranks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn anchors_avx2(ranks: &[i32], span: usize, minima: &mut [Minima; 2]) -> Anchors {
    match span {
        8 => anchors_from_eights::<1>(ranks, minima),
        16 => anchors_from_eights::<2>(ranks, minima),
        32 => anchors_from_eights::<4>(ranks, minima),
        _ => anchors_portable(ranks, span, minima),
    }
}

/// `anchors_avx2` for a span of `8 * PARTS` windows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn anchors_from_eights<const PARTS: usize>(ranks: &[i32], minima: &mut [Minima; 2]) -> Anchors {
    use std::arch::x86_64::{
        __m256i, _mm256_castsi256_ps, _mm256_cmpeq_epi32, _mm256_cmpgt_epi32, _mm256_loadu_si256, _mm256_min_epi32,
        _mm256_movemask_ps, _mm256_or_si256, _mm256_set1_epi32, _mm256_storeu_si256,
    };
    let span = 8 * PARTS;
    let from = ranks.get(SPAN - span..).unwrap_or_default();
    let [a, b] = minima;
    if let Some(start) = a.get_mut(..from.len()) {
        start.copy_from_slice(from);
    }
    let load = |values: &[i32], at: usize| {
        values.get(at..at + 8).map(|eight| {
            // SAFETY: `eight` is 8 i32 (32 bytes), what the unaligned load reads; AVX2 is
            // enabled for this function.
            unsafe { _mm256_loadu_si256(eight.as_ptr().cast()) }
        })
    };
    // target[k] = min(source[k], source[k + width]) a vector at a time, for every k below
    // `SPAN + BATCH` (whole vectors over the fixed buffers: the loop has no bounds to check,
    // and minima past `count - width` are never read).
    let pass = |target: &mut Minima, source: &Minima, width: usize| {
        let ahead = source.get(width..).unwrap_or_default();
        for ((out, x), y) in target
            .chunks_exact_mut(8)
            .zip(source.chunks_exact(8))
            .zip(ahead.chunks_exact(8))
        {
            // SAFETY: `out`, `x` and `y` are 8 i32 (32 bytes) each, what the unaligned loads
            // read and the store writes; AVX2 is enabled for this function.
            unsafe {
                let minimum = _mm256_min_epi32(
                    _mm256_loadu_si256(x.as_ptr().cast()),
                    _mm256_loadu_si256(y.as_ptr().cast()),
                );
                _mm256_storeu_si256(out.as_mut_ptr().cast(), minimum);
            }
        }
    };
    // Then `b` holds the minimum of each 8 consecutive ranks, from each.
    pass(b, a, 1);
    pass(a, b, 2);
    pass(b, a, 4);
    let eights: &Minima = b;
    let earlier = |j: usize| -> Option<__m256i> {
        let mut minimum = load(eights, j)?;
        for part in 1..PARTS {
            minimum = _mm256_min_epi32(minimum, load(eights, j + 8 * part)?);
        }
        Some(minimum)
    };
    let batch_ranks = ranks.get(SPAN..).unwrap_or_default();
    let n = batch_ranks.len();
    let none = _mm256_set1_epi32(NO_RANK);
    let mut words = [0u64; BATCH / 64];
    let mut j = 0;
    while j + 8 <= n {
        let (Some(rank), Some(before)) = (load(batch_ranks, j), earlier(j)) else {
            break;
        };
        // Not an anchor: a greater rank than one before it, or no window.
        let not = _mm256_or_si256(_mm256_cmpgt_epi32(rank, before), _mm256_cmpeq_epi32(rank, none));
        let bits = !_mm256_movemask_ps(_mm256_castsi256_ps(not)) as u64 & 0xFF;
        if let Some(word) = words.get_mut(j / 64) {
            *word |= bits << (j % 64);
        }
        j += 8;
    }
    // The last few windows one by one.
    for (k, &rank) in batch_ranks.iter().enumerate().skip(j) {
        let before = (0..PARTS)
            .map(|part| eights.get(k + 8 * part).copied().unwrap_or(NO_RANK))
            .fold(NO_RANK, i32::min);
        if let Some(word) = words.get_mut(k / 64) {
            *word |= u64::from((rank != NO_RANK) & (rank <= before)) << (k % 64);
        }
    }
    words
}

/// The anchor bits of the batch's windows from the `from`-th on (`earlier[j]`: the minimum
/// rank of the windows before the j-th).
#[inline(always)]
fn anchor_bits(words: &mut Anchors, batch_ranks: &[i32], earlier: &[i32], from: usize) {
    for (j, (&rank, &earlier)) in batch_ranks.iter().zip(earlier).enumerate().skip(from) {
        if let Some(word) = words.get_mut(j / 64) {
            *word |= u64::from((rank != NO_RANK) & (rank <= earlier)) << (j % 64);
        }
    }
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
fn anchors_portable(ranks: &[i32], span: usize, minima: &mut [Minima; 2]) -> Anchors {
    let earlier = doubling_minima(ranks, span, minima);
    let mut words = [0u64; BATCH / 64];
    anchor_bits(&mut words, ranks.get(SPAN..).unwrap_or_default(), earlier, 0);
    words
}

/// earlier[j]: the minimum rank of the `span` windows before the batch's j-th, by doubling
/// (the minimum of 1, 2, 4, ... consecutive ranks) from the first of them.
#[inline(always)]
fn doubling_minima<'a>(ranks: &[i32], span: usize, minima: &'a mut [Minima; 2]) -> &'a [i32] {
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
    source.get(..count - span).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// These tests compare the vector kernels with the portable code. On a processor without
    /// AVX2 and POPCNT both sides are the portable code and a test proves nothing, so where
    /// `DOOMLOOP_REQUIRE_AVX2` is set (CI sets it) such a processor fails them instead.
    fn vector_kernels_run() {
        #[cfg(target_arch = "x86_64")]
        let present = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt");
        #[cfg(not(target_arch = "x86_64"))]
        let present = false;
        assert!(
            present || std::env::var_os("DOOMLOOP_REQUIRE_AVX2").is_none(),
            "DOOMLOOP_REQUIRE_AVX2 is set but this processor lacks AVX2 or POPCNT: the vector kernels cannot be tested"
        );
    }

    #[test]
    fn vector_hashes_of_bytes_are_the_scalar_hashes() {
        vector_kernels_run();
        let mut next = crate::chant::xorshift(0x2545_F491_4F6C_DD1Du64);
        // Whitespace (tab, space, NEL, no-break space) and near misses (0x1C, 0x08, 0x0E).
        let alphabet = [
            b' ', b' ', b' ', b'\t', b'\n', 0x0D, 0x85, 0xA0, 0x1C, 0x08, 0x0E, b'a', b'b', 0xFF,
        ];
        for limit in [1, 2, 3, 5, 31, 32, 33, 50, 63, 64, 65, 100, 200, u64::MAX] {
            for _ in 0..60 {
                let n = (next() % 300) as usize;
                // Long blank stretches in some runs, so windows of every limit are whitespace only.
                let blank_odds = next() % 4;
                let bytes: Vec<u8> = (0..2 * n)
                    .map(|_| {
                        let r = next();
                        if r % 4 < blank_odds {
                            b' '
                        } else {
                            alphabet[(r >> 8) as usize % alphabet.len()]
                        }
                    })
                    .collect();
                let (entering, leaving) = (&bytes[n..], &bytes[..n]);
                let start = Roll {
                    base: next() as u32 | 1,
                    salt: next() as u32,
                    window_power: next() as u32,
                    blank_limit: limit,
                    hash: next() as u32,
                    blank_run: [0, 1, 49, 63, 64, 199, 1000][(next() % 7) as usize],
                };
                let (mut scalar, mut vector) = (start, start);
                let mut expected = (vec![0u32; n], vec![0i32; n]);
                for (k, (&e, &l)) in entering.iter().zip(leaving).enumerate() {
                    let (hash, blank) = scalar.step(u32::from(e), Some(u32::from(l)));
                    expected.0[k] = hash;
                    expected.1[k] = if blank { NO_RANK } else { super::super::hash::rank(hash) };
                }
                let mut got = (vec![0u32; n], vec![0i32; n]);
                if roll_bytes(&mut vector, entering, leaving, &mut got.0, &mut got.1) {
                    assert_eq!(got, expected, "limit {limit} n {n}");
                    assert_eq!((vector.hash, vector.blank_run), (scalar.hash, scalar.blank_run));
                }
            }
        }
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
        let mut minima = [[NO_RANK; SPAN + BATCH + 8]; 2];
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
    fn vector_anchor_bits_are_the_portable_ones() {
        vector_kernels_run();
        let mut next = crate::chant::xorshift(0x2545_F491_4F6C_DD1Du64);
        let (mut minima, mut again) = ([[NO_RANK; SPAN + BATCH + 8]; 2], [[NO_RANK; SPAN + BATCH + 8]; 2]);
        for span in [1, 2, 4, 8, 16, 32] {
            for _ in 0..40 {
                // Batches longer than the span (shorter ones take `anchors_short`), with
                // lengths that are not multiples of eight; ties and positions with no window.
                let n = span + 1 + (next() % (BATCH - span) as u64) as usize;
                let ranks: Vec<i32> = (0..SPAN + n)
                    .map(|_| match next() % 11 {
                        0 => NO_RANK,
                        r => (r % 6) as i32 + [0, 1 << 29][(next() % 2) as usize],
                    })
                    .collect();
                assert_eq!(
                    anchors(&ranks, span, &mut minima),
                    anchors_portable(&ranks, span, &mut again),
                    "{span} {n}"
                );
            }
        }
    }

    #[test]
    fn vector_matches_back_are_the_matches() {
        vector_kernels_run();
        let mut next = crate::chant::xorshift(0x1234_5678_9ABC_DEF1u64);
        for _ in 0..2000 {
            let state = next();
            let bytes: Vec<u8> = (0..128)
                .map(|k| [b' ', b'a', 0x80, 0xFF][(state >> (k % 60)) as usize % 4])
                .collect();
            let (slots, before) = (&bytes[64..], &bytes[..64]);
            for (last, first) in [(b' ', b' '), (b'a', 0x80), (0xFF, b'x')] {
                for with_before in [false, true] {
                    let expected = (0..64)
                        .filter(|&k| slots[63 - k] == last && (!with_before || before[63 - k] == first))
                        .fold(0u64, |bits, k| bits | 1 << k);
                    let given = with_before.then_some((before, first));
                    if let Some(bits) = matches_back_64(slots, last, given) {
                        assert_eq!(bits, expected, "{bytes:?} {last} {first} {with_before}");
                    }
                }
            }
            assert_eq!(matches_back_64(&bytes[..63], b' ', None), None);
        }
    }

    #[test]
    fn byte_matches_in_words_are_byte_matches() {
        vector_kernels_run();
        let mut next = crate::chant::xorshift(0x1234_5678_9ABC_DEF1u64);
        for _ in 0..2000 {
            let state = next();
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
}
