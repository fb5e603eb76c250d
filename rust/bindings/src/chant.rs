//! `ChantEngine`: the Rust half of `doomloop.ChantDetector` (which subclasses it), with its
//! reader of token ids, and `TextGuard`, the iterator behind `doomloop.guard_stream`.
//!
//! State lives behind one `Mutex` in a frozen pyclass. Chunks of at least
//! `CHANT_DETACH_THRESHOLD` symbols are scanned with the interpreter released, so other
//! threads keep running; the Python event factory is only called with the lock released.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use doomloop_engine::chant::{
    chant_snapshot, restore_chant, Chant, ChantConfig, ChantEvent, ChantStream, HashKey, Token, CHANT,
};
use doomloop_engine::settings::Value;
use numpy::ndarray::s;
use numpy::{Element, PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyIterator, PyList, PyTuple};

use crate::chunks::{scan_text, CHANT_DETACH_THRESHOLD, PIECE};
use crate::errors::{snapshot_bytes, snapshot_error};
use crate::ffi::{is_imported, lock, type_name};
use crate::settings::checked;

/// Characters (or tokens) of the repeated window kept in an event.
const DISPLAY: usize = 120;

/// Which kind of stream a detector has been fed since it was created or reset.
enum Stream {
    Fresh,
    Text(Chant<u32>),
    Tokens(Chant<Token>),
    /// Reset: the old detector is kept for reuse (no reallocation) if the next stream is of
    /// the same kind.
    Reset(Box<Stream>),
}

impl Stream {
    fn text_chant(&mut self, config: ChantConfig, key: HashKey) -> PyResult<&mut Chant<u32>> {
        // Moving a detector is a copy of its state: only done when the stream starts.
        if !matches!(self, Stream::Text(_) | Stream::Tokens(_)) {
            *self = match std::mem::replace(self, Stream::Fresh) {
                Stream::Reset(old) if matches!(*old, Stream::Text(_)) => *old,
                _ => Stream::Text(Chant::with_key(config, key)),
            };
        }
        match self {
            Stream::Text(chant) => Ok(chant),
            _ => Err(PyValueError::new_err(
                "this detector was fed token ids; call reset() before feeding text",
            )),
        }
    }

    fn token_chant(&mut self, config: ChantConfig, key: HashKey) -> PyResult<&mut Chant<Token>> {
        if !matches!(self, Stream::Text(_) | Stream::Tokens(_)) {
            *self = match std::mem::replace(self, Stream::Fresh) {
                Stream::Reset(old) if matches!(*old, Stream::Tokens(_)) => *old,
                _ => Stream::Tokens(Chant::with_key(config, key)),
            };
        }
        match self {
            Stream::Tokens(chant) => Ok(chant),
            _ => Err(PyValueError::new_err(
                "this detector was fed text; call reset() before feeding token ids",
            )),
        }
    }

    fn has_found(&self) -> bool {
        match self {
            Stream::Text(chant) => chant.event().is_some(),
            Stream::Tokens(chant) => chant.event().is_some(),
            Stream::Fresh | Stream::Reset(_) => false,
        }
    }

    /// Bytes held outside the Python object: the detector's history, chain table and found
    /// chant, and the box a reset detector is kept in.
    fn heap_bytes(&self) -> usize {
        match self {
            Stream::Fresh => 0,
            Stream::Text(chant) => chant.heap_bytes(),
            Stream::Tokens(chant) => chant.heap_bytes(),
            Stream::Reset(old) => std::mem::size_of::<Stream>() + old.heap_bytes(),
        }
    }

    /// The stream as a snapshot saves it (a reset stream is a fresh one: its detector is
    /// only kept for its allocations).
    fn saved(&self) -> ChantStream<&Chant<u32>, &Chant<Token>> {
        match self {
            Stream::Text(chant) => ChantStream::Text(chant),
            Stream::Tokens(chant) => ChantStream::Tokens(chant),
            Stream::Fresh | Stream::Reset(_) => ChantStream::Fresh,
        }
    }

    /// The chant found (the engine keeps it until reset), as event fields.
    fn found(&self) -> Option<Found> {
        match self {
            Stream::Text(chant) => chant.event().map(|e| Found::Text(e.clone())),
            Stream::Tokens(chant) => chant.event().map(|e| Found::Tokens(e.clone())),
            Stream::Fresh | Stream::Reset(_) => None,
        }
    }
}

/// A chant found, before it becomes a Python event.
enum Found {
    Text(ChantEvent<u32>),
    Tokens(ChantEvent<Token>),
}

struct State {
    stream: Stream,
    /// The detector's hash key, kept across `reset()` (a restored snapshot brings its own).
    key: HashKey,
    /// The Python event of the chant found, once built; a chant whose event has not been
    /// built yet (the build failed, say, with an exception arriving there) is still handed
    /// out by the next `feed` and by `event`.
    event: Option<Py<PyAny>>,
}

#[pyclass(module = "doomloop._core", subclass, frozen)]
pub struct ChantEngine {
    state: Mutex<State>,
    config: ChantConfig,
    /// The checked settings it was built from (what a snapshot saves).
    settings: Vec<Value>,
    /// Builds an event from its fields as keywords (`doomloop.ChantEvent`).
    event_type: Py<PyAny>,
    /// Called as `(detector, event)` once per chant found, when its event is handed out
    /// (the Python layer logs it and reports it to `on_event`).
    on_chant: Option<Py<PyAny>>,
}

impl ChantEngine {
    /// `to_bytes()`'s bytes.
    pub(crate) fn snapshot(&self, py: Python<'_>) -> Vec<u8> {
        let state = lock(py, &self.state);
        chant_snapshot(&self.settings, state.key, state.stream.saved(), state.event.is_some())
    }

    /// Deliver the chant the stream holds (the engine keeps it until reset), if its event has
    /// not been delivered yet: build the event (lock released: it runs Python code) and hand
    /// it out once, to the first caller that stores it, which also reports it to `on_chant`.
    fn deliver(slf: &Bound<'_, Self>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let engine = slf.get();
        let found = {
            let state = lock(py, &engine.state);
            if state.event.is_some() {
                return Ok(None);
            }
            state.stream.found()
        };
        let Some(found) = found else {
            return Ok(None);
        };
        let event = engine.build_event(py, found)?;
        {
            let mut state = lock(py, &engine.state);
            if state.event.is_some() {
                return Ok(None);
            }
            state.event = Some(event.clone_ref(py));
        }
        if let Some(on_chant) = &engine.on_chant {
            on_chant.call1(py, (slf, event.clone_ref(py)))?;
        }
        Ok(Some(event))
    }

    fn build_event(&self, py: Python<'_>, found: Found) -> PyResult<Py<PyAny>> {
        let fields = PyDict::new(py);
        let event = match found {
            Found::Text(event) => {
                // Display text only: a lone surrogate shows as U+FFFD.
                let window: String = event
                    .window
                    .iter()
                    .take(DISPLAY)
                    .map(|&c| char::from_u32(c).unwrap_or('\u{FFFD}'))
                    .collect();
                fields.set_item(intern!(py, "window"), window)?;
                (event.start, event.end, event.period, event.count)
            }
            Found::Tokens(event) => {
                // Token ids are stored as the bits of an i64 (every accepted dtype fits one).
                let ids = event.window.iter().take(DISPLAY).map(|t| t.0 as i64);
                fields.set_item(intern!(py, "window"), PyTuple::new(py, ids)?)?;
                (event.start, event.end, event.period, event.count)
            }
        };
        let (start, end, period, count) = event;
        fields.set_item(intern!(py, "count"), count)?;
        fields.set_item(intern!(py, "period"), period)?;
        fields.set_item(intern!(py, "start"), start)?;
        fields.set_item(intern!(py, "end"), end)?;
        Ok(self.event_type.bind(py).call((), Some(&fields))?.unbind())
    }

    /// Run `read` on the token stream with the state locked (locked before the input is read:
    /// waiting for the lock releases the interpreter, and another thread could resize an
    /// array meanwhile), unless a chant found latches the stream; deliver a chant found.
    fn feed_token_stream(
        slf: &Bound<'_, Self>,
        read: impl FnOnce(&mut Chant<Token>) -> PyResult<Option<ChantEvent<Token>>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let engine = slf.get();
        let step = {
            let mut state = lock(py, &engine.state);
            match Self::next_step(&state) {
                Step::Read => {
                    let key = state.key;
                    let chant = state.stream.token_chant(engine.config, key)?;
                    if read(chant)?.is_some() {
                        Step::Deliver
                    } else {
                        Step::Read
                    }
                }
                other => other,
            }
        };
        match step {
            Step::Deliver => Self::deliver(slf),
            Step::Read | Step::Ignore => Ok(None),
        }
    }

    /// What a feed does with its input: read it, or, when the stream has found a chant,
    /// ignore it (latched) and deliver the chant if its event was never handed out.
    fn next_step(state: &State) -> Step {
        match (&state.event, state.stream.has_found()) {
            (Some(_), _) => Step::Ignore,
            (None, true) => Step::Deliver,
            (None, false) => Step::Read,
        }
    }
}

/// See [`ChantEngine::next_step`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Read,
    Deliver,
    Ignore,
}

/// The token ids of a list of ints, each stored as the bits of its 64-bit signed value (as an
/// int64 array's are, so a list and an array of the same ids read alike).
fn token_ids(list: &Bound<'_, PyList>) -> PyResult<Vec<Token>> {
    let mut ids = Vec::with_capacity(list.len());
    for (index, item) in list.iter().enumerate() {
        let int = item
            .cast::<PyInt>()
            .ok()
            .filter(|_| !item.is_instance_of::<PyBool>())
            .ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "tokens must be a list of ints, got {} at index {index}",
                    type_name(&item)
                ))
            })?;
        let id: i64 = int
            .extract()
            .map_err(|_| PyValueError::new_err(format!("tokens[{index}] does not fit in 64 bits")))?;
        ids.push(Token(id as u64));
    }
    Ok(ids)
}

/// Scan a 1-D array of token ids with `state` locked: in place while short (the interpreter
/// is held, so nothing can resize the array meanwhile), else copied out `PIECE` at a time with
/// the interpreter held and each piece scanned with it released (another thread may then
/// resize or free the array's memory: the scan only ever reads its own copy).
fn scan_tokens<T: Element + Copy>(
    py: Python<'_>,
    array: &Bound<'_, PyArray1<T>>,
    chant: &mut Chant<Token>,
    to_token: fn(T) -> Token,
) -> PyResult<Option<ChantEvent<Token>>> {
    if array.len() < CHANT_DETACH_THRESHOLD {
        let view = array.try_readonly()?;
        return Ok(match view.as_slice() {
            Ok(slice) => chant.feed_slice(slice, to_token),
            Err(_) => chant.feed(view.as_array().iter().map(|&t| to_token(t))),
        });
    }
    let mut piece: Vec<Token> = Vec::with_capacity(PIECE);
    let mut start: usize = 0;
    loop {
        piece.clear();
        {
            let view = array.try_readonly()?;
            let tokens = view.as_array();
            // Re-read every piece: another thread may have resized the array meanwhile.
            let end = tokens.len().min(start.saturating_add(PIECE));
            if start >= end {
                return Ok(None);
            }
            piece.extend(tokens.slice(s![start..end]).iter().map(|&t| to_token(t)));
            start = end;
        }
        if let Some(event) = py.detach(|| chant.feed_slice(&piece, |t| t)) {
            return Ok(Some(event));
        }
    }
}

#[pymethods]
impl ChantEngine {
    /// Build from a `ChantDetector`'s settings (in `settings_of("ChantDetector")` order:
    /// content_chunk_size, max_repeated_chunks, ignore_whitespace, max_period, seed; checked
    /// here). `seed` derives the hash key (`HashKey::from_seed`) instead of drawing a secret
    /// random one, so a verdict can be reproduced; `_hash_key` (base, salt) gives the key
    /// itself, for tests that model the rule exactly. `_event_type` builds events from their
    /// fields as keywords (default: a dict).
    #[new]
    #[pyo3(signature = (settings, /, *, _hash_key = None, _event_type = None, _on_chant = None))]
    fn new(
        settings: &Bound<'_, PyTuple>,
        _hash_key: Option<(u64, u64)>,
        _event_type: Option<Py<PyAny>>,
        _on_chant: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let py = settings.py();
        let settings = checked(&CHANT, settings)?;
        let config = ChantConfig::from_values(&settings);
        let seed = CHANT
            .index("seed")
            .and_then(|i| settings.get(i))
            .and_then(|value| value.optional_count());
        let key = match (seed, _hash_key) {
            (Some(_), Some(_)) => return Err(PyValueError::new_err("ChantDetector takes seed or _hash_key, not both")),
            (Some(seed), None) => HashKey::from_seed(seed),
            (None, Some((base, salt))) => HashKey { base, salt },
            (None, None) => HashKey::random(),
        };
        let event_type = match _event_type {
            Some(event_type) if event_type.bind(py).is_callable() => event_type,
            Some(_) => return Err(PyTypeError::new_err("_event_type must be callable")),
            None => py.get_type::<PyDict>().into_any().unbind(),
        };
        if _on_chant.as_ref().is_some_and(|hook| !hook.bind(py).is_callable()) {
            return Err(PyTypeError::new_err("_on_chant must be callable"));
        }
        Ok(ChantEngine {
            state: Mutex::new(State {
                stream: Stream::Fresh,
                key,
                event: None,
            }),
            config,
            settings,
            event_type,
            on_chant: _on_chant,
        })
    }

    /// Feed one chunk of text; returns a `ChantEvent` when chanting is found in this chunk.
    #[pyo3(signature = (text, /))]
    fn feed(slf: &Bound<'_, Self>, text: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let engine = slf.get();
        let config = engine.config;
        // Only whether a chant waits crosses the scan: its fields stay in the engine.
        let mut outcome: PyResult<Step> = Ok(Step::Ignore);
        scan_text(text, "text", &engine.state, |state, input, piece| {
            if piece.first {
                outcome = match Self::next_step(state) {
                    Step::Read => {
                        let key = state.key;
                        state.stream.text_chant(config, key).map(|_| Step::Read)
                    }
                    other => Ok(other),
                };
            }
            if let (Ok(Step::Read), Stream::Text(chant)) = (&outcome, &mut state.stream) {
                if chant.feed_text(input).is_some() {
                    outcome = Ok(Step::Deliver);
                }
            }
        })?;
        match outcome? {
            Step::Deliver => Self::deliver(slf),
            Step::Read | Step::Ignore => Ok(None),
        }
    }

    /// Feed token ids: a list of ints (no numpy needed), or a 1-D numpy array (int32, int64
    /// or uint32) read without copying while short.
    #[pyo3(signature = (tokens, /))]
    fn feed_tokens(slf: &Bound<'_, Self>, tokens: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let py = tokens.py();
        if let Ok(list) = tokens.cast::<PyList>() {
            // Read whole before the lock is taken: a bad item feeds nothing.
            let ids = token_ids(list)?;
            return Self::feed_token_stream(slf, |chant| {
                Ok(if ids.len() >= CHANT_DETACH_THRESHOLD {
                    py.detach(|| chant.feed_slice(&ids, |t| t))
                } else {
                    chant.feed_slice(&ids, |t| t)
                })
            });
        }
        // An array exists only once numpy is imported; asking numpy's C API about anything
        // before then would import it, and fail (a panic in the numpy crate) without it.
        if !is_imported(py, intern!(py, "numpy")) {
            return Err(PyTypeError::new_err(format!(
                "tokens must be a list of ints or a 1-D numpy array, got {} (numpy arrays need the \
                 numpy extra: pip install \".[numpy]\" from doomloop's project root)",
                type_name(tokens)
            )));
        }
        let array = tokens.cast::<PyUntypedArray>().map_err(|_| {
            PyTypeError::new_err(format!(
                "tokens must be a list of ints or a 1-D numpy array, got {}",
                type_name(tokens)
            ))
        })?;
        if array.ndim() != 1 {
            return Err(PyValueError::new_err(format!(
                "tokens must be a 1-D array, got {} dimensions",
                array.ndim()
            )));
        }
        Self::feed_token_stream(slf, |chant| {
            if let Ok(a) = array.cast::<PyArray1<i32>>() {
                scan_tokens(py, a, chant, |t| Token(i64::from(t) as u64))
            } else if let Ok(a) = array.cast::<PyArray1<i64>>() {
                scan_tokens(py, a, chant, |t| Token(t as u64))
            } else if let Ok(a) = array.cast::<PyArray1<u32>>() {
                scan_tokens(py, a, chant, |t| Token(u64::from(t)))
            } else {
                Err(PyTypeError::new_err(format!(
                    "tokens must have dtype int32, int64 or uint32, got {}",
                    array.dtype()
                )))
            }
        })
    }

    /// Forget the stream (text or tokens) and any chant found; start afresh.
    fn reset(&self, py: Python<'_>) {
        let mut state = lock(py, &self.state);
        let event = state.event.take();
        state.stream = match std::mem::replace(&mut state.stream, Stream::Fresh) {
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
        drop(state);
        // The old event is released with the lock free (dropping it may run Python code).
        drop(event);
    }

    /// The chant found since creation or `reset()`, or None.
    #[getter]
    fn event(slf: &Bound<'_, Self>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        Self::deliver(slf)?;
        Ok(lock(py, &slf.get().state).event.as_ref().map(|e| e.clone_ref(py)))
    }

    /// The detector's settings and whole state as a snapshot (docs/snapshots.md): the stream
    /// (text or tokens) with its history, chains and hash key, and any chant found.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.snapshot(py))
    }

    /// Replace the state with a snapshot's (made under the same settings); on any error the
    /// state is left as it was. A chant the snapshot had already reported is not reported
    /// again: its event is built here, and a later feed ignores its input as the original's
    /// would.
    fn _restore(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let data = snapshot_bytes(data)?;
        let restored = restore_chant(&data).map_err(|e| snapshot_error(py, e))?;
        if restored.settings != self.settings {
            return Err(PyValueError::new_err("the snapshot's settings are not this detector's"));
        }
        let stream = match restored.stream {
            ChantStream::Fresh => Stream::Fresh,
            ChantStream::Text(chant) => Stream::Text(chant),
            ChantStream::Tokens(chant) => Stream::Tokens(chant),
        };
        // Built before the lock is taken: it runs Python code.
        let event = match stream.found() {
            Some(found) if restored.reported => Some(self.build_event(py, found)?),
            _ => None,
        };
        let old = std::mem::replace(
            &mut *lock(py, &self.state),
            State {
                stream,
                key: restored.key,
                event,
            },
        );
        // The old event is released with the lock free (dropping it may run Python code).
        drop(old);
        Ok(())
    }

    /// Characters or tokens consumed since creation or `reset()` (it stops growing once
    /// chanting is found).
    #[getter]
    fn position(&self, py: Python<'_>) -> u64 {
        match &lock(py, &self.state).stream {
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

    /// Bytes this detector's Rust state holds outside the Python object (history, chain
    /// table, the chant found).
    fn _state_size(&self, py: Python<'_>) -> usize {
        lock(py, &self.state).stream.heap_bytes()
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
