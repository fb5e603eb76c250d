//! The text chant detector (`Chant<u32>`): small configurations, a small alphabet (so chants
//! and near-chants are common), arbitrary chunkings in every `TextInput` form.
//!
//! Properties:
//! - chunking invariance: one slice, symbol by symbol, random cuts in mixed forms (ASCII, UTF-8,
//!   code points), the iterator API, and the same detector after `reset` all report the same
//!   first event (same start/end/period/count/window) for the same hash key, report it once,
//!   and keep it in `event()`;
//! - soundness: every event is a genuine chant, checked against the symbols;
//! - agreement with the brute-force model whenever the engine's bounded table cannot have
//!   lost a chain; the README's latency bound for planted chants it covers;
//! - memory: `heap_bytes()` is within a bound set by the configuration alone, and is what
//!   the allocator really holds.
#![no_main]

use arbitrary::Arbitrary;
use doomloop_engine::chant::{Chant, ChantConfig, ChantEvent, HashKey, TextInput};
use doomloop_fuzz::chant_model::{check_sound, guaranteed, model, Event, Planted};
use doomloop_fuzz::{check_chant_heap, live_bytes, mix};
use libfuzzer_sys::fuzz_target;

/// A lone surrogate: only the code-point form can carry it.
const SURROGATE: u32 = 0xD800;
/// Letters, ASCII and Unicode whitespace (U+001C is not White_Space), multi-byte characters.
const ALPHABET: [u32; 16] = [
    'a' as u32,
    'b' as u32,
    'c' as u32,
    'd' as u32,
    ' ' as u32,
    '\n' as u32,
    '\t' as u32,
    0xE9,
    0x1F600,
    0x3000,
    0x85,
    0x1C,
    'x' as u32,
    0x2028,
    '0' as u32,
    SURROGATE,
];
const MAX_SYMBOLS: usize = 3000;

#[derive(Arbitrary, Debug)]
struct Input {
    window: u8,
    repeats: u8,
    max_period: u8,
    ignore_whitespace: bool,
    key: (u64, u64),
    prefix: Vec<u8>,
    unit: Vec<u8>,
    reps: u8,
    suffix: Vec<u8>,
    /// (piece length, form) pairs; the rest of the text is one last piece.
    cuts: Vec<(u8, u8)>,
}

fn symbols(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes.iter().map(|&b| ALPHABET[usize::from(b % 16)])
}

fn plain(e: &ChantEvent<u32>) -> Event {
    Event {
        start: e.start,
        end: e.end,
        period: e.period,
        count: e.count,
        window: e.window.iter().map(|&c| u64::from(c)).collect(),
    }
}

fn as_string(code_points: &[u32]) -> Option<String> {
    code_points.iter().map(|&c| char::from_u32(c)).collect()
}

fn is_blank(c: u64) -> bool {
    u32::try_from(c)
        .ok()
        .and_then(char::from_u32)
        .is_some_and(char::is_whitespace)
}

/// Feed `text` cut as `cuts` says, each piece in the form `form` picks (falling back to code
/// points where the piece cannot be ASCII or UTF-8); returns the first event and checks that
/// no later piece reports another.
fn feed_cut(chant: &mut Chant<u32>, text: &[u32], cuts: &[(u8, u8)]) -> Option<Event> {
    let mut found: Option<Event> = None;
    let mut at = 0;
    let mut pieces: Vec<(usize, u8)> = cuts.iter().map(|&(len, form)| (usize::from(len), form)).collect();
    pieces.push((usize::MAX, 0));
    for (len, form) in pieces {
        let piece = &text[at.min(text.len())..at.saturating_add(len).min(text.len())];
        at = at.saturating_add(len);
        let utf8 = as_string(piece);
        let ascii: Option<Vec<u8>> = piece
            .iter()
            .map(|&c| u8::try_from(c).ok().filter(u8::is_ascii))
            .collect();
        let event = match (form % 4, &utf8, &ascii) {
            (1, Some(s), _) => chant.feed_text(TextInput::Utf8(s)),
            (2, _, Some(bytes)) => chant.feed_text(TextInput::Ascii(bytes)),
            (3, _, _) => chant.feed(piece.iter().copied()),
            _ => chant.feed_text(TextInput::CodePoints(piece)),
        };
        if let Some(e) = event {
            assert!(found.is_none(), "a second event after {found:?}: {e:?}");
            found = Some(plain(&e));
        }
    }
    found
}

fn check_latched(chant: &Chant<u32>, found: &Option<Event>, n: usize) {
    assert_eq!(chant.event().map(plain), *found, "event() keeps the reported event");
    let consumed = found.as_ref().map_or(n as u64, |e| e.end);
    assert_eq!(chant.position(), consumed, "position stops at the event's end");
}

fuzz_target!(|input: Input| {
    let config = ChantConfig {
        window: 1 + u64::from(input.window % 12),
        min_repeats: 1 + u64::from(input.repeats % 8),
        max_period: 1 + u64::from(input.max_period % 48),
        ignore_whitespace: input.ignore_whitespace,
    };
    assert_eq!(config.problem(), None);
    let key = HashKey {
        base: mix(input.key.0),
        salt: mix(input.key.1),
    };
    let mut text: Vec<u32> = symbols(&input.prefix).collect();
    let prefix_len = text.len();
    let unit: Vec<u32> = symbols(&input.unit).collect();
    for _ in 0..input.reps {
        text.extend_from_slice(&unit);
    }
    let body_len = text.len() - prefix_len;
    text.extend(symbols(&input.suffix));
    text.truncate(MAX_SYMBOLS);
    let n = text.len();

    // The reference run: the whole text as one code-point slice, with its memory measured.
    let before = live_bytes();
    let mut chant = Chant::<u32>::with_key(config, key);
    let whole = chant.feed_text(TextInput::CodePoints(&text)).map(|e| plain(&e));
    let held = live_bytes().saturating_sub(before);
    check_chant_heap(
        held,
        chant.heap_bytes(),
        whole.as_ref().map_or(0, |e| e.window.len()),
        &config,
        4,
    );
    check_latched(&chant, &whole, n);
    if whole.is_some() {
        // Latched: more text is ignored until a reset.
        assert_eq!(chant.feed_text(TextInput::CodePoints(&text)).map(|e| plain(&e)), None);
        check_latched(&chant, &whole, n);
    }

    // The same detector after a reset: the same event.
    chant.reset();
    assert_eq!(chant.position(), 0);
    assert_eq!(chant.event(), None);
    assert_eq!(feed_cut(&mut chant, &text, &input.cuts), whole, "after reset, cut");
    check_latched(&chant, &whole, n);

    // Symbol by symbol.
    let mut one = Chant::<u32>::with_key(config, key);
    let mut found = None;
    for &c in &text {
        if let Some(e) = one.feed([c]) {
            assert!(found.is_none());
            found = Some(plain(&e));
        }
    }
    assert_eq!(found, whole, "symbol by symbol");
    check_latched(&one, &whole, n);

    // Whole text as UTF-8 and as ASCII when it can be.
    if let Some(s) = as_string(&text) {
        let mut utf8 = Chant::<u32>::with_key(config, key);
        assert_eq!(utf8.feed_text(TextInput::Utf8(&s)).map(|e| plain(&e)), whole, "UTF-8");
        if s.is_ascii() {
            let mut ascii = Chant::<u32>::with_key(config, key);
            let got = ascii.feed_text(TextInput::Ascii(s.as_bytes())).map(|e| plain(&e));
            assert_eq!(got, whole, "ASCII");
        }
    }

    // The verdict against the rule.
    let keys: Vec<u64> = text.iter().map(|&c| u64::from(c)).collect();
    let run = model(&keys, &|c| c as u32, &is_blank, &config, key); // code points, below 2^21
    if let Some(e) = &whole {
        check_sound(&keys, &is_blank, &config, e);
    }
    if run.exact {
        assert_eq!(whole, run.event, "engine and model disagree");
    }
    let planted = Planted {
        prefix_len,
        unit_len: unit.len(),
        body_len: body_len.min(n.saturating_sub(prefix_len)),
    };
    if let Some((start, bound)) = guaranteed(&keys, &is_blank, &config, &planted) {
        let end = whole.as_ref().map(|e| e.end);
        assert!(
            end.is_some_and(|end| end <= start + bound),
            "a chant from {start} not reported within {bound}: {end:?}"
        );
    }
});
