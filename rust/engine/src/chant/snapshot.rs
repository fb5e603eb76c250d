//! A `ChantDetector` in a snapshot: its settings, hash key, stream state and verdict.

use crate::settings::Value;
use crate::snapshot::{invalid, open, seal, Reader, SnapshotError, SnapshotKind, Writer};

use super::chains::Entry;
use super::history::Slots;
use super::{Chant, ChantConfig, ChantEvent, HashKey, Symbol, Token, BATCH, CHANT, NO_RANK, WAYS};

/// The largest stream position a snapshot may hold: no stream reaches it (resets included),
/// and it leaves the position arithmetic of a restored stream room to go on.
const MAX_POSITION: u64 = 1 << 62;

/// How a snapshot stores one symbol or history slot (little-endian, at its own width).
pub trait Stored: Copy {
    const BYTES: usize;
    fn put(self, w: &mut Writer);
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError>;
}

impl Stored for u8 {
    const BYTES: usize = 1;
    fn put(self, w: &mut Writer) {
        w.u8(self);
    }
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError> {
        r.u8(what)
    }
}

impl Stored for u32 {
    const BYTES: usize = 4;
    fn put(self, w: &mut Writer) {
        w.u32(self);
    }
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError> {
        r.u32(what)
    }
}

impl Stored for Token {
    const BYTES: usize = 8;
    fn put(self, w: &mut Writer) {
        w.u64(self.0);
    }
    fn get(r: &mut Reader<'_>, what: &'static str) -> Result<Self, SnapshotError> {
        r.u64(what).map(Token)
    }
}

/// What a detector has been fed since it was created or reset: nothing, text or token ids
/// (`T` and `K`: the detectors of each, or references to them).
#[derive(Debug)]
pub enum ChantStream<T = Chant<u32>, K = Chant<Token>> {
    Fresh,
    Text(T),
    Tokens(K),
}

/// A `ChantDetector` as a snapshot holds it: its settings ([`CHANT`]), hash key,
/// stream and whether the chant found (if any) was already reported to its caller.
#[derive(Debug)]
pub struct ChantSnapshot {
    pub settings: Vec<Value>,
    pub key: HashKey,
    pub stream: ChantStream,
    pub reported: bool,
}

/// The snapshot of a detector built from the checked `settings` with hash `key`.
pub fn chant_snapshot(
    settings: &[Value],
    key: HashKey,
    stream: ChantStream<&Chant<u32>, &Chant<Token>>,
    reported: bool,
) -> Vec<u8> {
    seal(SnapshotKind::Chant, &CHANT, |w| {
        w.settings(settings);
        w.u64(key.base);
        w.u64(key.salt);
        match stream {
            ChantStream::Fresh => w.u8(0),
            ChantStream::Text(chant) => {
                w.u8(1);
                chant.write_state(w);
            }
            ChantStream::Tokens(chant) => {
                w.u8(2);
                chant.write_state(w);
            }
        }
        w.bool(reported);
    })
}

/// The detector a [`chant_snapshot`] saved. Every length is bounded by the bytes left and by
/// what the settings allow, and every value by what the detector could hold, so bad data is
/// an error, never a panic or an allocation beyond the configuration's own.
pub fn restore_chant(data: &[u8]) -> Result<ChantSnapshot, SnapshotError> {
    let mut r = open(data, SnapshotKind::Chant, &CHANT)?;
    let settings = r.settings(&CHANT)?;
    let config = ChantConfig::from_values(&settings);
    let key = HashKey {
        base: r.u64("the hash key")?,
        salt: r.u64("the hash key")?,
    };
    if key.base & 1 == 0 {
        return Err(invalid("the hash key's base is even"));
    }
    let stream = match r.u8("the stream")? {
        0 => ChantStream::Fresh,
        1 => ChantStream::Text(Chant::read_state(&mut r, config, key)?),
        2 => ChantStream::Tokens(Chant::read_state(&mut r, config, key)?),
        other => return Err(invalid(format!("stream kind {other}"))),
    };
    let reported = r.bool("the reported flag")?;
    let found = match &stream {
        ChantStream::Fresh => false,
        ChantStream::Text(chant) => chant.event.is_some(),
        ChantStream::Tokens(chant) => chant.event.is_some(),
    };
    if reported && !found {
        return Err(invalid("a chant is reported but none was found"));
    }
    r.finish()?;
    Ok(ChantSnapshot {
        settings,
        key,
        stream,
        reported,
    })
}

/// A detector's verdict (`None`: no chant found), as both the chant and the session
/// snapshots hold it: a presence byte, then the span, period, count and repeated window.
pub fn write_event<S: Stored>(w: &mut Writer, event: Option<&ChantEvent<S>>) {
    match event {
        Some(event) => {
            w.u8(1);
            w.u64(event.start);
            w.u64(event.end);
            w.opt_u64(event.period);
            w.u64(event.count);
            w.len(event.window.len());
            write_slots(w, &event.window);
        }
        None => w.u8(0),
    }
}

/// The verdict a [`write_event`] saved, `what` naming it in errors. Its window holds at most
/// `window_len` symbols; `fits(start, end, symbols)` checks the rest against the reader's
/// state before the window is read.
pub fn read_event<S: Stored>(
    r: &mut Reader<'_>,
    what: &'static str,
    window_len: u64,
    fits: impl FnOnce(u64, u64, usize) -> Result<(), SnapshotError>,
) -> Result<Option<ChantEvent<S>>, SnapshotError> {
    match r.u8(what)? {
        0 => Ok(None),
        1 => {
            let start = r.u64(what)?;
            let end = r.u64(what)?;
            let period = r.opt_u64(what)?;
            let count = r.u64(what)?;
            let symbols = r.len("the repeated window", usize::try_from(window_len).unwrap_or(usize::MAX))?;
            fits(start, end, symbols)?;
            let mut window = Vec::with_capacity(symbols);
            for _ in 0..symbols {
                window.push(S::get(r, "the repeated window")?);
            }
            Ok(Some(ChantEvent {
                start,
                end,
                period,
                count,
                window,
            }))
        }
        other => Err(invalid(format!("{what} has presence byte {other}"))),
    }
}

fn write_slots<T: Stored>(w: &mut Writer, slots: &[T]) {
    for &slot in slots {
        slot.put(w);
    }
}

fn read_slots<T: Stored + Default>(r: &mut Reader<'_>, size: usize, written: usize) -> Result<Vec<T>, SnapshotError> {
    let mut slots = Vec::with_capacity(size);
    for _ in 0..written {
        slots.push(T::get(r, "the history")?);
    }
    slots.resize(size, T::default());
    Ok(slots)
}

impl<S: Symbol + Stored> Chant<S>
where
    S::Narrow: Stored,
{
    /// The stream's state: positions, rolling hash, ranks, history, chains and verdict.
    fn write_state(&self, w: &mut Writer) {
        w.u64(self.origin);
        w.u64(self.len);
        // Eight bytes, as when the hash was mod 2^64 (its low half is today's hash).
        w.u64(u64::from(self.hash));
        w.u64(self.blank_run);
        for &rank in &self.tail {
            w.u32(rank as u32);
        }
        let history = &self.history;
        w.u64(history.start);
        // Slots past the stream's positions in a ring that never turned are never read (they
        // hold nothing, or the stream before a reset): only the ones before them are saved.
        let size = history.len();
        let written = if history.start == self.origin {
            usize::try_from(self.len - history.start).map_or(size, |n| n.min(size))
        } else {
            size
        };
        match &history.slots {
            Slots::Narrow(v) => {
                w.u8(0);
                w.len(size);
                w.len(written);
                write_slots(w, &v[..written]);
            }
            Slots::Wide(v) => {
                w.u8(1);
                w.len(size);
                w.len(written);
                write_slots(w, &v[..written]);
            }
        }
        let live: Vec<(usize, &Entry)> = self.table.iter().enumerate().filter(|(_, e)| e.count > 0).collect();
        w.len(live.len());
        for (index, entry) in live {
            w.len(index);
            w.u32(entry.tag);
            w.u32(entry.last);
            w.u16(entry.gap);
            w.u16(entry.count);
        }
        write_event(w, self.event.as_ref());
    }

    fn read_state(r: &mut Reader<'_>, config: ChantConfig, key: HashKey) -> Result<Self, SnapshotError> {
        let mut chant = Chant::with_key(config, key);
        chant.origin = r.u64("the stream's start")?;
        chant.len = r.u64("the stream's end")?;
        if chant.len > MAX_POSITION {
            return Err(invalid(format!("the stream's end {} is beyond any stream", chant.len)));
        }
        let fed = chant
            .len
            .checked_sub(chant.origin)
            .ok_or_else(|| invalid("the stream ends before it starts"))?;
        // A snapshot made when the hash was mod 2^64 holds that hash, whose low half is the
        // hash mod 2^32 of the same key's low halves: the stream goes on as it would have.
        chant.hash = r.u64("the rolling hash")? as u32;
        chant.blank_run = r.u64("the whitespace run")?;
        if chant.blank_run > fed {
            return Err(invalid("the whitespace run is longer than the stream"));
        }
        for rank in chant.tail.iter_mut() {
            let value = r.u32("the recent ranks")? as i32;
            if value != NO_RANK && !(0..1 << 30).contains(&value) {
                return Err(invalid(format!("a window rank is {value}")));
            }
            *rank = value;
        }
        let start = r.u64("the history")?;
        let wide = r.bool("the history's width")?;
        let full = chant.history.full;
        // The ring's size is not a count of saved items: only bounded by the settings.
        let size = r.u32("the history")? as usize;
        if size > full {
            return Err(invalid(format!(
                "the history ring has {size} slots, more than the {full} allowed"
            )));
        }
        let item = if wide { S::BYTES } else { S::Narrow::BYTES };
        let written = r.len("the history", size)?;
        if written.saturating_mul(item) > r.remaining() {
            return Err(SnapshotError::Truncated { what: "the history" });
        }
        // Where the ring can stand: from the stream's start, whole turns of a full ring on,
        // and no further from the stream's end than one turn (plus the batch being written).
        let turns = start
            .checked_sub(chant.origin)
            .ok_or_else(|| invalid("the history starts before the stream"))?;
        let ahead = chant
            .len
            .checked_sub(start)
            .ok_or_else(|| invalid("the history starts after the stream's end"))?;
        let room = if size == full { size + BATCH } else { size } as u64;
        if (turns > 0 && (size != full || turns % size as u64 != 0)) || ahead > room {
            return Err(invalid("the history ring does not hold the stream"));
        }
        let expected = if turns == 0 { (ahead as usize).min(size) } else { size };
        if written != expected {
            return Err(invalid(format!("{written} history symbols, {expected} expected")));
        }
        chant.history.start = start;
        chant.history.slots = if wide {
            Slots::Wide(read_slots(r, size, written)?)
        } else {
            Slots::Narrow(read_slots(r, size, written)?)
        };
        let table_len = (chant.bucket_mask as usize + 1) * WAYS;
        let live = r.len("the chain table", table_len)?;
        let mut previous = None;
        for _ in 0..live {
            let index = r.u32("a chain")? as usize;
            let entry = Entry {
                tag: r.u32("a chain")?,
                last: r.u32("a chain")?,
                gap: r.u16("a chain")?,
                count: r.u16("a chain")?,
                _pad: 0,
            };
            if index >= table_len || previous.is_some_and(|p| index <= p) {
                return Err(invalid(format!("chain {index} is out of order or beyond the table")));
            }
            previous = Some(index);
            let (gap, count) = (u64::from(entry.gap), u64::from(entry.count));
            let gap_fits = (gap == 0 && count == 1) || (config.window..=config.max_distance()).contains(&gap);
            if !gap_fits || !(1..=config.min_repeats).contains(&count) {
                return Err(invalid(format!("a chain of {count} at gap {gap}")));
            }
            if chant.table.is_empty() {
                chant.allocate();
            }
            if let Some(slot) = chant.table.get_mut(index) {
                *slot = entry;
            }
        }
        chant.event = read_event(r, "the verdict", config.window, |start, end, symbols| {
            if symbols as u64 != config.window || start > end || end > fed {
                return Err(invalid("the verdict does not fit the stream"));
            }
            Ok(())
        })?;
        Ok(chant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Vec<u32> {
        s.chars().map(|c| c as u32).collect()
    }

    fn settings_of(config: &ChantConfig) -> Vec<Value> {
        vec![
            Value::Count(config.window),
            Value::Count(config.min_repeats),
            Value::Switch(config.ignore_whitespace),
            Value::Count(config.max_period),
            Value::Unset,
        ]
    }

    #[test]
    fn a_restored_stream_answers_as_the_original() {
        let config = ChantConfig {
            window: 4,
            min_repeats: 3,
            max_period: 16,
            ignore_whitespace: true,
        };
        let key = HashKey::from_seed(11);
        // Long enough to turn the ring many times, widened halfway, with a chant at the end.
        let numbers: String = (0..300).map(|i| format!("{} ", i * 7919 % 1013)).collect();
        let symbols = text(&format!("{numbers}Ω{numbers}{}", "say it! ".repeat(8)));
        let tokens: Vec<Token> = symbols.iter().map(|&c| Token(u64::from(c) << 33)).collect();
        for cut in (0..symbols.len()).step_by(97) {
            let mut original = Chant::with_key(config, key);
            original.feed(symbols[..cut].iter().copied());
            let data = chant_snapshot(&settings_of(&config), key, ChantStream::Text(&original), false);
            let ChantStream::Text(mut twin) = restore_chant(&data).unwrap().stream else {
                panic!("a text stream");
            };
            assert_eq!(
                chant_snapshot(&settings_of(&config), key, ChantStream::Text(&twin), false),
                data
            );
            let rest = symbols[cut..].iter().copied();
            assert_eq!(twin.feed(rest.clone()), original.feed(rest));
            assert_eq!(twin.position(), original.position());

            let mut original = Chant::with_key(config, key);
            original.feed(tokens[..cut].iter().copied());
            let data = chant_snapshot(&settings_of(&config), key, ChantStream::Tokens(&original), false);
            let ChantStream::Tokens(mut twin) = restore_chant(&data).unwrap().stream else {
                panic!("a token stream");
            };
            let rest = tokens[cut..].iter().copied();
            assert_eq!(twin.feed(rest.clone()), original.feed(rest));
        }
    }

    #[test]
    fn every_truncation_and_flipped_bit_of_a_chant_snapshot_is_an_error() {
        let config = ChantConfig {
            window: 3,
            min_repeats: 2,
            max_period: 8,
            ignore_whitespace: true,
        };
        let key = HashKey::from_seed(3);
        let mut chant = Chant::with_key(config, key);
        chant.feed(text("one two three four five six é"));
        let data = chant_snapshot(&settings_of(&config), key, ChantStream::Text(&chant), false);
        for n in 0..data.len() {
            assert!(restore_chant(&data[..n]).is_err(), "truncated at {n}");
        }
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[i] ^= 1 << bit;
                assert!(restore_chant(&bad).is_err(), "bit {bit} of byte {i}");
            }
        }
    }
}
