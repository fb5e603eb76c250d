//! Volatile tokens in tool output: the parts of a result that change from one call to the next
//! while nothing else does (a timestamp, an elapsed time, a pid, a UUID, a hex address, a
//! temporary path), masked so that a poll or a retry whose output differs only in them reads
//! as the same result. docs/tool-loop.md lists the masks; tests/models/volatile_model.py is
//! the same rules in Python.
//!
//! A token starts where the byte before is not a word byte (`A-Z a-z 0-9 _`) and must end
//! where the byte after is not one either. At each such start the rules are tried in order,
//! each reading as far as it can (no backtracking), and the first whose token ends at a word
//! boundary is masked:
//!
//! 1. a UUID: hex groups of 8-4-4-4-12;
//! 2. a hex address: `0x` and at least 4 hex digits;
//! 3. a temporary path: `/tmp/`, `/var/tmp/`, `/var/folders/`, `/private/tmp/` or
//!    `/private/var/` and everything up to whitespace, a quote or a bracket;
//! 4. a temporary name: `tmp` and 6 or more word bytes, at least one a digit (`tmpa1b2c3d4`);
//! 5. a pid: `pid` (any case), up to 3 of ` :=#`, digits;
//! 6. a date `YYYY-MM-DD`, with a time (`T` or a space, then rule 7) if one follows, then a
//!    zone (`Z`, or `+`/`-` and `HH:MM` or `HHMM`) if one follows;
//! 7. a time of day `H:MM` or `HH:MM`, then `:SS` and `.fraction` if they follow, then `Z`;
//! 8. a Unix time: 10 or 13 digits starting with `1`, then `.fraction` if one follows;
//! 9. a duration: digits, `.fraction`, at most one space, and a unit: `ns`, `us`, `ms`, `s`,
//!    `sec`, `secs`, `second`, `seconds`, `min`, `mins`, `minute` or `minutes` (any case);
//! 10. a JSON entry whose key names a volatile quantity ([`is_volatile_quantity`]): a quoted
//!     key of 1 to 64 bytes (no `"`, `\` or newline), spaces or tabs, `:`, spaces or tabs, and
//!     a number (`-`, digits, `.fraction`) or a string with no escapes (`"elapsed_ms": 6400`,
//!     `"updatedAt": "..."`), the form a tool's JSON status takes as text.
//!
//! Each masked token is replaced by one byte, `0xFF`, which no UTF-8 text holds: a masked text
//! never reads as an unmasked one. A text longer than [`MASK_LIMIT`] is left as it is.

/// What a masked token is replaced by.
pub const MASK: u8 = 0xff;

const TEMP_DIRS: [&[u8]; 5] = [
    b"/tmp/",
    b"/var/tmp/",
    b"/var/folders/",
    b"/private/tmp/",
    b"/private/var/",
];
const UNITS: [&[u8]; 12] = [
    b"ns", b"us", b"ms", b"s", b"sec", b"secs", b"second", b"seconds", b"min", b"mins", b"minute", b"minutes",
];

/// Texts longer than this are compared as they are: the masks are for polls, statuses and
/// error messages, and scanning a long output byte by byte would cost far more than hashing it.
pub const MASK_LIMIT: usize = 4096;

/// `text` with its volatile tokens masked, or `None` when it has none or is longer than
/// [`MASK_LIMIT`] (the common case allocates nothing).
pub fn mask(text: &[u8]) -> Option<Vec<u8>> {
    if text.len() > MASK_LIMIT {
        return None;
    }
    let mut masked: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut from = 0;
    while let Some(at) = next_start(text, from) {
        match token_at(text, at) {
            Some(end) => {
                let out = masked.get_or_insert_with(|| Vec::with_capacity(text.len()));
                out.extend_from_slice(&text[copied..at]);
                out.push(MASK);
                copied = end;
                from = end;
            }
            None => from = at + 1,
        }
    }
    masked.map(|mut out| {
        out.extend_from_slice(&text[copied..]);
        out
    })
}

/// Words of a mapping key that name a quantity which changes from one call to the next while
/// nothing else does: a value under such a key (a number or a text) is masked whole.
const QUANTITY_WORDS: [&str; 9] = [
    "pid",
    "ppid",
    "elapsed",
    "duration",
    "uptime",
    "latency",
    "took",
    "timestamp",
    "ts",
];
/// Last words of a key that name a point in time or a unit of time (`created_at`, `startTime`,
/// `wait_ms`).
const TIME_SUFFIXES: [&str; 8] = ["at", "time", "ms", "ns", "us", "sec", "secs", "seconds"];

/// Whether a mapping key names a volatile quantity (docs/tool-loop.md): the key read as words
/// (split at `_`, `-`, `.`, spaces and lower-to-upper case changes, compared in lower case)
/// holds one of `QUANTITY_WORDS` or ends in one of `TIME_SUFFIXES`. `elapsed_ms`, `pid`,
/// `updatedAt` and `startTime` do; `progress`, `status`, `timeout` and `attempts` do not.
pub fn is_volatile_quantity(key: &[u8]) -> bool {
    // Keys are short: a longer one is data, not a field name.
    if key.len() > 64 {
        return false;
    }
    let mut word = [0u8; 64];
    let mut used = 0;
    let mut last_was_lower = false;
    let is_named = |word: &[u8], last: bool| {
        let word = std::str::from_utf8(word).unwrap_or("");
        QUANTITY_WORDS.contains(&word) || (last && TIME_SUFFIXES.contains(&word))
    };
    for &byte in key {
        let separator = matches!(byte, b'_' | b'-' | b'.' | b' ');
        let boundary = separator || (byte.is_ascii_uppercase() && last_was_lower);
        if boundary && used > 0 {
            if is_named(&word[..used], false) {
                return true;
            }
            used = 0;
        }
        last_was_lower = byte.is_ascii_lowercase() || byte.is_ascii_digit();
        if let (false, Some(slot)) = (separator, word.get_mut(used)) {
            *slot = byte.to_ascii_lowercase();
            used += 1;
        }
    }
    used > 0 && is_named(&word[..used], true)
}

/// The first position from `from` where a token may start: a byte a rule starts with, after
/// a byte that is not a word byte (or at the start of the text).
fn next_start(text: &[u8], from: usize) -> Option<usize> {
    if from == 0 && CLASS[usize::from(*text.first()?)] & START != 0 {
        return Some(0);
    }
    // Each position with the byte before it: no state carried from one to the next.
    let first = from.max(1);
    text.get(first - 1..)?
        .windows(2)
        .position(|pair| CLASS[usize::from(pair[1])] & START != 0 && CLASS[usize::from(pair[0])] & WORD == 0)
        .map(|offset| first + offset)
}

/// [`CLASS`] bits: a word byte (`A-Z a-z 0-9 _`); a byte a token can start with.
const WORD: u8 = 1;
const START: u8 = 2;

static CLASS: [u8; 256] = {
    let mut table = [0; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        let word = b.is_ascii_alphanumeric() || b == b'_';
        let start = b.is_ascii_hexdigit() || matches!(b, b'/' | b't' | b'p' | b'P' | b'"');
        table[byte] = if word { WORD } else { 0 } | if start { START } else { 0 };
        byte += 1;
    }
    table
};

#[inline]
fn is_word(byte: u8) -> bool {
    CLASS[usize::from(byte)] & WORD != 0
}

/// A rule: the end of its token starting at the given position, if one does.
type Rule = fn(&[u8], usize) -> Option<usize>;

/// The end of the volatile token starting at `at`, if one does.
fn token_at(text: &[u8], at: usize) -> Option<usize> {
    let ends = |end: usize| text.get(end).is_none_or(|&next| !is_word(next));
    // Each rule starts with one kind of byte: most words are rejected by their first.
    match text[at] {
        b'0'..=b'9' => {
            // The byte after the number tells which rules can go on (in their order): most
            // numbers need one or two looks, not six.
            let number = run(text, at, |b| b.is_ascii_digit());
            let rules: &[Rule] = match text.get(number) {
                Some(b'-') => &[uuid, date, unix_time],
                Some(b':') => &[time_of_day, unix_time],
                Some(b'.' | b' ') => &[unix_time, duration],
                Some(b'x' | b'X') => &[hex_address],
                Some(b'a'..=b'f' | b'A'..=b'F') => &[uuid],
                Some(b'_' | b'0'..=b'9') => &[],
                Some(next) if next.is_ascii_alphabetic() => &[duration],
                _ => &[unix_time],
            };
            rules.iter().filter_map(|rule| rule(text, at)).find(|&end| ends(end))
        }
        b'a'..=b'f' | b'A'..=b'F' => uuid(text, at).filter(|&end| ends(end)),
        b'/' => temp_path(text, at).filter(|&end| ends(end)),
        b't' => temp_name(text, at).filter(|&end| ends(end)),
        b'p' | b'P' => pid(text, at).filter(|&end| ends(end)),
        b'"' => json_quantity(text, at).filter(|&end| ends(end)),
        _ => None,
    }
}

/// The end of the run of bytes from `at` that `pred` accepts.
fn run(text: &[u8], at: usize, pred: impl Fn(u8) -> bool) -> usize {
    text[at.min(text.len())..]
        .iter()
        .position(|&b| !pred(b))
        .map_or(text.len(), |n| at + n)
}

/// `at + n` when exactly `n` bytes from `at` are accepted by `pred` (and there are `n`).
fn exactly(text: &[u8], at: usize, n: usize, pred: impl Fn(u8) -> bool) -> Option<usize> {
    let part = text.get(at..at + n)?;
    part.iter().all(|&b| pred(b)).then_some(at + n)
}

fn byte_is(text: &[u8], at: usize, expected: u8) -> Option<usize> {
    (text.get(at) == Some(&expected)).then_some(at + 1)
}

fn uuid(text: &[u8], at: usize) -> Option<usize> {
    // Its first dash first: a word of 8 hex digits and a dash is rare.
    if text.get(at + 8) != Some(&b'-') {
        return None;
    }
    let mut end = at;
    for (index, size) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if index > 0 {
            end = byte_is(text, end, b'-')?;
        }
        end = exactly(text, end, size, |b| b.is_ascii_hexdigit())?;
    }
    Some(end)
}

fn hex_address(text: &[u8], at: usize) -> Option<usize> {
    if text.get(at) != Some(&b'0') || !matches!(text.get(at + 1), Some(b'x' | b'X')) {
        return None;
    }
    let end = run(text, at + 2, |b| b.is_ascii_hexdigit());
    (end - (at + 2) >= 4).then_some(end)
}

fn temp_path(text: &[u8], at: usize) -> Option<usize> {
    let rest = &text[at..];
    let prefix = TEMP_DIRS.iter().find(|dir| rest.starts_with(dir))?;
    Some(run(text, at + prefix.len(), |b| {
        !(b.is_ascii_whitespace() || b"'\"`<>()[]{},;".contains(&b))
    }))
}

fn temp_name(text: &[u8], at: usize) -> Option<usize> {
    if !text[at..].starts_with(b"tmp") {
        return None;
    }
    let end = run(text, at + 3, is_word);
    let name = &text[at + 3..end];
    (name.len() >= 6 && name.iter().any(u8::is_ascii_digit)).then_some(end)
}

fn pid(text: &[u8], at: usize) -> Option<usize> {
    let word = text.get(at..at + 3)?;
    if !word.eq_ignore_ascii_case(b"pid") {
        return None;
    }
    let mut end = at + 3;
    let mut gap = 0;
    while gap < 3 && matches!(text.get(end), Some(b' ' | b':' | b'=' | b'#')) {
        end += 1;
        gap += 1;
    }
    let digits = run(text, end, |b| b.is_ascii_digit());
    (digits > end).then_some(digits)
}

fn json_quantity(text: &[u8], at: usize) -> Option<usize> {
    let in_quotes = |b: u8| !matches!(b, b'"' | b'\\' | b'\n');
    let key = at + 1;
    // At most one byte past the longest key is read: a longer key is no quantity's name.
    let key_end = text.get(key..)?.iter().take(65).position(|&b| !in_quotes(b))? + key;
    if key_end == key || !is_volatile_quantity(&text[key..key_end]) {
        return None;
    }
    let blank = |b: u8| b == b' ' || b == b'\t';
    let mut end = run(text, byte_is(text, key_end, b'"')?, blank);
    end = run(text, byte_is(text, end, b':')?, blank);
    if text.get(end) == Some(&b'"') {
        return byte_is(text, run(text, end + 1, in_quotes), b'"');
    }
    let number = end + usize::from(text.get(end) == Some(&b'-'));
    let whole = run(text, number, |b| b.is_ascii_digit());
    if whole == number {
        return None;
    }
    Some(fraction(text, whole))
}

fn digits(text: &[u8], at: usize, n: usize) -> Option<usize> {
    exactly(text, at, n, |b| b.is_ascii_digit())
}

/// `.digits` from `at` if there, else `at`.
fn fraction(text: &[u8], at: usize) -> usize {
    match byte_is(text, at, b'.') {
        Some(dot) => {
            let end = run(text, dot, |b| b.is_ascii_digit());
            if end > dot {
                end
            } else {
                at
            }
        }
        None => at,
    }
}

fn date(text: &[u8], at: usize) -> Option<usize> {
    let mut end = digits(text, at, 4)?;
    end = digits(text, byte_is(text, end, b'-')?, 2)?;
    end = digits(text, byte_is(text, end, b'-')?, 2)?;
    if let Some(after) = byte_is(text, end, b'T').or_else(|| byte_is(text, end, b' ')) {
        if let Some(time) = clock(text, after) {
            end = time;
        }
    }
    Some(zone(text, end))
}

fn time_of_day(text: &[u8], at: usize) -> Option<usize> {
    let end = clock(text, at)?;
    Some(byte_is(text, end, b'Z').unwrap_or(end))
}

/// `H:MM` or `HH:MM`, then `:SS` and `.fraction` if they follow.
fn clock(text: &[u8], at: usize) -> Option<usize> {
    let hours = run(text, at, |b| b.is_ascii_digit());
    if !(1..=2).contains(&(hours - at)) {
        return None;
    }
    let mut end = digits(text, byte_is(text, hours, b':')?, 2)?;
    if let Some(seconds) = byte_is(text, end, b':').and_then(|colon| digits(text, colon, 2)) {
        end = fraction(text, seconds);
    }
    Some(end)
}

/// `Z`, or `+`/`-` and `HH:MM` or `HHMM`, from `at` if there, else `at`.
fn zone(text: &[u8], at: usize) -> usize {
    if let Some(end) = byte_is(text, at, b'Z') {
        return end;
    }
    let Some(sign) = byte_is(text, at, b'+').or_else(|| byte_is(text, at, b'-')) else {
        return at;
    };
    digits(text, sign, 2)
        .and_then(|hours| {
            let minutes = byte_is(text, hours, b':').unwrap_or(hours);
            digits(text, minutes, 2)
        })
        .unwrap_or(at)
}

fn unix_time(text: &[u8], at: usize) -> Option<usize> {
    let end = run(text, at, |b| b.is_ascii_digit());
    (text[at] == b'1' && matches!(end - at, 10 | 13)).then(|| fraction(text, end))
}

fn duration(text: &[u8], at: usize) -> Option<usize> {
    let number = run(text, at, |b| b.is_ascii_digit());
    if number == at {
        return None;
    }
    let number = fraction(text, number);
    let unit = if text.get(number) == Some(&b' ') {
        number + 1
    } else {
        number
    };
    let end = run(text, unit, |b| b.is_ascii_alphabetic());
    let word = &text[unit..end];
    if !(1..=7).contains(&word.len()) {
        return None;
    }
    UNITS.iter().any(|u| u.eq_ignore_ascii_case(word)).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(text: &str) -> String {
        let bytes = mask(text.as_bytes()).unwrap_or_else(|| text.as_bytes().to_vec());
        bytes
            .iter()
            .map(|&b| if b == MASK { '#' } else { char::from(b) })
            .collect()
    }

    #[test]
    fn each_rule_masks_its_token() {
        for (text, expected) in [
            ("job 3f2a9c1e-0b7d-4e8a-9f00-1c2d3e4f5a6b done", "job # done"),
            ("at 0x7ffd5e8c3a10 in frame", "at # in frame"),
            ("wrote /tmp/pytest-of-root/run42/out.txt, ok", "wrote #, ok"),
            ("file tmpa1b2c3d4.json", "file #.json"),
            ("started (pid 91822)", "started (#)"),
            ("PID=4411 exited", "# exited"),
            ("at 2026-12-02T05:31:44.123Z: running", "at #: running"),
            ("on 2026-12-02 12:00:01+01:00 ok", "on # ok"),
            ("elapsed 05:31:44 so far", "elapsed # so far"),
            ("ts=1764590400.5 status", "ts=# status"),
            ("took 12.3s", "took #"),
            ("took 850 ms, 2 seconds", "took #, #"),
        ] {
            assert_eq!(masked(text), expected, "{text}");
        }
    }

    #[test]
    fn progress_and_other_numbers_are_kept() {
        for text in [
            "step 3/5: pushing image",
            "12 passed, 1 failed",
            "exit code 1",
            "version 1.2.3",
            "line 42: def f(x)",
            "3 steps left",
            "x0abc12",
            "tmpfiles.d",
            "1234567890123456",
        ] {
            assert_eq!(mask(text.as_bytes()), None, "{text}");
        }
    }

    #[test]
    fn a_token_must_end_at_a_word_boundary() {
        assert_eq!(mask(b"0x1234zz"), None);
        assert_eq!(mask(b"12sx"), None);
        assert_eq!(masked("a12s"), "a12s");
    }

    #[test]
    fn polls_differing_only_in_volatile_tokens_mask_alike() {
        let one = mask(b"[2026-12-02 05:31:44] job 7 running, pid 811, 1.2s elapsed");
        let two = mask(b"[2026-12-02 05:31:49] job 7 running, pid 812, 6.4s elapsed");
        assert!(one.is_some() && one == two);
    }

    #[test]
    fn keys_naming_volatile_quantities() {
        for key in [
            "pid",
            "elapsed_ms",
            "elapsedMs",
            "updatedAt",
            "created_at",
            "startTime",
            "time",
            "ts",
            "took",
            "job.duration",
            "Uptime",
            "wait-secs",
            "ppid",
        ] {
            assert!(is_volatile_quantity(key.as_bytes()), "{key}");
        }
        for key in [
            "progress",
            "status",
            "timeout",
            "attempts",
            "state",
            "at_risk",
            "times",
            "step",
            "pids_total",
            "",
            "tsx",
            "data",
        ] {
            assert!(!is_volatile_quantity(key.as_bytes()), "{key}");
        }
        assert!(!is_volatile_quantity("elapsed_".repeat(9).as_bytes()));
    }

    #[test]
    fn json_entries_naming_volatile_quantities() {
        assert_eq!(
            masked(r#"{"state": "running", "pid": 811, "elapsed_ms": -12.5, "updatedAt":"x y"}"#),
            r#"{"state": "running", #, #, #}"#
        );
        for text in [
            r#"{"progress": 3}"#,
            r#"{"pid": true}"#,
            r#"{"pid": 12x}"#,
            r#"{"ts": "a\"b"}"#,
            r#"x"pid": 1"#,
            r#"{"elapsed_ms" 5}"#,
        ] {
            assert_eq!(mask(text.as_bytes()), None, "{text}");
        }
    }
}
