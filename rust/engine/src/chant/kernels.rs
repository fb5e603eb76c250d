//! The vector kernels of the scan: byte matches sixteen at a time (SSE2) and the anchor
//! minima (AVX2 where the processor has it), each with its portable twin.

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
