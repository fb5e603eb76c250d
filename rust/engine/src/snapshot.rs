//! Versioned, checksummed snapshots of detector state (the format is in docs/snapshots.md).
//!
//! A snapshot is a header, a body and a checksum, all little-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `DLSN` |
//! | 2 | format version (1) |
//! | 1 | kind (1 session, 2 tool loop, 3 chant) |
//! | 1 | reserved, 0 |
//! | 8 | schema digest: xxh3 of the settings table's owner, names and kinds |
//! | 4 | body length |
//! | n | body: the settings' values, then the kind's state |
//! | 8 | xxh3-64 of everything before it |
//!
//! Reading checks every length against the bytes left and every value against what the state
//! allows, so corrupt, truncated or foreign data is a [`SnapshotError`] naming what was wrong,
//! never a panic and never a partly restored detector (a reader builds a new state or none).

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use xxhash_rust::xxh3::xxh3_64;

use crate::settings::{self, Given, Kind, Schema, Value};

pub const MAGIC: &[u8; 4] = b"DLSN";
/// The newest format this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;
const HEADER_LEN: usize = 4 + 2 + 1 + 1 + 8 + 4;
const CHECKSUM_LEN: usize = 8;

/// What a snapshot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotKind {
    Session = 1,
    ToolLoop = 2,
    Chant = 3,
}

impl SnapshotKind {
    fn of(byte: u8) -> Option<SnapshotKind> {
        match byte {
            1 => Some(SnapshotKind::Session),
            2 => Some(SnapshotKind::ToolLoop),
            3 => Some(SnapshotKind::Chant),
            _ => None,
        }
    }

    /// The detector class a snapshot of this kind restores.
    pub fn detector(self) -> &'static str {
        match self {
            SnapshotKind::Session => "DoomLoopDetector",
            SnapshotKind::ToolLoop => "ToolLoopDetector",
            SnapshotKind::Chant => "ChantDetector",
        }
    }
}

/// Why a snapshot cannot be read.
#[derive(Clone, Debug, PartialEq)]
pub enum SnapshotError {
    NotASnapshot,
    NewerVersion {
        found: u16,
    },
    UnknownKind {
        found: u8,
    },
    WrongKind {
        expected: SnapshotKind,
        found: SnapshotKind,
    },
    OtherSchema {
        kind: SnapshotKind,
    },
    LengthMismatch {
        declared: u64,
        actual: u64,
    },
    Checksum,
    Truncated {
        what: &'static str,
    },
    Invalid {
        what: String,
    },
    TrailingBytes {
        count: usize,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::NotASnapshot => write!(f, "not a doomloop snapshot (no DLSN header)"),
            SnapshotError::NewerVersion { found } => write!(
                f,
                "snapshot format version {found} is newer than this doomloop reads ({FORMAT_VERSION})"
            ),
            SnapshotError::UnknownKind { found } => write!(f, "unknown snapshot kind {found}"),
            SnapshotError::WrongKind { expected, found } => write!(
                f,
                "a {} snapshot cannot restore a {}",
                found.detector(),
                expected.detector()
            ),
            SnapshotError::OtherSchema { kind } => write!(
                f,
                "the snapshot was made with other {} settings (another doomloop version)",
                kind.detector()
            ),
            SnapshotError::LengthMismatch { declared, actual } => write!(
                f,
                "truncated or padded snapshot: the body should be {declared} bytes, {actual} are there"
            ),
            SnapshotError::Checksum => write!(f, "corrupt snapshot: the checksum does not match"),
            SnapshotError::Truncated { what } => write!(f, "corrupt snapshot: it ends inside {what}"),
            SnapshotError::Invalid { what } => write!(f, "corrupt snapshot: {what}"),
            SnapshotError::TrailingBytes { count } => {
                write!(f, "corrupt snapshot: {count} bytes follow the state")
            }
        }
    }
}

impl std::error::Error for SnapshotError {}

/// Shorthand for a value a state does not allow.
pub fn invalid(what: impl Into<String>) -> SnapshotError {
    SnapshotError::Invalid { what: what.into() }
}

/// The digest of a settings table's shape: a snapshot only restores under the same settings.
/// Computed once per table.
pub fn schema_digest(schema: &Schema) -> u64 {
    *schema.shape_digest.get_or_init(|| shape_digest(schema))
}

fn shape_digest(schema: &Schema) -> u64 {
    let mut shape = Vec::new();
    shape.extend_from_slice(schema.owner.as_bytes());
    for setting in schema.settings {
        shape.push(0);
        shape.extend_from_slice(setting.name.as_bytes());
        shape.push(match setting.kind {
            Kind::Count { .. } => b'c',
            Kind::Number { .. } => b'n',
            Kind::Switch => b's',
            Kind::OptionalSwitch => b'o',
            Kind::OptionalCount { .. } => b'p',
        });
    }
    xxh3_64(&shape)
}

/// Little-endian encoder of a snapshot body.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }

    pub fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    /// Offset in the sealed snapshot of what is written next (the header comes first).
    pub fn position(&self) -> usize {
        self.buf.len()
    }

    pub fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.u64(v);
            }
            None => self.u8(0),
        }
    }

    /// A length: lengths in state are bounded far below 2^32.
    pub fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    pub fn str(&mut self, s: &str) {
        self.len(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// The settings' values, in the table's order.
    pub fn settings(&mut self, values: &[Value]) {
        self.len(values.len());
        for value in values {
            match *value {
                Value::Unset => self.u8(0),
                Value::Count(n) => {
                    self.u8(1);
                    self.u64(n);
                }
                Value::Number(x) => {
                    self.u8(2);
                    self.f64(x);
                }
                Value::Switch(b) => {
                    self.u8(3);
                    self.bool(b);
                }
            }
        }
    }
}

/// Decoder of a snapshot body: every read names what it was reading when the data ends.
pub struct Reader<'a> {
    data: &'a [u8],
    /// Offset of `data` in the snapshot read.
    offset: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], SnapshotError> {
        if self.data.len() < n {
            return Err(SnapshotError::Truncated { what });
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        self.offset += n;
        Ok(head)
    }

    /// Offset in the snapshot of what is read next.
    pub fn position(&self) -> usize {
        self.offset
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], SnapshotError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, SnapshotError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, SnapshotError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub fn f64(&mut self, what: &'static str) -> Result<f64, SnapshotError> {
        Ok(f64::from_bits(self.u64(what)?))
    }

    pub fn bool(&mut self, what: &'static str) -> Result<bool, SnapshotError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(invalid(format!("{what} is {other}, not a bool"))),
        }
    }

    pub fn opt_u64(&mut self, what: &'static str) -> Result<Option<u64>, SnapshotError> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => Ok(Some(self.u64(what)?)),
            other => Err(invalid(format!("{what} has presence byte {other}"))),
        }
    }

    /// A length of at most `most` items (each at least one byte, so a corrupt length cannot
    /// make a reader reserve more than the data could hold).
    pub fn len(&mut self, what: &'static str, most: usize) -> Result<usize, SnapshotError> {
        let n = self.u32(what)? as usize;
        if n > most {
            return Err(invalid(format!("{what} is {n}, more than the {most} allowed")));
        }
        if n > self.data.len() {
            return Err(SnapshotError::Truncated { what });
        }
        Ok(n)
    }

    pub fn str(&mut self, what: &'static str, most: usize) -> Result<&'a str, SnapshotError> {
        let n = self.len(what, most)?;
        std::str::from_utf8(self.take(n, what)?).map_err(|_| invalid(format!("{what} is not UTF-8")))
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.data.len()
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], SnapshotError> {
        self.take(n, what)
    }

    /// The settings' values, checked against `schema` as a constructor checks them.
    pub fn settings(&mut self, schema: &'static Schema) -> Result<Vec<Value>, SnapshotError> {
        let n = self.len("the settings", schema.settings.len())?;
        if n != schema.settings.len() {
            return Err(invalid(format!("{n} settings, {} expected", schema.settings.len())));
        }
        let mut given = Vec::with_capacity(n);
        for _ in 0..n {
            given.push(match self.u8("a setting")? {
                0 => Given::None,
                1 => Given::Int(i128::from(self.u64("a setting")?)),
                2 => Given::Float(self.f64("a setting")?),
                3 => Given::Bool(self.bool("a setting")?),
                other => return Err(invalid(format!("a setting has type tag {other}"))),
            });
        }
        settings::check_all(schema, &given).map_err(|e| invalid(format!("a setting is refused ({e})")))
    }

    /// The end of the body: nothing may follow the state.
    pub fn finish(self) -> Result<(), SnapshotError> {
        match self.data.len() {
            0 => Ok(()),
            count => Err(SnapshotError::TrailingBytes { count }),
        }
    }
}

/// The length of the last snapshot sealed of each kind (by its number), with some slack: the
/// next one's buffer starts that large, up to `MAX_SEALED_HINT`, so a snapshot is written with
/// no reallocation and no copy of its body (detectors of one kind snapshot to similar sizes).
static SEALED_LEN: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

/// The largest buffer a snapshot starts with: one huge snapshot (a chant's long history) must
/// not make every small one after it allocate as much.
const MAX_SEALED_HINT: usize = 1 << 20;

/// A snapshot of `kind` under `schema` whose body `write` fills.
pub fn seal(kind: SnapshotKind, schema: &Schema, write: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let sealed = SEALED_LEN.get(kind as usize);
    let hint = sealed.map_or(0, |len| len.load(Ordering::Relaxed)).min(MAX_SEALED_HINT);
    let mut out = Writer {
        buf: Vec::with_capacity(hint.max(HEADER_LEN + CHECKSUM_LEN)),
    };
    out.buf.extend_from_slice(MAGIC);
    out.buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.buf.push(kind as u8);
    out.buf.push(0);
    out.buf.extend_from_slice(&schema_digest(schema).to_le_bytes());
    out.buf.extend_from_slice(&[0; 4]); // the body's length, once written
    write(&mut out);
    let mut out = out.buf;
    let body_len = u32::try_from(out.len() - HEADER_LEN).unwrap_or(u32::MAX);
    out[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&body_len.to_le_bytes());
    let checksum = xxh3_64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    if let Some(sealed) = sealed {
        sealed.store(out.len() + out.len() / 8, Ordering::Relaxed);
    }
    out
}

/// The body of a snapshot of `kind` under `schema`, after checking the header and checksum.
pub fn open<'a>(data: &'a [u8], kind: SnapshotKind, schema: &Schema) -> Result<Reader<'a>, SnapshotError> {
    let mut header = Reader { data, offset: 0 };
    if data.len() < 4 || &data[..4] != MAGIC {
        return Err(SnapshotError::NotASnapshot);
    }
    header.take(4, "the magic")?;
    let version = header.u16("the format version")?;
    if version > FORMAT_VERSION {
        return Err(SnapshotError::NewerVersion { found: version });
    }
    if version == 0 {
        return Err(invalid("format version 0"));
    }
    let found = header.u8("the kind")?;
    let found = SnapshotKind::of(found).ok_or(SnapshotError::UnknownKind { found })?;
    if found != kind {
        return Err(SnapshotError::WrongKind { expected: kind, found });
    }
    if header.u8("the reserved byte")? != 0 {
        return Err(invalid("the reserved header byte is not 0"));
    }
    let schema_found = header.u64("the schema digest")?;
    let declared = u64::from(header.u32("the body length")?);
    let actual = header.data.len().saturating_sub(CHECKSUM_LEN) as u64;
    if declared != actual || header.data.len() < CHECKSUM_LEN {
        return Err(SnapshotError::LengthMismatch { declared, actual });
    }
    let signed = HEADER_LEN + actual as usize;
    let mut stored = [0u8; CHECKSUM_LEN];
    stored.copy_from_slice(&data[signed..]);
    if xxh3_64(&data[..signed]) != u64::from_le_bytes(stored) {
        return Err(SnapshotError::Checksum);
    }
    // Checked after the checksum: a flipped bit is "corrupt", a real other schema is named.
    if schema_found != schema_digest(schema) {
        return Err(SnapshotError::OtherSchema { kind });
    }
    Ok(Reader {
        data: &data[HEADER_LEN..signed],
        offset: HEADER_LEN,
    })
}

/// The checksum a sealed snapshot ends with; None for bytes too short to be one.
pub fn sealed_checksum(data: &[u8]) -> Option<u64> {
    let tail = data.len().checked_sub(CHECKSUM_LEN).filter(|&at| at >= HEADER_LEN)?;
    let mut stored = [0u8; CHECKSUM_LEN];
    stored.copy_from_slice(data.get(tail..)?);
    Some(u64::from_le_bytes(stored))
}

/// `data`, a sealed snapshot, with the f64 written at offset `at` replaced by `value` and
/// the checksum made anew (a snapshot whose state is unchanged but for a clock reading);
/// None when `at` is not inside the body.
pub fn resealed_with_f64(data: &[u8], at: usize, value: f64) -> Option<Vec<u8>> {
    let signed = data.len().checked_sub(CHECKSUM_LEN)?;
    if at < HEADER_LEN || at.checked_add(8)? > signed {
        return None;
    }
    let mut out = data.to_vec();
    out.get_mut(at..at + 8)?.copy_from_slice(&value.to_bits().to_le_bytes());
    let checksum = xxh3_64(out.get(..signed)?);
    out.get_mut(signed..)?.copy_from_slice(&checksum.to_le_bytes());
    Some(out)
}

/// A state that can be saved in and restored from a snapshot.
pub trait Snapshot: Sized {
    const KIND: SnapshotKind;
    fn schema() -> &'static Schema;
    fn write_body(&self, w: &mut Writer);
    fn read_body(r: &mut Reader<'_>) -> Result<Self, SnapshotError>;

    fn to_snapshot(&self) -> Vec<u8> {
        seal(Self::KIND, Self::schema(), |w| self.write_body(w))
    }

    fn from_snapshot(data: &[u8]) -> Result<Self, SnapshotError> {
        let mut r = open(data, Self::KIND, Self::schema())?;
        let state = Self::read_body(&mut r)?;
        r.finish()?;
        Ok(state)
    }
}

/// The settings values of a snapshot of `kind` (checked), without reading its state.
pub fn settings_of(data: &[u8], kind: SnapshotKind, schema: &'static Schema) -> Result<Vec<Value>, SnapshotError> {
    open(data, kind, schema)?.settings(schema)
}

/// The magic that opens a `Monitor` snapshot (its last byte is the format's version).
///
/// A `Monitor` snapshot frames four parts: the monitor's JSON header, then the tool-loop,
/// session and chant detectors' snapshots (the chant's empty when there is none), each a
/// little-endian `u32` length and its bytes (docs/snapshots.md).
pub const MONITOR_MAGIC: &[u8; 6] = b"DLMON\x01";

/// The parts a `Monitor` snapshot frames.
pub const MONITOR_PARTS: usize = 4;

/// The parts of a `Monitor` snapshot, or what is wrong with its framing.
pub fn monitor_parts(data: &[u8]) -> Result<[&[u8]; MONITOR_PARTS], &'static str> {
    let mut rest = data
        .strip_prefix(MONITOR_MAGIC.as_slice())
        .ok_or("not a Monitor snapshot (bad magic or version)")?;
    let mut parts: [&[u8]; MONITOR_PARTS] = [&[]; MONITOR_PARTS];
    for part in &mut parts {
        let (length, after) = rest
            .split_first_chunk::<4>()
            .ok_or("corrupt Monitor snapshot: truncated")?;
        let length = usize::try_from(u32::from_le_bytes(*length)).unwrap_or(usize::MAX);
        if length > after.len() {
            return Err("corrupt Monitor snapshot: a part runs past its end");
        }
        (*part, rest) = after.split_at(length);
    }
    if !rest.is_empty() {
        return Err("corrupt Monitor snapshot: trailing bytes");
    }
    Ok(parts)
}

/// A `Monitor` snapshot of `parts` (None when one is 4 GiB or longer: its length has no
/// encoding).
pub fn pack_monitor(parts: [&[u8]; MONITOR_PARTS]) -> Option<Vec<u8>> {
    let total = parts.iter().map(|part| part.len() + 4).sum::<usize>();
    let mut data = Vec::with_capacity(MONITOR_MAGIC.len() + total);
    data.extend_from_slice(MONITOR_MAGIC);
    for part in parts {
        data.extend_from_slice(&u32::try_from(part.len()).ok()?.to_le_bytes());
        data.extend_from_slice(part);
    }
    Some(data)
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::settings::count;

    static PROBE: Schema = Schema {
        owner: "Probe",
        settings: &[count("window_size", 3, 1, 1_000)],
        joint: None,
        shape_digest: OnceLock::new(),
    };

    struct Probe(Vec<Value>, u64);

    impl Snapshot for Probe {
        const KIND: SnapshotKind = SnapshotKind::Chant;
        fn schema() -> &'static Schema {
            &PROBE
        }
        fn write_body(&self, w: &mut Writer) {
            w.settings(&self.0);
            w.u64(self.1);
        }
        fn read_body(r: &mut Reader<'_>) -> Result<Self, SnapshotError> {
            Ok(Probe(r.settings(&PROBE)?, r.u64("the probe")?))
        }
    }

    fn probe() -> Vec<u8> {
        Probe(vec![Value::Count(5)], 42).to_snapshot()
    }

    #[test]
    fn monitor_framing_round_trips_and_names_what_is_wrong() {
        let parts: [&[u8]; MONITOR_PARTS] = [b"{}", b"tool", b"", b"chant"];
        let data = pack_monitor(parts).unwrap();
        assert_eq!(&data[..6], MONITOR_MAGIC);
        assert_eq!(monitor_parts(&data), Ok(parts));
        assert_eq!(
            monitor_parts(b"DLMON\x02"),
            Err("not a Monitor snapshot (bad magic or version)")
        );
        assert_eq!(
            monitor_parts(&data[..data.len() - 1]),
            Err("corrupt Monitor snapshot: a part runs past its end")
        );
        assert_eq!(monitor_parts(&data[..8]), Err("corrupt Monitor snapshot: truncated"));
        let mut longer = data.clone();
        longer.push(0);
        assert_eq!(monitor_parts(&longer), Err("corrupt Monitor snapshot: trailing bytes"));
        let mut huge = MONITOR_MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            monitor_parts(&huge),
            Err("corrupt Monitor snapshot: a part runs past its end")
        );
    }

    #[test]
    fn round_trip() {
        let back = Probe::from_snapshot(&probe()).unwrap();
        assert_eq!((back.0, back.1), (vec![Value::Count(5)], 42));
    }

    #[test]
    fn every_truncation_and_every_flipped_bit_is_an_error() {
        let data = probe();
        for n in 0..data.len() {
            assert!(Probe::from_snapshot(&data[..n]).is_err(), "truncated at {n}");
        }
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[i] ^= 1 << bit;
                assert!(Probe::from_snapshot(&bad).is_err(), "bit {bit} of byte {i}");
            }
        }
    }

    #[test]
    fn foreign_headers_are_named() {
        let data = probe();
        let mut newer = data.clone();
        newer[4] = 9;
        assert_eq!(
            Probe::from_snapshot(&newer).err(),
            Some(SnapshotError::NewerVersion { found: 9 })
        );
        let mut other = data.clone();
        other[6] = SnapshotKind::Session as u8;
        assert!(matches!(
            Probe::from_snapshot(&other),
            Err(SnapshotError::WrongKind { .. })
        ));
        assert_eq!(Probe::from_snapshot(b"{}").err(), Some(SnapshotError::NotASnapshot));
    }

    #[test]
    fn out_of_range_settings_are_refused() {
        let data = Probe(vec![Value::Count(0)], 1).to_snapshot();
        let err = Probe::from_snapshot(&data).err().unwrap();
        assert!(err.to_string().contains("window_size"), "{err}");
    }
}
