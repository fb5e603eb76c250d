//! `SessionEngine`: the Rust half of `doomloop.DoomLoopDetector` (which subclasses it).
//!
//! State lives behind one `Mutex` in a frozen pyclass, so threads sharing a detector never
//! see "already borrowed" and lose no update. Python code (the clock, `model_dump()`, the
//! episode hook) is only ever called with the lock released: a thread blocked on the lock
//! while holding the GIL could otherwise deadlock with the holder waiting for the GIL.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use doomloop_engine::fingerprint::{hash_action, hash_none, Sketch, EMPTY_MAP};
use doomloop_engine::policy::ActionLimits;
use doomloop_engine::session::{
    failure_digest, failure_parts, Action, Finding, Session, SessionConfig, FAILURE_ARGUMENT_BYTES, FAILURE_HEAD_BYTES,
    FAILURE_TAIL_BYTES, SESSION,
};
use doomloop_engine::settings::{shared, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};

use crate::canonical::{
    fingerprint, fingerprint_and_sketch, fingerprint_memoizable, fingerprint_str, is_immutable_scalar, str_preview,
    text_bytes, DictSnapshot,
};
use crate::chunks::scan_text;
use crate::errors::{restored_state, snapshot_bytes, snapshot_error, snapshot_refused};
use crate::ffi::{exact, is_ascii, is_huge_negative, lock, str_length, substring, type_name, Exact};
use crate::settings::checked;
use crate::tracked::{Mark, Tracked};

/// Strs longer than this (in code points) are not kept by the input memo (it would keep them
/// alive as long as the detector).
const MEMO_LONGEST_STR: usize = 256;

/// The newest action's inputs, held by strong reference with their digests, so that an action
/// passing the very same objects again (one constant action type, result or arguments dict in
/// a loop) is not hashed again. Only objects of exact immutable built-in types are kept (a
/// dict by its entries, see [`DictSnapshot`]): the same object then has the same content, so
/// the digest remembered is the one hashing would give.
#[derive(Default)]
struct InputMemo {
    action_type: Option<(Py<PyString>, u64)>,
    result: Option<(Py<PyAny>, u64)>,
    /// Boxed: only a config whose rules do not sketch arguments fills it, and a gateway keeps
    /// many detectors of the recommended profile.
    args: Option<Box<DictSnapshot>>,
}

impl InputMemo {
    fn action_type(&self, action_type: &Bound<'_, PyString>) -> Option<u64> {
        let (kept, digest) = self.action_type.as_ref()?;
        (kept.as_ptr() == action_type.as_ptr()).then_some(*digest)
    }

    fn result(&self, result: &Bound<'_, PyAny>) -> Option<u64> {
        let (kept, digest) = self.result.as_ref()?;
        (kept.as_ptr() == result.as_ptr()).then_some(*digest)
    }

    fn args(&self, args: &Bound<'_, PyAny>) -> Option<u64> {
        self.args
            .as_ref()
            .filter(|kept| kept.matches(args))
            .map(|kept| kept.digest())
    }
}

/// What the lock guards: the session, and the memo of the inputs its newest action came from.
struct State {
    session: Session,
    memo: InputMemo,
}

impl std::ops::Deref for State {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.session
    }
}

impl std::ops::DerefMut for State {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}

/// A new loop episode, as handed to `on_episode`: loop type, description, actions recorded.
type Episode = (&'static str, String, u64);

#[pyclass(module = "doomloop._core", subclass, frozen)]
pub struct SessionEngine {
    state: Mutex<Tracked<State>>,
    /// The checked settings it was built from (what a snapshot saves; shared with every
    /// detector built from equal values).
    settings: Arc<[Value]>,
    clock: Option<Py<PyAny>>,
    /// Called with the description of each new loop episode (the Python layer logs it).
    on_episode: Option<Py<PyAny>>,
    /// The config's (fixed) needs, read without the lock: sketch each action's arguments,
    /// and keep its first string argument.
    compares_arguments: bool,
    names_actions: bool,
    /// `failures_by_arguments`: a failure's text is digested for `retry_storm`.
    digests_failures: bool,
    /// Set by an evaluation that found a loop standing whatever the time (with the default
    /// clock, which is not called when no check needs it), cleared whenever the lock is
    /// taken: while set, the state is unchanged, so `is_doom_loop` answers without the lock.
    loop_stands: AtomicBool,
}

/// What `retry_storm` compares of a failed action: the [`failure_digest`] of a str result,
/// with the words of the first string argument masked; any other result's digest.
fn failure_of(result: &Bound<'_, PyAny>, digest: u64, argument: Option<&Bound<'_, PyString>>) -> u64 {
    let Exact::Str(text) = exact(result) else {
        return digest;
    };
    // A long argument not in ASCII is cut to as many code points as the bytes read first.
    let argument = argument.and_then(|argument| {
        if str_length(argument).unwrap_or(0) > FAILURE_ARGUMENT_BYTES && !is_ascii(argument).unwrap_or(true) {
            substring(argument, 0, FAILURE_ARGUMENT_BYTES).ok()
        } else {
            Some(argument.clone())
        }
    });
    let argument = argument.as_ref().map(text_bytes);
    let argument = argument.as_deref().unwrap_or(b"");
    let argument = argument.get(..FAILURE_ARGUMENT_BYTES).unwrap_or(argument);
    let length = str_length(text).unwrap_or(0);
    if length <= FAILURE_HEAD_BYTES + FAILURE_TAIL_BYTES || is_ascii(text).unwrap_or(true) {
        let whole = text_bytes(text);
        let (head, tail) = failure_parts(&whole);
        return failure_digest(head, tail, argument);
    }
    // A long text not in ASCII: its first and last code points, as many as the bytes read (at
    // least that many bytes each), so no UTF-8 copy of the whole is cached on the str.
    let piece = |start: usize, end: usize| substring(text, start, end).ok();
    let (Some(first), Some(last)) = (piece(0, FAILURE_HEAD_BYTES), piece(length - FAILURE_TAIL_BYTES, length)) else {
        return digest;
    };
    let (head, tail) = (text_bytes(&first), text_bytes(&last));
    let head = head.get(..FAILURE_HEAD_BYTES).unwrap_or(&head[..]);
    failure_digest(
        head,
        tail.get(tail.len().saturating_sub(FAILURE_TAIL_BYTES)..)
            .unwrap_or(&tail[..]),
        argument,
    )
}

pub(crate) fn monotonic_seconds() -> f64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_secs_f64()
}

impl SessionEngine {
    /// [`Self::record_action`] with the action's tool policy thresholds, if any (a monitor's).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_limited(
        slf: &Bound<'_, Self>,
        action_type: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
        result: &Bound<'_, PyAny>,
        success: &Bound<'_, PyAny>,
        duration: Option<&Bound<'_, PyAny>>,
        metadata: Option<&Bound<'_, PyAny>>,
        limits: Option<ActionLimits>,
    ) -> PyResult<()> {
        let action_type = action_type
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err("action_type must be a str"))?;
        let success = success
            .cast::<PyBool>()
            .map_err(|_| PyTypeError::new_err("success must be a bool"))?
            .is_true();
        let duration = duration.map_or(Ok(0.0), seconds)?;
        if let Some(metadata) = metadata {
            if !metadata.is_none() && !metadata.is_instance_of::<PyDict>() {
                return Err(PyTypeError::new_err("metadata must be a dict or None"));
            }
        }
        let engine = slf.get();
        let py = slf.py();
        // `args=None` is the empty mapping.
        let sketches = (engine.compares_arguments || engine.names_actions) && !args.is_none();
        let mut state = engine.lock(py);
        let known_kind = state.memo.action_type(action_type);
        let known_result = state.memo.result(result);
        let known_args = if args.is_none() {
            Some(EMPTY_MAP)
        } else if sketches || known_kind.is_none() || known_result.is_none() {
            // Only inputs all known keep the lock for the record; otherwise the snapshot is
            // refreshed outside it, which hashes nothing the same dict still holds.
            None
        } else {
            state.memo.args(args)
        };
        // Fresh arguments refresh the snapshot of the last ones in place: they usually share
        // its keys (and constant values).
        let previous_args = if known_args.is_none() && !sketches {
            state.memo.args.take()
        } else {
            None
        };
        // What the memo does not know is hashed with the lock released (a key's fingerprint
        // may run Python code), the sketch in the fingerprint's pass when it can be; when it
        // knows everything, the action is recorded under the lock it was looked up under.
        let held = if known_kind.is_none() || known_result.is_none() || known_args.is_none() {
            drop(state);
            None
        } else {
            Some(state)
        };
        let kind = known_kind.unwrap_or_else(|| fingerprint_str(action_type));
        let (result_digest, memoizable) = match known_result {
            Some(digest) => (digest, false),
            None if result.is_none() => (hash_none(), true),
            None => fingerprint_memoizable(result, MEMO_LONGEST_STR),
        };
        // Only a config whose rules compare arguments pays for a sketch (it is large to fill).
        let mut sketch = None;
        let mut first_string = None;
        let mut args_memo = None;
        let args_digest = match known_args {
            Some(digest) => digest,
            None if sketches => {
                let (digest, first) = fingerprint_and_sketch(args, sketch.insert(Sketch::EMPTY));
                first_string = first;
                digest
            }
            None => {
                let snapshot = args_memo.insert(previous_args.unwrap_or_else(|| Box::new(DictSnapshot::empty())));
                if snapshot.refresh(args, MEMO_LONGEST_STR) {
                    snapshot.digest()
                } else {
                    fingerprint(args)
                }
            }
        };
        let failure = if engine.digests_failures && !success {
            failure_of(result, result_digest, first_string.as_ref())
        } else {
            result_digest
        };
        let preview = first_string.as_ref().map(str_preview);
        let mut state = match held {
            Some(state) => state,
            None => engine.lock(py),
        };
        state.session.record_action(&Action {
            identity: hash_action(kind, args_digest),
            kind,
            result: result_digest,
            failure,
            success,
            duration,
            arguments: sketch.as_ref().unwrap_or(&Sketch::EMPTY),
            preview: preview.as_deref().unwrap_or(""),
            limits,
        });
        state.session.note_action_type(kind, || action_type.to_string_lossy());
        // Dropping what the memo held runs no Python code (exact built-in scalars only).
        if known_kind.is_none() && is_immutable_scalar(action_type, MEMO_LONGEST_STR) {
            state.memo.action_type = Some((action_type.clone().unbind(), kind));
        }
        if memoizable {
            // The old result dropped as a `Bound`: no question whether the GIL is held.
            let old = state.memo.result.replace((result.clone().unbind(), result_digest));
            drop(old.map(|(old, _)| old.into_bound(py)));
        }
        // The snapshot goes back, of these arguments or of `{}` (another thread may have
        // remembered its arguments meanwhile: either is right). Fresh arguments on every call
        // allocate nothing.
        if args_memo.is_some() {
            state.memo.args = args_memo;
        }
        if engine.clock.is_some() {
            // A Python clock is called with the lock released.
            drop(state);
            Self::observe(slf)?;
        } else {
            let (finding, episode) = engine.evaluate(&mut state.session, None);
            drop(state);
            Self::report(slf, finding, episode)?;
        }
        Ok(())
    }

    #[inline]
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Tracked<State>> {
        let state = lock(py, &self.state);
        self.loop_stands.store(false, Ordering::SeqCst);
        state
    }

    /// The time to evaluate at, read with the lock released: a Python clock is called now,
    /// the default clock is left for [`SessionEngine::evaluate`] to read if a check needs it.
    fn reading(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        match self.clock {
            Some(_) => self.now(py).map(Some),
            None => Ok(None),
        }
    }

    /// Evaluate under the lock at `reading` (see [`SessionEngine::reading`]) and count a new
    /// episode; returns the finding and, when `on_episode` is to hear of it, the episode.
    #[inline(always)]
    fn evaluate(&self, state: &mut Session, reading: Option<f64>) -> (Option<Finding>, Option<Episode>) {
        let (finding, new_episode) = state.observe_at(|| reading.unwrap_or_else(monotonic_seconds));
        if self.clock.is_none() && finding.is_some_and(Finding::is_timeless) {
            self.loop_stands.store(true, Ordering::SeqCst);
        }
        let episode = match (new_episode, finding, &self.on_episode) {
            (true, Some(finding), Some(_)) => Some(episode(state, finding)),
            _ => None,
        };
        (finding, episode)
    }

    /// Hand a new episode to `on_episode` (the lock released).
    #[inline(always)]
    fn report(slf: &Bound<'_, Self>, finding: Option<Finding>, episode: Option<Episode>) -> PyResult<Option<Finding>> {
        if let (Some((loop_type, description, actions)), Some(on_episode)) = (episode, &slf.get().on_episode) {
            on_episode.call1(slf.py(), (slf, loop_type, description, actions))?;
        }
        Ok(finding)
    }

    /// `to_bytes()`'s bytes.
    pub(crate) fn snapshot(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        let now = self.now(py)?;
        self.sealed(py, &mut self.lock(py), now)
    }

    fn sealed(&self, py: Python<'_>, state: &mut Tracked<State>, now: f64) -> PyResult<Vec<u8>> {
        let Some((bytes, clock_at)) = state.snapshot(&self.settings, now) else {
            // Nothing is wrong with any data: the state cannot be saved yet.
            return Err(snapshot_refused(
                py,
                "no snapshot while a response is being streamed (record_output_chunk since the last \
                 end_response): its output windows are not saved; call end_response() first",
            ));
        };
        Tracked::mark(state, Mark::of(&bytes, clock_at));
        Ok(bytes)
    }

    /// A snapshot of the state now, given `part`, the snapshot it was last restored from or
    /// saved to: while no hook changed the state since, `part` with the session clock read
    /// anew (the one field that moves), else encoded anew.
    pub(crate) fn snapshot_after<'a>(&self, py: Python<'_>, part: &'a [u8]) -> PyResult<Cow<'a, [u8]>> {
        let now = self.now(py)?;
        let mut state = self.lock(py);
        if let Some(unchanged) = Tracked::unchanged_snapshot(&mut state, part, |state| state.elapsed(now)) {
            return Ok(unchanged);
        }
        Ok(Cow::Owned(self.sealed(py, &mut state, now)?))
    }

    /// `_restore(data)` of the snapshot's bytes.
    pub(crate) fn restore(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let read = |data: &[u8]| Session::restore(data, self.now(py)?).map_err(|e| snapshot_error(py, e));
        let (restored, _, clock_at) = restored_state(data, read, |(_, settings, _)| settings[..] == self.settings[..])?;
        let mut state = self.lock(py);
        state.session = restored;
        Tracked::mark(&mut state, Mark::of(data, clock_at));
        Ok(())
    }

    fn now(&self, py: Python<'_>) -> PyResult<f64> {
        let Some(clock) = &self.clock else {
            return Ok(monotonic_seconds());
        };
        let value = clock.call0(py)?;
        match value.extract::<f64>(py) {
            Ok(seconds) if !seconds.is_nan() => Ok(seconds),
            _ => Err(PyTypeError::new_err("clock() must return a number of seconds")),
        }
    }

    /// Feed output text to the session's chant detector (long text with the interpreter
    /// released), then re-run the checks.
    fn record_output(slf: &Bound<'_, Self>, text: &Bound<'_, PyAny>, whole: bool) -> PyResult<()> {
        let name = if whole { "text" } else { "chunk" };
        let loop_stands = &slf.get().loop_stands;
        scan_text(text, name, &slf.get().state, |state, input, piece| {
            // The scan takes the lock itself (not through `lock`).
            loop_stands.store(false, Ordering::SeqCst);
            // A whole response is framed as one streamed response, however many pieces it
            // is scanned in.
            if whole && piece.first {
                state.end_response();
            }
            state.record_output_chunk(input);
            if whole && piece.last {
                state.end_response();
            }
        })?;
        Self::observe(slf)?;
        Ok(())
    }

    /// Evaluate now, count a new episode, and hand it to `on_episode` as (the detector, loop
    /// type, description, actions recorded), with the lock released.
    fn observe(slf: &Bound<'_, Self>) -> PyResult<Option<Finding>> {
        let engine = slf.get();
        let reading = engine.reading(slf.py())?;
        let (finding, episode) = engine.evaluate(&mut engine.lock(slf.py()).session, reading);
        Self::report(slf, finding, episode)
    }
}

/// A new episode described, for `on_episode` (once per episode: kept off the hot path).
#[cold]
#[inline(never)]
fn episode(state: &Session, finding: Finding) -> Episode {
    (
        finding.loop_type().name(),
        state.describe(finding),
        state.stats().total_actions,
    )
}

/// `record_action`'s `duration`: an int or float (not a bool) of seconds, >= 0.
fn seconds(value: &Bound<'_, PyAny>) -> PyResult<f64> {
    let number = if value.is_instance_of::<PyBool>() {
        None
    } else if let Ok(float) = value.cast::<PyFloat>() {
        Some(float.value())
    } else if let Ok(int) = value.cast::<PyInt>() {
        // Any int: past 2**1024 it is an infinite number of seconds.
        Some(int.extract::<f64>().unwrap_or(if is_huge_negative(int) {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }))
    } else {
        None
    };
    match number {
        Some(seconds) if seconds >= 0.0 => Ok(seconds),
        Some(negative) => Err(PyValueError::new_err(format!(
            "duration must be a non-negative number of seconds, got {negative}"
        ))),
        None => Err(PyTypeError::new_err(format!(
            "duration must be an int or float number of seconds, got {}",
            type_name(value)
        ))),
    }
}

#[pymethods]
impl SessionEngine {
    /// Build from a `DoomLoopConfig`'s values (in `settings_of("DoomLoopConfig")` order;
    /// checked again here). `_on_episode(detector, loop_type, description, actions)` is called
    /// once per loop episode, with the lock released.
    #[new]
    #[pyo3(signature = (settings, /, *, clock = None, _on_episode = None))]
    fn new(settings: &Bound<'_, PyTuple>, clock: Option<Py<PyAny>>, _on_episode: Option<Py<PyAny>>) -> PyResult<Self> {
        let py = settings.py();
        if clock.as_ref().is_some_and(|clock| !clock.bind(py).is_callable()) {
            return Err(PyTypeError::new_err(
                "clock must be a zero-argument callable returning seconds",
            ));
        }
        if _on_episode.as_ref().is_some_and(|hook| !hook.bind(py).is_callable()) {
            return Err(PyTypeError::new_err("_on_episode must be callable"));
        }
        let settings = checked(&SESSION, settings)?;
        let session_config = SessionConfig::from_values(&settings);
        Ok(SessionEngine {
            compares_arguments: session_config.compares_arguments(),
            names_actions: session_config.names_actions(),
            digests_failures: session_config.failures_by_arguments,
            state: Mutex::new(Tracked::new(State {
                session: Session::new(session_config),
                memo: InputMemo::default(),
            })),
            settings: shared(settings),
            clock,
            on_episode: _on_episode,
            loop_stands: AtomicBool::new(false),
        })
    }

    /// Start a new session: starts the clock and clears all history, markers, plan states,
    /// recovery attempts, events and backoff.
    fn start_session(&self, py: Python<'_>) -> PyResult<()> {
        let now = self.now(py)?;
        self.lock(py).start(now);
        Ok(())
    }

    /// Record one action and re-run the checks.
    #[pyo3(signature = (action_type, args, result, success, duration = None, metadata = None))]
    pub(crate) fn record_action(
        slf: &Bound<'_, Self>,
        action_type: &Bound<'_, PyAny>,
        args: &Bound<'_, PyAny>,
        result: &Bound<'_, PyAny>,
        success: &Bound<'_, PyAny>,
        duration: Option<&Bound<'_, PyAny>>,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        Self::record_limited(slf, action_type, args, result, success, duration, metadata, None)
    }

    /// Record one whole model response for REPEATED_OUTPUT: a chant inside it (windows never
    /// span two responses; the verdict stands until the next response starts), and alike
    /// responses turn after turn.
    pub(crate) fn record_response(slf: &Bound<'_, Self>, text: &Bound<'_, PyAny>) -> PyResult<()> {
        Self::record_output(slf, text, true)
    }

    /// Record the next piece of a response being streamed (windows span pieces).
    fn record_output_chunk(slf: &Bound<'_, Self>, chunk: &Bound<'_, PyAny>) -> PyResult<()> {
        Self::record_output(slf, chunk, false)
    }

    /// The streamed response is complete: it is compared with the response before it, and the
    /// next piece starts a new response.
    fn end_response(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.get().lock(slf.py()).end_response();
        Self::observe(slf)?;
        Ok(())
    }

    /// Record a progress marker (it gates NO_PROGRESS and CIRCULAR_PLAN).
    pub(crate) fn mark_progress(&self, py: Python<'_>, marker: &Bound<'_, PyAny>) -> PyResult<()> {
        if !marker.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err("marker must be a str"));
        }
        self.lock(py).mark_progress();
        Ok(())
    }

    /// Record a plan state; returning to a state already seen is CIRCULAR_PLAN.
    fn record_plan(slf: &Bound<'_, Self>, state: &Bound<'_, PyAny>) -> PyResult<()> {
        let digest = fingerprint(state);
        slf.get().lock(slf.py()).record_plan(digest);
        Self::observe(slf)?;
        Ok(())
    }

    /// True exactly when `get_loop_type()` is not None.
    pub(crate) fn is_doom_loop(slf: &Bound<'_, Self>) -> PyResult<bool> {
        // A loop standing since the last evaluation is found again with no new episode.
        if slf.get().loop_stands.load(Ordering::SeqCst) {
            return Ok(true);
        }
        Ok(Self::observe(slf)?.is_some())
    }

    /// Count one recovery attempt; True while more attempts are allowed.
    fn increment_recovery(&self, py: Python<'_>) -> bool {
        self.lock(py).increment_recovery()
    }

    /// Reset the backoff delay to `initial_backoff`.
    fn reset_backoff(&self, py: Python<'_>) {
        self.lock(py).reset_backoff();
    }

    /// The current finding's loop type and the recovery ladder's rung for it, by name
    /// (`DoomLoopType` and `RecoveryAction` values).
    fn _evaluate(slf: &Bound<'_, Self>) -> PyResult<(Option<&'static str>, &'static str)> {
        let finding = Self::observe(slf)?;
        let recovery = slf.get().lock(slf.py()).recovery(finding.map(Finding::loop_type));
        Ok((finding.map(|f| f.loop_type().name()), recovery.name()))
    }

    /// The current finding described, with the loop type, rung and rule names: (loop type,
    /// description, recovery, total actions, recovery attempts, rule); `None` when there is
    /// none.
    #[allow(clippy::type_complexity)]
    fn _loop_event(
        slf: &Bound<'_, Self>,
    ) -> PyResult<Option<(&'static str, String, &'static str, u64, u64, &'static str)>> {
        let Some(finding) = Self::observe(slf)? else {
            return Ok(None);
        };
        let state = slf.get().lock(slf.py());
        let stats = state.stats();
        Ok(Some((
            finding.loop_type().name(),
            state.describe(finding),
            state.recovery(Some(finding.loop_type())).name(),
            stats.total_actions,
            stats.recovery_attempts,
            finding.rule(),
        )))
    }

    /// The delay to wait now; advances the stored delay (capped at `max_backoff`).
    fn _next_backoff(&self, py: Python<'_>) -> f64 {
        self.lock(py).next_backoff()
    }

    /// Counts since the session started (O(1)): total, successful and failed actions, loop
    /// events, recovery attempts, progress markers, elapsed time, current backoff.
    fn get_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let now = self.now(py)?;
        let (s, elapsed) = {
            let state = self.lock(py);
            (state.stats(), state.elapsed(now))
        };
        let stats = PyDict::new(py);
        stats.set_item("total_actions", s.total_actions)?;
        stats.set_item("successful_actions", s.successful_actions)?;
        stats.set_item("failed_actions", s.failed_actions)?;
        stats.set_item("loop_events", s.loop_events)?;
        stats.set_item("recovery_attempts", s.recovery_attempts)?;
        stats.set_item("progress_markers", s.progress_markers)?;
        stats.set_item("elapsed_time", elapsed)?;
        stats.set_item("current_backoff", s.current_backoff)?;
        Ok(stats)
    }

    /// The detector's state and settings as a snapshot (docs/snapshots.md); the session
    /// clock is saved as the time elapsed now.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.snapshot(py)?))
    }

    /// Replace the state with a snapshot's (made under the same settings); on any error the
    /// state is left as it was.
    fn _restore(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.restore(py, &snapshot_bytes(data)?)
    }

    /// The last ten action types, oldest first.
    fn _recent_action_types(&self, py: Python<'_>) -> Vec<String> {
        self.lock(py)
            .recent_action_types()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    /// Capacity of the action ring buffer (bounded by the thresholds, not the session length).
    #[getter]
    fn _history_capacity(&self, py: Python<'_>) -> usize {
        self.lock(py).history_capacity()
    }
}
