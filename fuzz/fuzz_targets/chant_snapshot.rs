//! Restoring a chant detector (`restore_chant`) from arbitrary bytes: either as they are, or as
//! the body of a snapshot whose header, length and checksum are made right (so the fuzzer
//! reaches the body's reader rather than the checksum).
//!
//! Properties:
//! - never a panic, whatever the bytes (every length bounded by the bytes left and the
//!   settings, every value by what the state may hold);
//! - a snapshot that restores is restored whole: it saves back to the same bytes, but for a
//!   rolling hash above 2^32 (a snapshot made when the hash was mod 2^64), kept as its low half;
//! - the restored stream can be fed on (text or tokens) and reset without a panic, and a
//!   chant it then reports fits its window and the stream.
#![no_main]

use doomloop_engine::chant::{chant_snapshot, restore_chant, Chant, ChantSnapshot, ChantStream, Symbol, Token, CHANT};
use doomloop_engine::snapshot::{seal, SnapshotKind};
use libfuzzer_sys::fuzz_target;

/// The symbols after a restored stream: a few letters, so chants are common.
fn symbols(data: &[u8]) -> impl Iterator<Item = u8> + Clone + '_ {
    data.iter().map(|b| b % 5)
}

/// Feed `more` in two chunks, each followed by a reset; every event must fit the stream.
fn feed_on<S: Symbol>(chant: &mut Chant<S>, more: impl Iterator<Item = S> + Clone) {
    let all: Vec<S> = more.collect();
    let half = all.len() / 2;
    for part in [&all[..half], &all[half..]] {
        if let Some(event) = chant.feed(part.iter().copied()) {
            assert_eq!(event.window.len() as u64, chant.config().window);
            assert!(event.start <= event.end && event.end <= chant.position());
        }
        chant.reset();
    }
}

/// `bytes`, a snapshot that restored as `restored`, as a restore keeps it: a rolling hash above
/// 2^32 is read as its low half, so the hash's upper four bytes come back zero (under a checksum
/// made anew). Nothing else may change.
fn as_kept(bytes: &[u8], restored: &ChantSnapshot) -> Vec<u8> {
    if matches!(restored.stream, ChantStream::Fresh) {
        return bytes.to_vec();
    }
    const CHECKSUM: usize = 8;
    let header = seal(SnapshotKind::Chant, &CHANT, |_| {}).len() - CHECKSUM;
    let settings = seal(SnapshotKind::Chant, &CHANT, |w| w.settings(&restored.settings)).len() - header - CHECKSUM;
    // After the settings: the hash key (16 bytes), the stream's kind (1), its start and end
    // (16), then the hash's low and high halves.
    let high = settings + 16 + 1 + 16 + 4;
    let mut body = bytes[header..bytes.len() - CHECKSUM].to_vec();
    body[high..high + 4].fill(0);
    seal(SnapshotKind::Chant, &CHANT, |w| w.bytes(&body))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (snapshot, more) = rest.split_at(rest.len() * 3 / 4);
    let sealed;
    let bytes = if mode & 1 == 1 {
        sealed = seal(SnapshotKind::Chant, &CHANT, |w| w.bytes(snapshot));
        &sealed[..]
    } else {
        snapshot
    };
    let Ok(restored) = restore_chant(bytes) else {
        return;
    };
    let stream = match &restored.stream {
        ChantStream::Fresh => ChantStream::Fresh,
        ChantStream::Text(chant) => ChantStream::Text(chant),
        ChantStream::Tokens(chant) => ChantStream::Tokens(chant),
    };
    assert_eq!(
        chant_snapshot(&restored.settings, restored.key, stream, restored.reported),
        as_kept(bytes, &restored)
    );
    match restored.stream {
        ChantStream::Fresh => {}
        ChantStream::Text(mut chant) => feed_on(&mut chant, symbols(more).map(u32::from)),
        ChantStream::Tokens(mut chant) => feed_on(&mut chant, symbols(more).map(|s| Token(u64::from(s)))),
    }
});
