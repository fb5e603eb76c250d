//! The text of a streamed chunk, read for a scan without copying where it can be: the
//! reader shared by the chant detector and the session detector's streamed responses.

use std::cell::RefCell;
use std::sync::Mutex;

use doomloop_engine::chant::TextInput;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::ffi;

/// Chunks at least this long (bytes of a str read as ASCII or UTF-8, code points of one copied
/// out as code points, or tokens) are scanned with the interpreter lock released.
pub(crate) const CHANT_DETACH_THRESHOLD: usize = 1 << 14;

/// Non-ASCII strs at least this long (in code points) are copied out as code points: faster
/// to scan than UTF-8, and CPython would otherwise keep a UTF-8 copy on the str.
const COPY_THRESHOLD: usize = 1024;

/// Long non-ASCII text and long token arrays are copied out and scanned in pieces of at most
/// this many symbols: the copy needs a bounded buffer whatever the chunk's size, and the
/// interpreter is held for one piece's copy at a time, never for a whole chunk.
pub(crate) const PIECE: usize = 1 << 20;

/// Largest code-point buffer a thread keeps between feeds (256 KiB: a 64 KiB chunk fits); a
/// longer chunk's buffer (at most one piece, 4 MiB) is freed after its feed.
const KEEP_BUFFER: usize = 1 << 16;

thread_local! {
    // Reused across feeds (a fresh buffer per chunk would cost page faults); every piece
    // overwrites the part it scans, so no feed ever reads what another left here.
    static CODE_POINTS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Where a piece of a chunk stands in it (the session detector frames whole responses).
#[derive(Clone, Copy)]
pub(crate) struct Piece {
    pub(crate) first: bool,
    pub(crate) last: bool,
}

/// Lock `state` and run `scan` on the text of a `str` chunk (anything else is a TypeError
/// naming `name`), piece by piece, in the cheapest form: borrowed from the str (ASCII bytes,
/// or short UTF-8 text; one piece) or its code points copied out `PIECE` at a time (long
/// non-ASCII text, or text with lone surrogates, which UTF-8 cannot carry). Length and data
/// come from the str object itself, never from methods a subclass could override. Pieces of
/// at least `CHANT_DETACH_THRESHOLD` symbols are scanned with the interpreter released; the
/// lock is held across all pieces, so a chunk is applied whole before any other.
pub(crate) fn scan_text<T: Send>(
    chunk: &Bound<'_, PyAny>,
    name: &str,
    state: &Mutex<T>,
    mut scan: impl FnMut(&mut T, TextInput<'_>, Piece) + Send,
) -> PyResult<()> {
    let py = chunk.py();
    let string = chunk
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str, got {}", ffi::type_name(chunk))))?;
    let length = ffi::str_length(string)?;
    let whole = Piece {
        first: true,
        last: true,
    };
    if length < COPY_THRESHOLD || ffi::is_ascii(string)? {
        if let Ok(utf8) = string.to_str() {
            let input = if utf8.is_ascii() {
                TextInput::Ascii(utf8.as_bytes())
            } else {
                TextInput::Utf8(utf8)
            };
            let mut guard = ffi::lock(py, state);
            let state: &mut T = &mut guard;
            if input.len() >= CHANT_DETACH_THRESHOLD {
                py.detach(|| scan(state, input, whole));
            } else {
                scan(state, input, whole);
            }
            return Ok(());
        }
    }
    let kept = CODE_POINTS.try_with(|cell| cell.try_borrow_mut().map(|mut kept| std::mem::take(&mut *kept)));
    let mut buffer = match kept {
        Ok(Ok(buffer)) => buffer,
        _ => Vec::new(),
    };
    buffer.resize(PIECE.min(length), 0);
    let scanned = scan_code_points(string, length, &mut buffer, state, &mut scan);
    if buffer.capacity() <= KEEP_BUFFER {
        // Put it back (a no-op if the thread is exiting).
        let _ = CODE_POINTS.try_with(|cell| cell.try_borrow_mut().map(|mut kept| *kept = buffer));
    }
    scanned
}

fn scan_code_points<T: Send>(
    string: &Bound<'_, PyString>,
    length: usize,
    buffer: &mut [u32],
    state: &Mutex<T>,
    scan: &mut (impl FnMut(&mut T, TextInput<'_>, Piece) + Send),
) -> PyResult<()> {
    let py = string.py();
    let mut guard = ffi::lock(py, state);
    let state: &mut T = &mut guard;
    let mut start = 0;
    loop {
        let end = length.min(start + PIECE);
        let piece = copy_code_points(string, start, end, end - start == length, buffer)?;
        let place = Piece {
            first: start == 0,
            last: end == length,
        };
        if piece.len() >= CHANT_DETACH_THRESHOLD {
            py.detach(|| scan(state, TextInput::CodePoints(piece), place));
        } else {
            scan(state, TextInput::CodePoints(piece), place);
        }
        if place.last {
            return Ok(());
        }
        start = end;
    }
}

/// Code points `start..end` of a str (`whole`: all of it), lone surrogates included, copied
/// into `buffer` (which holds at least `end - start`).
fn copy_code_points<'b>(
    string: &Bound<'_, PyString>,
    start: usize,
    end: usize,
    whole: bool,
    buffer: &'b mut [u32],
) -> PyResult<&'b [u32]> {
    let target = buffer
        .get_mut(..end.saturating_sub(start))
        .ok_or_else(|| PyValueError::new_err("text piece larger than its buffer"))?;
    if whole {
        ffi::copy_code_points(string, target)?;
    } else {
        ffi::copy_code_points(&ffi::substring(string, start, end)?, target)?;
    }
    Ok(target)
}
