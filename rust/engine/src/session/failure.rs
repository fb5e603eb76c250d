//! A failure's digest for `retry_storm`: alike actions failing "the same way" even when the
//! error quotes what changed between them (`No matching distribution found for pkg==1.0.7`,
//! a line number, a path, a port).
//!
//! The text is read as words, as the session's text features read them (runs of letters,
//! digits, `_` and non-ASCII bytes; ASCII letters lowercased), except that every digit run is
//! one `0`, in paths too. A word of the result that is also a word of the action's first
//! string argument is masked: an error that echoes the argument says nothing new about the
//! failure. The digest is of the words in order, each masked one as one mark. Of a long
//! text only the head and the tail are read: what failed, and the exception at the end of a
//! traceback.

use crate::fingerprint::{hash_two, word_byte, FNV_OFFSET, FNV_PRIME};

/// Bytes read at the start of a long result's UTF-8 (what failed, for most tools)...
pub const FAILURE_HEAD_BYTES: usize = 4096;

/// ... and at its end (the exception, for a traceback); the middle is left out, so a
/// megabyte of output costs what 8 KiB cost.
pub const FAILURE_TAIL_BYTES: usize = 4096;

/// Bytes of the argument whose words are masked in the result.
pub const FAILURE_ARGUMENT_BYTES: usize = 4096;

/// The digest's tag: a failure digest never equals a result digest.
const FAILURE_TAG: u8 = 0x46;

/// What a masked word hashes as (no word's hash: those are FNV-1a of at least one byte).
const MASKED: u64 = 0;

/// The multiplier that chains the words' hashes (the 64-bit golden ratio, odd).
const CHAIN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The parts of a result's UTF-8 that [`failure_digest`] reads: all of it when it has at
/// most [`FAILURE_HEAD_BYTES`] + [`FAILURE_TAIL_BYTES`] bytes, else its first and its last.
pub fn failure_parts(text: &[u8]) -> (&[u8], &[u8]) {
    match text.len().checked_sub(FAILURE_TAIL_BYTES) {
        Some(tail) if text.len() > FAILURE_HEAD_BYTES + FAILURE_TAIL_BYTES => (
            text.get(..FAILURE_HEAD_BYTES).unwrap_or(text),
            text.get(tail..).unwrap_or(&[]),
        ),
        _ => (text, &[]),
    }
}

/// The digest of a failed action's result text, given as its [`failure_parts`] `head` and
/// `tail` (each read as words of its own), with the words of `argument` (the action's first
/// string argument, empty when it has none; its first [`FAILURE_ARGUMENT_BYTES`]) masked.
pub fn failure_digest(head: &[u8], tail: &[u8], argument: &[u8]) -> u64 {
    let mut masked: Vec<u64> = Vec::new();
    for_each_word(argument.get(..FAILURE_ARGUMENT_BYTES).unwrap_or(argument), |word| {
        masked.push(word)
    });
    masked.sort_unstable();
    masked.dedup();
    // One bit per masked word, by its top bits: most words of a result are looked up no further.
    let filter = masked.iter().fold(0u64, |bits, &word| bits | filter_bit(word));
    // A multiply-rotate chain over the words (order matters), finished by the tagged hash: a
    // streaming hasher's update per word would cost more than reading the word.
    let mut chain = 0u64;
    let mut words = 0u64;
    let mut add = |word: u64| {
        let is_masked = filter & filter_bit(word) != 0 && masked.binary_search(&word).is_ok();
        chain = (chain ^ if is_masked { MASKED } else { word })
            .wrapping_mul(CHAIN)
            .rotate_left(29);
        words += 1;
    };
    for_each_word(head, &mut add);
    for_each_word(tail, &mut add);
    hash_two(FAILURE_TAG, chain, words)
}

#[inline(always)]
fn filter_bit(word: u64) -> u64 {
    1 << (word >> 58)
}

/// Call `emit` with the FNV-1a hash of each word of `text`, in order.
#[inline(always)]
fn for_each_word(text: &[u8], mut emit: impl FnMut(u64)) {
    let mut hash = FNV_OFFSET;
    let mut in_word = false;
    let mut last_was_digit = false;
    for &byte in text {
        let folded = word_byte(byte);
        if folded == 0 {
            if in_word {
                emit(hash);
                hash = FNV_OFFSET;
                in_word = false;
            }
            continue;
        }
        // A run of digits hashes as one `0` (a select, not a branch: digits and letters mix).
        let digit = folded == b'0';
        let next = (hash ^ u64::from(folded)).wrapping_mul(FNV_PRIME);
        hash = if digit & last_was_digit { hash } else { next };
        last_was_digit = digit;
        in_word = true;
    }
    if in_word {
        emit(hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(result: &str, argument: &str) -> u64 {
        let (head, tail) = failure_parts(result.as_bytes());
        failure_digest(head, tail, argument.as_bytes())
    }

    #[test]
    fn numbers_are_folded_everywhere() {
        let a = digest("No matching distribution found for pkg==1.0.7", "");
        assert_eq!(a, digest("No matching distribution found for pkg==1.0.12", ""));
        assert_eq!(
            digest("/tmp/job-17/out.log: busy", ""),
            digest("/tmp/job-4/out.log: busy", "")
        );
        assert_ne!(a, digest("No matching distribution found for pkg==1.0.7 or later", ""));
    }

    #[test]
    fn words_of_the_argument_are_masked() {
        let one = digest("cat: src/parser.py: No such file or directory", "cat src/parser.py");
        let two = digest("cat: src/lexer.py: No such file or directory", "cat src/lexer.py");
        assert_eq!(one, two);
        // Unmasked, the two differ; and a word the argument does not hold is kept.
        assert_ne!(
            digest("cat: src/parser.py: No such file", ""),
            digest("cat: src/lexer.py: No such file", "")
        );
        assert_ne!(one, digest("cat: src/lexer.py: Permission denied", "cat src/lexer.py"));
    }

    #[test]
    fn case_and_punctuation_do_not_matter_but_order_does() {
        assert_eq!(digest("Error: X failed!", ""), digest("error x FAILED", ""));
        assert_ne!(digest("a b", ""), digest("b a", ""));
        assert_ne!(digest("", ""), digest("x", "x"));
        assert_eq!(digest("", "anything"), digest("", ""));
    }

    #[test]
    fn only_the_head_and_the_tail_of_a_long_text_are_read() {
        let middle = "E".repeat(FAILURE_HEAD_BYTES + FAILURE_TAIL_BYTES);
        let side = "E".repeat(FAILURE_HEAD_BYTES);
        assert_eq!(
            digest(&format!("a {side} x {side} b"), ""),
            digest(&format!("a {side} y {side} b"), "")
        );
        assert_ne!(
            digest(&format!("a {middle} z"), ""),
            digest(&format!("b {middle} z"), "")
        );
        assert_ne!(
            digest(&format!("a {middle} y"), ""),
            digest(&format!("a {middle} z"), "")
        );
        // At the limit the text is read whole; one byte over, a word at the cut is two words.
        let whole = "w".repeat(FAILURE_HEAD_BYTES + FAILURE_TAIL_BYTES);
        assert_eq!(failure_parts(whole.as_bytes()), (whole.as_bytes(), &b""[..]));
        let (head, tail) = failure_parts(&whole.as_bytes()[..FAILURE_HEAD_BYTES + 1]);
        assert_eq!((head.len(), tail.len()), (FAILURE_HEAD_BYTES + 1, 0));
        let over = format!("{whole}w");
        let (head, tail) = failure_parts(over.as_bytes());
        assert_eq!((head.len(), tail.len()), (FAILURE_HEAD_BYTES, FAILURE_TAIL_BYTES));
        assert_ne!(digest(&over, ""), digest("w", ""));
        // Only the argument's first bytes are masked.
        let long = format!("{} secret", "a ".repeat(FAILURE_ARGUMENT_BYTES));
        assert_ne!(digest("secret", &long), digest("secret", "secret"));
    }
}
