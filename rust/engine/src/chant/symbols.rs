//! The units a detector reads (code points and token ids), how its history stores them, and
//! the forms text arrives in.

use super::kernels::{byte_matches, matches_back_64};

/// One unit of the stream: a Unicode code point or a token id.
pub trait Symbol: Copy + Eq + Default + std::fmt::Debug {
    /// How the history stores the symbols of a stream while all of them fit it: a byte per
    /// character of ASCII (or Latin-1) text, 32 bits per token id below 2^32. The first
    /// symbol that does not fit widens the history to `Self`.
    type Narrow: Slot<Self>;
    /// The symbol's value for hashing (the window hash is mod 2^32).
    fn key(self) -> u32;
    /// 1 for whitespace, else 0, for `ignore_whitespace` (token ids never are).
    fn blank_bit(self) -> u64;
    /// 0 when the symbol fits `Narrow`.
    fn wide_bits(self) -> u64;
}

/// A slot of the history holding a symbol `S`.
pub trait Slot<S>: Copy + Eq + Default + std::fmt::Debug {
    /// The slot for `symbol`, which fits it (see `Symbol::wide_bits`).
    fn store(symbol: S) -> Self;
    fn load(self) -> S;

    /// Bit k set when `slots[n - 1 - k]` is `last` and, given `before` (slots of the same
    /// length `n`, each a fixed distance before its counterpart), `before[n - 1 - k]` is its
    /// symbol (at most 64 slots, read from the end; matches are rare, so a branch per slot).
    #[inline(always)]
    fn matches_back(slots: &[Self], last: Self, before: Option<(&[Self], Self)>) -> u64 {
        let mut bits = 0;
        match before {
            Some((before, previous)) => {
                for (k, (&s, &b)) in slots.iter().rev().zip(before.iter().rev()).enumerate() {
                    if s == last && b == previous {
                        bits |= 1 << k;
                    }
                }
            }
            None => {
                for (k, &s) in slots.iter().rev().enumerate() {
                    if s == last {
                        bits |= 1 << k;
                    }
                }
            }
        }
        bits
    }

    /// How many slots at the ends of `x` and `y` (of one length) are equal.
    #[inline(always)]
    fn same_ends(x: &[Self], y: &[Self]) -> usize {
        x.iter().rev().zip(y.iter().rev()).take_while(|(a, b)| a == b).count()
    }

    /// The slots as bytes when each is a code point below 256 (its key is the byte and it is
    /// whitespace exactly when `is_white_space` says so): the hash pass then runs as vector
    /// code over the bytes. None for every other slot.
    #[inline(always)]
    fn code_point_bytes(_slots: &[Self]) -> Option<&[u8]> {
        None
    }
}

impl<S: Symbol> Slot<S> for S {
    #[inline(always)]
    fn store(symbol: S) -> Self {
        symbol
    }

    #[inline(always)]
    fn load(self) -> S {
        self
    }
}

/// A code point below 256 (ASCII and Latin-1).
impl Slot<u32> for u8 {
    #[inline(always)]
    fn store(symbol: u32) -> Self {
        symbol as u8
    }

    #[inline(always)]
    fn load(self) -> u32 {
        u32::from(self)
    }

    /// Sixty-four bytes at once where the processor has AVX2, else sixteen at a time (a
    /// restart scans up to `max_distance` of them).
    #[inline(always)]
    fn matches_back(slots: &[u8], last: u8, before: Option<(&[u8], u8)>) -> u64 {
        if let Some(bits) = matches_back_64(slots, last, before) {
            return bits;
        }
        let n = slots.len();
        let mut bits = 0;
        let mut done = 0;
        while done + 16 <= n {
            let at = n - done - 16;
            let mut matches = byte_matches(slots, at, last);
            if let Some((before, previous)) = before {
                matches &= byte_matches(before, at, previous);
            }
            while matches != 0 {
                // Bit j is slot at + j, which is done + 15 - j from the end.
                let j = matches.trailing_zeros() as usize;
                bits |= 1 << (done + 15 - j);
                matches &= matches - 1;
            }
            done += 16;
        }
        for k in done..n {
            let matched = slots.get(n - 1 - k) == Some(&last)
                && before.is_none_or(|(before, previous)| before.get(n - 1 - k) == Some(&previous));
            if matched {
                bits |= 1 << k;
            }
        }
        bits
    }

    #[inline(always)]
    fn code_point_bytes(slots: &[u8]) -> Option<&[u8]> {
        Some(slots)
    }

    /// Eight bytes at a time (the text of a repeat is compared to its end).
    #[inline(always)]
    fn same_ends(x: &[u8], y: &[u8]) -> usize {
        let mut same = 0;
        let (mut xs, mut ys) = (x.rchunks_exact(8), y.rchunks_exact(8));
        for (a, b) in xs.by_ref().zip(ys.by_ref()) {
            let (mut left, mut right) = ([0u8; 8], [0u8; 8]);
            left.copy_from_slice(a);
            right.copy_from_slice(b);
            let differ = u64::from_le_bytes(left) ^ u64::from_le_bytes(right);
            if differ != 0 {
                // The highest differing byte is the last (little-endian).
                return same + (differ.leading_zeros() / 8) as usize;
            }
            same += 8;
        }
        same + xs
            .remainder()
            .iter()
            .rev()
            .zip(ys.remainder().iter().rev())
            .take_while(|(a, b)| a == b)
            .count()
    }
}

/// A token id below 2^32.
impl Slot<Token> for u32 {
    #[inline(always)]
    fn store(symbol: Token) -> Self {
        symbol.0 as u32
    }

    #[inline(always)]
    fn load(self) -> Token {
        Token(u64::from(self))
    }
}

/// A Unicode code point (lone surrogates included, so any Python `str` can be fed).
impl Symbol for u32 {
    type Narrow = u8;

    #[inline(always)]
    fn key(self) -> u32 {
        self
    }

    #[inline(always)]
    fn wide_bits(self) -> u64 {
        // Zero for every byte: the check that ASCII text fits compiles to nothing.
        u64::from(self >> 8)
    }

    #[inline(always)]
    fn blank_bit(self) -> u64 {
        // ASCII, nearly all text, by table with no branch on the character (spaces are
        // irregular); the branch on `< 0x80` is predictable.
        match ASCII_BLANK.get(self as usize) {
            Some(&bit) => u64::from(bit),
            None => u64::from(is_white_space(self)),
        }
    }
}

/// A token id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Token(pub u64);

impl Symbol for Token {
    type Narrow = u32;

    #[inline(always)]
    fn wide_bits(self) -> u64 {
        self.0 >> 32
    }

    /// The id's low half with a multiplicative mix of its high half folded in (`lo ^ ((hi *
    /// 0x9E3779B97F4A7C15) >> 32)`, which leaves every id below 2^32 as it is). The window
    /// hash is a polynomial mod 2^32, where a bit of a symbol only ever moves up: two keys
    /// that differ by 2^31 shift a window's hash by the same 2^31 at every position whatever
    /// the secret key, so two such substitutions in a window give one hash for every key, and
    /// a chant made of such windows can chain at alternating gaps and never be reported (the
    /// chant_tokens fuzz target found this with 0 and 2^63 when the top bits were dropped).
    /// The mix keeps the ids agents send apart from that: small ids, their negatives as
    /// 64-bit values, and ids near 2^63 get distinct keys, none 2^31 from another's. Ids
    /// crafted against it still collide (no unkeyed fold of 64 bits into 32 can avoid it);
    /// that can hide a chant, never raise a false alarm.
    #[inline(always)]
    fn key(self) -> u32 {
        let (low, high) = (self.0 as u32, self.0 >> 32);
        low ^ (high.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
    }

    #[inline(always)]
    fn blank_bit(self) -> u64 {
        0
    }
}

/// Unicode White_Space (what Rust's `char::is_whitespace` accepts), for any code point.
#[inline(always)]
pub fn is_white_space(c: u32) -> bool {
    if c < 64 {
        (ASCII_WHITE_SPACE >> c) & 1 == 1
    } else {
        char::from_u32(c).is_some_and(char::is_whitespace)
    }
}

/// The ASCII White_Space characters (all below 64), one bit each.
const ASCII_WHITE_SPACE: u64 = (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 13) | (1 << 32);

/// 1 for each ASCII White_Space character.
static ASCII_BLANK: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut c = 0;
    while c < 64 {
        table[c] = ((ASCII_WHITE_SPACE >> c) & 1) as u8;
        c += 1;
    }
    table
};

/// Text for a detector of code points, in the forms a caller may hold it.
#[derive(Clone, Copy, Debug)]
pub enum TextInput<'a> {
    /// ASCII text: its bytes are its code points (the fastest form).
    Ascii(&'a [u8]),
    /// Any UTF-8 text.
    Utf8(&'a str),
    /// Code points (lone surrogates included).
    CodePoints(&'a [u32]),
}

impl TextInput<'_> {
    /// Length in UTF-8 bytes, or code points (ASCII: both).
    pub fn len(&self) -> usize {
        match self {
            TextInput::Ascii(b) => b.len(),
            TextInput::Utf8(s) => s.len(),
            TextInput::CodePoints(c) => c.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_matches_are_found_eight_at_a_time() {
        let mut next = crate::chant::xorshift(0x2545_F491_4F6C_DD1Du64);
        for _ in 0..2000 {
            let state = next();
            let len = (state % 65) as usize;
            // Few distinct bytes (so matches are common), high bit set in some.
            let bytes: Vec<u8> = (0..len)
                .map(|k| [0, 1, 0x7F, 0x80, 0xFF, b'e'][(state >> (k % 60)) as usize % 6])
                .collect();
            for slot in [0u8, 1, 0x7F, 0x80, 0xFF, b'e', b'x'] {
                let expected = bytes
                    .iter()
                    .rev()
                    .enumerate()
                    .fold(0u64, |bits, (k, &b)| bits | (u64::from(b == slot) << k));
                assert_eq!(
                    <u8 as Slot<u32>>::matches_back(&bytes, slot, None),
                    expected,
                    "{bytes:?} {slot}"
                );
                // With the slot before each: bytes[1..] matched, bytes[..n-1] the ones before.
                if let (Some(later), Some(earlier)) = (bytes.get(1..), bytes.get(..len.saturating_sub(1))) {
                    for previous in [0u8, 0x80, b'e'] {
                        let both = later
                            .iter()
                            .rev()
                            .zip(earlier.iter().rev())
                            .enumerate()
                            .fold(0u64, |bits, (k, (&b, &p))| {
                                bits | (u64::from(b == slot && p == previous) << k)
                            });
                        let got = <u8 as Slot<u32>>::matches_back(later, slot, Some((earlier, previous)));
                        assert_eq!(got, both, "{bytes:?} {slot} {previous}");
                    }
                }
            }
        }
    }

    #[test]
    fn byte_runs_are_compared_eight_at_a_time() {
        let mut next = crate::chant::xorshift(0x9E37_79B9_7F4A_7C15u64);
        for _ in 0..2000 {
            let state = next();
            let len = (state % 40) as usize;
            let x: Vec<u8> = (0..len).map(|k| (k as u8).wrapping_mul(31)).collect();
            let mut y = x.clone();
            // Change one byte (or none) somewhere.
            let at = (state >> 8) as usize % (len + 1);
            if let Some(b) = y.get_mut(at) {
                *b ^= 1 << ((state >> 20) % 8);
            }
            let expected = x.iter().rev().zip(y.iter().rev()).take_while(|(a, b)| a == b).count();
            assert_eq!(<u8 as Slot<u32>>::same_ends(&x, &y), expected, "{x:?} {y:?}");
        }
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
