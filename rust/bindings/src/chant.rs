//! `ChantEngine`: the Rust half of `doomloop.ChantDetector` (which subclasses it), and the
//! zero-copy readers of text chunks and token arrays shared with the session engine.
//!
//! State lives behind one `Mutex` in a frozen pyclass. Chunks of at least
//! `CHANT_DETACH_THRESHOLD` symbols are scanned with the interpreter released, so other
//! threads keep running; the Python event factory is only called with the lock released.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use doomloop_engine::chant::{Chant, ChantConfig, ChantEvent, HashKey, TextInput, Token};
use numpy::{PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyString, PyTuple};
use pyo3::{ffi, intern};

/// Chunks at least this long (bytes of a str read as ASCII or UTF-8, code points of one copied
/// out as code points, or tokens) are scanned with the interpreter lock released.
pub const CHANT_DETACH_THRESHOLD: usize = 1 << 14;

/// Non-ASCII strs at least this long (in code points) are copied out as code points: faster
/// to scan than UTF-8, and CPython would otherwise keep a UTF-8 copy on the str.
const COPY_THRESHOLD: usize = 1024;

/// Largest code-point buffer a thread keeps between feeds (256 KiB: a 64 KiB chunk fits).
const KEEP_BUFFER: usize = 1 << 16;

thread_local! {
    // Reused across feeds: a fresh buffer per chunk would cost page faults at these sizes.
    static CODE_POINTS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Run `scan` on the text of a `str` chunk (anything else is a TypeError naming `name`), in
/// its cheapest form: borrowed from the str (ASCII bytes, or short UTF-8 text) or its code
/// points copied out (long non-ASCII text, or text with lone surrogates, which UTF-8
/// cannot carry). Chunks of at least `CHANT_DETACH_THRESHOLD` bytes or code points are
/// scanned with the interpreter released.
pub(crate) fn scan_text<R: Send>(
    chunk: &Bound<'_, PyAny>,
    name: &str,
    scan: impl FnOnce(TextInput<'_>) -> R + Send,
) -> PyResult<R> {
    let py = chunk.py();
    let run = |input: TextInput<'_>| {
        if input.len() >= CHANT_DETACH_THRESHOLD {
            py.detach(|| scan(input))
        } else {
            scan(input)
        }
    };
    let string = chunk
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str, got {}", type_name(chunk))))?;
    let length = string.len()?;
    // `isascii()` reads a flag of the str: worth a call only for long text.
    if length < COPY_THRESHOLD || string.call_method0(intern!(py, "isascii"))?.is_truthy()? {
        if let Ok(utf8) = string.to_str() {
            return Ok(run(if utf8.is_ascii() {
                TextInput::Ascii(utf8.as_bytes())
            } else {
                TextInput::Utf8(utf8)
            }));
        }
    }
    let kept = CODE_POINTS.try_with(|cell| cell.try_borrow_mut().map(|mut kept| std::mem::take(&mut *kept)));
    let mut buffer = match kept {
        Ok(Ok(buffer)) => buffer,
        _ => Vec::new(),
    };
    let found =
        copy_code_points(string, length, &mut buffer).map(|code_points| run(TextInput::CodePoints(code_points)));
    if buffer.capacity() <= KEEP_BUFFER {
        // Put it back (a no-op if the thread is exiting).
        let _ = CODE_POINTS.try_with(|cell| cell.try_borrow_mut().map(|mut kept| *kept = buffer));
    }
    found
}

/// The `length` code points of a str, lone surrogates included, copied into `buffer`.
fn copy_code_points<'b>(string: &Bound<'_, PyString>, length: usize, buffer: &'b mut Vec<u32>) -> PyResult<&'b [u32]> {
    if buffer.len() < length {
        buffer.resize(length, 0);
    }
    let target = buffer.get_mut(..length).unwrap_or_default();
    let size = isize::try_from(length).map_err(|_| PyValueError::new_err("text is too long"))?;
    // SAFETY: `target` holds `size` code points, the str's length; CPython writes at most
    // that many (no terminator with copy_null = 0) and returns NULL, with an exception set,
    // on failure.
    let written = unsafe { ffi::PyUnicode_AsUCS4(string.as_ptr(), target.as_mut_ptr(), size, 0) };
    if written.is_null() {
        return Err(PyErr::fetch(string.py()));
    }
    Ok(target)
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "an unknown type".to_owned(), |n| n.to_string())
}

/// Which kind of stream a detector has been fed since it was created or reset.
enum Stream {
    Fresh,
    Text(Chant<u32>),
    Tokens(Chant<Token>),
    /// Reset: the old detector is kept for reuse (no reallocation) if the next stream is of
    /// the same kind.
    Reset(Box<Stream>),
}

/// An event ready for the Python factory: (start, end, period, count, window).
type EventParts = (u64, u64, Option<u64>, u64, Py<PyAny>);

#[pyclass(module = "doomloop._core", subclass, frozen)]
pub struct ChantEngine {
    stream: Mutex<Stream>,
    config: ChantConfig,
    /// The detector's secret hash key, kept across `reset()`.
    key: HashKey,
}

impl ChantEngine {
    fn lock(&self) -> MutexGuard<'_, Stream> {
        // No code path panics while holding the lock; recover the data if one ever did.
        self.stream.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn text_chant<'a>(&self, stream: &'a mut Stream) -> PyResult<&'a mut Chant<u32>> {
        // Moving a detector is a copy of its state: only done when the stream starts.
        if !matches!(stream, Stream::Text(_) | Stream::Tokens(_)) {
            *stream = match std::mem::replace(stream, Stream::Fresh) {
                Stream::Reset(old) if matches!(*old, Stream::Text(_)) => *old,
                _ => Stream::Text(Chant::with_key(self.config, self.key)),
            };
        }
        match stream {
            Stream::Text(chant) => Ok(chant),
            _ => Err(PyValueError::new_err(
                "this detector was fed token ids; call reset() before feeding text",
            )),
        }
    }

    fn feed_token_slice<T: Copy + Send + Sync>(
        &self,
        py: Python<'_>,
        tokens: &[T],
        to_token: fn(T) -> Token,
    ) -> PyResult<Option<ChantEvent<Token>>> {
        let scan = || -> PyResult<Option<ChantEvent<Token>>> {
            let mut stream = self.lock();
            let chant = self.token_chant(&mut stream)?;
            Ok(chant.feed_slice(tokens, to_token))
        };
        if tokens.len() >= CHANT_DETACH_THRESHOLD {
            py.detach(scan)
        } else {
            scan()
        }
    }

    fn token_chant<'a>(&self, stream: &'a mut Stream) -> PyResult<&'a mut Chant<Token>> {
        if !matches!(stream, Stream::Text(_) | Stream::Tokens(_)) {
            *stream = match std::mem::replace(stream, Stream::Fresh) {
                Stream::Reset(old) if matches!(*old, Stream::Tokens(_)) => *old,
                _ => Stream::Tokens(Chant::with_key(self.config, self.key)),
            };
        }
        match stream {
            Stream::Tokens(chant) => Ok(chant),
            _ => Err(PyValueError::new_err(
                "this detector was fed text; call reset() before feeding token ids",
            )),
        }
    }

    /// Hand an event to the Python subclass's `_make_event` (lock released).
    fn emit(slf: &Bound<'_, Self>, parts: EventParts) -> PyResult<Py<PyAny>> {
        Ok(slf.call_method1("_make_event", parts)?.unbind())
    }
}

fn text_parts(py: Python<'_>, event: ChantEvent<u32>) -> PyResult<EventParts> {
    // Display text only: a lone surrogate shows as U+FFFD.
    let window: String = event
        .window
        .iter()
        .map(|&c| char::from_u32(c).unwrap_or('\u{FFFD}'))
        .collect();
    let window = PyString::new(py, &window).into_any().unbind();
    Ok((event.start, event.end, event.period, event.count, window))
}

fn token_parts(py: Python<'_>, event: ChantEvent<Token>) -> PyResult<EventParts> {
    // Token ids are stored as the bits of an i64 (every accepted dtype fits one).
    let ids = event.window.iter().map(|t| t.0 as i64);
    let window = PyTuple::new(py, ids)?.into_any().unbind();
    Ok((event.start, event.end, event.period, event.count, window))
}

#[pymethods]
impl ChantEngine {
    /// Build a detector (the Python subclass validates the arguments first). `_hash_key`
    /// (base, salt) replaces the secret random key: for tests that model the rule exactly.
    #[new]
    #[pyo3(signature = (content_chunk_size = 50, max_repeated_chunks = 8, *, ignore_whitespace = true, max_period = 1000, _hash_key = None))]
    fn new(
        content_chunk_size: u64,
        max_repeated_chunks: u64,
        ignore_whitespace: bool,
        max_period: u64,
        _hash_key: Option<(u64, u64)>,
    ) -> PyResult<Self> {
        let config = ChantConfig {
            window: content_chunk_size,
            min_repeats: max_repeated_chunks,
            max_period,
            ignore_whitespace,
        };
        if let Some(problem) = config.problem() {
            return Err(PyValueError::new_err(problem));
        }
        let key = _hash_key.map_or_else(HashKey::random, |(base, salt)| HashKey { base, salt });
        Ok(ChantEngine {
            stream: Mutex::new(Stream::Fresh),
            config,
            key,
        })
    }

    /// Feed one chunk of text; returns a `ChantEvent` when chanting is found in this chunk.
    #[pyo3(signature = (text, /))]
    fn feed(slf: &Bound<'_, Self>, text: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let engine = slf.get();
        let found = scan_text(text, "text", |input| -> PyResult<Option<ChantEvent<u32>>> {
            let mut stream = engine.lock();
            let chant = engine.text_chant(&mut stream)?;
            Ok(chant.feed_text(input))
        })??;
        match found {
            Some(event) => Ok(Some(Self::emit(slf, text_parts(slf.py(), event)?)?)),
            None => Ok(None),
        }
    }

    /// Feed a 1-D numpy array of token ids (int32, int64 or uint32), read without copying.
    #[pyo3(signature = (tokens, /))]
    fn feed_tokens(slf: &Bound<'_, Self>, tokens: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let engine = slf.get();
        let array = tokens
            .cast::<PyUntypedArray>()
            .map_err(|_| PyTypeError::new_err(format!("tokens must be a numpy array, got {}", type_name(tokens))))?;
        if array.ndim() != 1 {
            return Err(PyValueError::new_err(format!(
                "tokens must be a 1-D array, got {} dimensions",
                array.ndim()
            )));
        }
        let found = if let Ok(a) = array.cast::<PyArray1<i32>>() {
            let view = a.try_readonly()?;
            match view.as_slice() {
                Ok(slice) => engine.feed_token_slice(py, slice, |t| Token(i64::from(t) as u64))?,
                Err(_) => engine.feed_token_slice(py, &view.as_array().to_vec(), |t| Token(i64::from(t) as u64))?,
            }
        } else if let Ok(a) = array.cast::<PyArray1<i64>>() {
            let view = a.try_readonly()?;
            match view.as_slice() {
                Ok(slice) => engine.feed_token_slice(py, slice, |t| Token(t as u64))?,
                Err(_) => engine.feed_token_slice(py, &view.as_array().to_vec(), |t| Token(t as u64))?,
            }
        } else if let Ok(a) = array.cast::<PyArray1<u32>>() {
            let view = a.try_readonly()?;
            match view.as_slice() {
                Ok(slice) => engine.feed_token_slice(py, slice, |t| Token(u64::from(t)))?,
                Err(_) => engine.feed_token_slice(py, &view.as_array().to_vec(), |t| Token(u64::from(t)))?,
            }
        } else {
            return Err(PyTypeError::new_err(format!(
                "tokens must have dtype int32, int64 or uint32, got {}",
                array.dtype()
            )));
        };
        match found {
            Some(event) => Ok(Some(Self::emit(slf, token_parts(py, event)?)?)),
            None => Ok(None),
        }
    }

    /// Forget the stream (text or tokens) and any chant found; start afresh.
    fn reset(&self) {
        let mut stream = self.lock();
        *stream = match std::mem::replace(&mut *stream, Stream::Fresh) {
            Stream::Text(mut chant) => {
                chant.reset();
                Stream::Reset(Box::new(Stream::Text(chant)))
            }
            Stream::Tokens(mut chant) => {
                chant.reset();
                Stream::Reset(Box::new(Stream::Tokens(chant)))
            }
            other => other,
        };
    }

    /// Characters or tokens consumed since creation or `reset()` (it stops growing once
    /// chanting is found).
    #[getter]
    fn position(&self) -> u64 {
        match &*self.lock() {
            Stream::Fresh | Stream::Reset(_) => 0,
            Stream::Text(chant) => chant.position(),
            Stream::Tokens(chant) => chant.position(),
        }
    }

    /// Symbols of history the detector keeps (its memory bound).
    #[getter]
    fn history_size(&self) -> u64 {
        self.config.history()
    }
}

/// The iterator behind `doomloop.guard_stream`: yields text chunks unchanged, feeding each
/// to a `ChantDetector`; on a chant it closes the source and raises `exception(event)` (or,
/// without an exception type, stops). Written in Rust so the guard adds no Python frame.
#[pyclass(module = "doomloop._core", frozen)]
pub struct TextGuard {
    source: Py<PyIterator>,
    detector: Py<ChantEngine>,
    exception: Option<Py<PyAny>>,
    finished: AtomicBool,
}

#[pymethods]
impl TextGuard {
    #[new]
    #[pyo3(signature = (source, detector, exception = None))]
    fn new(
        source: &Bound<'_, PyAny>,
        detector: &Bound<'_, ChantEngine>,
        exception: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        Ok(TextGuard {
            source: source.try_iter()?.unbind(),
            detector: detector.clone().unbind(),
            exception,
            finished: AtomicBool::new(false),
        })
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(slf: &Bound<'_, Self>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let guard = slf.get();
        if guard.finished.load(Ordering::Acquire) {
            return Ok(None);
        }
        let Some(chunk) = guard.source.bind(py).clone().next().transpose()? else {
            guard.finished.store(true, Ordering::Release);
            return Ok(None);
        };
        let Some(event) = ChantEngine::feed(guard.detector.bind(py), &chunk)? else {
            return Ok(Some(chunk.unbind()));
        };
        guard.finished.store(true, Ordering::Release);
        let source = guard.source.bind(py);
        if source.hasattr("close")? {
            source.call_method0("close")?;
        }
        match &guard.exception {
            Some(exception) => Err(PyErr::from_value(exception.bind(py).call1((event,))?)),
            None => Ok(None),
        }
    }
}
