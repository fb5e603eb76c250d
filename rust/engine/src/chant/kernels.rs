//! The vector kernels of the scan: byte matches sixteen at a time (SSE2), the rolling hash of
//! ASCII and Latin-1 text four windows at a time and the anchor minima (AVX2 where the
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
    hashes: &mut [u64],
    ranks: &mut [i32],
) -> bool {
    // A token-sized run costs less one symbol at a time than the vector constants' setup.
    #[cfg(target_arch = "x86_64")]
    if entering.len() >= SHORT_RUN && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor supports AVX2, checked just above.
        unsafe { roll_bytes_avx2(roll, entering, leaving, hashes, ranks) };
        return true;
    }
    let _ = (roll, entering, leaving, hashes, ranks);
    false
}

/// The hashes of a run, four windows a vector of 64-bit lanes: with `a[k]` what the k-th
/// step adds (`Roll::step`: its symbol in, the one a window before out), `h[k] = h[k - 1] *
/// base + a[k]`, so for four steps from `h`: `[a0, a1 + a0 b, a2 + a1 b + a0 b^2, ...]` (two
/// shifted multiply-adds) plus `h * [b, b^2, b^3, b^4]`. Then the whitespace runs, from
/// bitmasks of 64 symbols at a time (`blank_runs`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn roll_bytes_avx2(roll: &mut Roll, entering: &[u8], leaving: &[u8], hashes: &mut [u64], ranks: &mut [i32]) {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi64, _mm256_blend_epi32, _mm256_castsi256_si128, _mm256_cvtepu8_epi64,
        _mm256_extract_epi64, _mm256_mul_epu32, _mm256_permute2x128_si256, _mm256_permute4x64_epi64,
        _mm256_permutevar8x32_epi32, _mm256_set1_epi64x, _mm256_setr_epi32, _mm256_setr_epi64x, _mm256_setzero_si256,
        _mm256_slli_epi64, _mm256_srli_epi64, _mm256_storeu_si256, _mm256_sub_epi64, _mm_cvtsi32_si128,
        _mm_storeu_si128,
    };
    let n = entering.len().min(leaving.len()).min(hashes.len()).min(ranks.len());
    let b = roll.base;
    let (b2, b3) = (b.wrapping_mul(b), b.wrapping_mul(b).wrapping_mul(b));
    let splat = |x: u64| _mm256_set1_epi64x(x as i64);
    // x * c mod 2^64 in each lane from 32-bit products, with `high` the lanes of c >> 32.
    let times = |x: __m256i, c: __m256i, high: __m256i| {
        let low = _mm256_mul_epu32(x, c);
        let cross = _mm256_add_epi64(
            _mm256_mul_epu32(_mm256_srli_epi64::<32>(x), c),
            _mm256_mul_epu32(x, high),
        );
        _mm256_add_epi64(low, _mm256_slli_epi64::<32>(cross))
    };
    let (base, base_high) = (splat(b), splat(b >> 32));
    let (square, square_high) = (splat(b2), splat(b2 >> 32));
    let powers = [b, b2, b3, b3.wrapping_mul(b)];
    let power = _mm256_setr_epi64x(powers[0] as i64, powers[1] as i64, powers[2] as i64, powers[3] as i64);
    let power_high = _mm256_srli_epi64::<32>(power);
    let (out, out_high) = (splat(roll.window_power), splat(roll.window_power >> 32));
    // What every step adds besides its symbols: the salt in, the salt a window ago out.
    let constant = splat(roll.salt.wrapping_sub(roll.salt.wrapping_mul(roll.window_power)));
    // Lanes 0, 2, 4, 6: the low halves of four 64-bit lanes.
    let low_halves = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
    let load = |bytes: &[u8]| {
        let mut four = [0u8; 4];
        four.copy_from_slice(bytes);
        _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(i32::from_le_bytes(four)))
    };
    let mut last = splat(roll.hash);
    let groups = n / 4;
    for (((e, l), h), r) in entering
        .chunks_exact(4)
        .zip(leaving.chunks_exact(4))
        .zip(hashes.chunks_exact_mut(4))
        .zip(ranks.chunks_exact_mut(4))
        .take(groups)
    {
        let leaving_keys = load(l);
        let out_terms = _mm256_add_epi64(
            _mm256_mul_epu32(leaving_keys, out),
            _mm256_slli_epi64::<32>(_mm256_mul_epu32(leaving_keys, out_high)),
        );
        let add = _mm256_add_epi64(_mm256_sub_epi64(load(e), out_terms), constant);
        // [0, a0, a1, a2], then [0, 0, s0, s1].
        let one = _mm256_blend_epi32::<0b11>(_mm256_permute4x64_epi64::<0b10_01_00_00>(add), _mm256_setzero_si256());
        let sums = _mm256_add_epi64(add, times(one, base, base_high));
        let two = _mm256_permute2x128_si256::<0x08>(sums, sums);
        let sums = _mm256_add_epi64(sums, times(two, square, square_high));
        let next = _mm256_add_epi64(sums, times(last, power, power_high));
        last = _mm256_permute4x64_epi64::<0xFF>(next);
        let rank_lanes = _mm256_permutevar8x32_epi32(_mm256_srli_epi64::<34>(next), low_halves);
        // SAFETY: `h` is 4 u64 (32 bytes) and `r` 4 i32 (16 bytes), what the unaligned stores
        // write; AVX2 is enabled for this function.
        unsafe {
            _mm256_storeu_si256(h.as_mut_ptr().cast(), next);
            _mm_storeu_si128(r.as_mut_ptr().cast(), _mm256_castsi256_si128(rank_lanes));
        }
    }
    roll.hash = _mm256_extract_epi64::<3>(last) as u64;
    let done = groups * 4;
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
#[target_feature(enable = "avx2")]
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
        if limit <= 64 {
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
pub(super) fn anchors(ranks: &[i32], span: usize, minima: &mut [Ranks; 2]) -> Anchors {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_hashes_of_bytes_are_the_scalar_hashes() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
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
                    base: next() | 1,
                    salt: next(),
                    window_power: next(),
                    blank_limit: limit,
                    hash: next(),
                    blank_run: [0, 1, 49, 63, 64, 199, 1000][(next() % 7) as usize],
                };
                let (mut scalar, mut vector) = (start, start);
                let mut expected = (vec![0u64; n], vec![0i32; n]);
                for (k, (&e, &l)) in entering.iter().zip(leaving).enumerate() {
                    let (hash, blank) = scalar.step(u32::from(e), Some(u32::from(l)));
                    expected.0[k] = hash;
                    expected.1[k] = if blank { NO_RANK } else { super::super::hash::rank(hash) };
                }
                let mut got = (vec![0u64; n], vec![0i32; n]);
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
}
