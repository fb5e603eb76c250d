//! `ToolLoopEngine` (the Rust half of `doomloop.ToolLoopDetector`), `GuardEngine` (of
//! `doomloop.PostCompactionGuard`) and the verdict types, over `doomloop_engine::tool_loop`.
//!
//! The hot path (`before_tool_call` / `after_tool_call`) runs no Python frame: params are
//! fingerprinted and results normalised here, reading the Python dicts directly. Python code
//! (user normalisers, the send-like predicate, the logging hooks) only ever runs with the
//! session lock released.

use std::borrow::Cow;
use std::sync::{Mutex, MutexGuard, OnceLock};

use compact_str::CompactString;

use doomloop_engine::policy::ToolLimits;
use doomloop_engine::snapshot::Snapshot;
use doomloop_engine::tool_loop::{
    compaction_message, CompactionGuard, Decision, Detector, Finding, GuardVerdict as EngineGuardVerdict, Level,
    LoopConfig, NamedSession, COMPACTION_DETECTOR, GUARD, MAX_CYCLE_PERIOD, TOOL_LOOP,
};
use doomloop_engine::tool_result::{VETO_REASON, VETO_STATUS};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::canonical::fingerprint_str;
use crate::errors::{restored_state, snapshot_bytes, snapshot_error};
use crate::ffi::{lock, type_name};
use crate::settings::{checked, checked_one};
use crate::tool_results::{normalise, parse_call, Call, CallMemo, Normalised, Rules};
use crate::tracked::{Mark, Tracked};

// ---------------------------------------------------------------------------------------
// Verdict types
// ---------------------------------------------------------------------------------------

/// The loop verdict for one call.
///
/// Its message and warning key are rendered when first read, from what the finding's
/// [`Wording`] captured under the session lock: rendering them costs more than the rest of a
/// warned call's decision, and most warned calls are never asked for them (a warning already
/// given is not logged again).
#[pyclass(module = "doomloop._core", frozen)]
#[derive(Clone)]
pub struct LoopVerdict {
    #[pyo3(get)]
    stuck: bool,
    #[pyo3(get)]
    level: Option<&'static str>,
    #[pyo3(get)]
    detector: Option<&'static str>,
    #[pyo3(get)]
    count: u32,
    wording: Option<Wording>,
    /// `(message, warning key)`, once read.
    text: OnceLock<(String, String)>,
}

impl LoopVerdict {
    /// `(message, warning key)` of a stuck verdict, rendered on first use.
    fn text(&self) -> Option<&(String, String)> {
        let wording = self.wording.as_ref()?;
        Some(self.text.get_or_init(|| wording.render()))
    }
}

#[pymethods]
impl LoopVerdict {
    /// The message for the model (None when not stuck).
    #[getter]
    fn message(&self) -> Option<&str> {
        self.text().map(|(message, _)| message.as_str())
    }

    /// The key warnings of one loop share (None when not stuck).
    #[getter]
    fn warning_key(&self) -> Option<&str> {
        self.text().map(|(_, key)| key.as_str())
    }

    /// A ping-pong's other tool (None for any other verdict).
    #[getter]
    fn paired_tool_name(&self) -> Option<&str> {
        let wording = self.wording.as_ref()?;
        match wording.finding.detector {
            Detector::PingPong => wording.source.as_deref(),
            _ => None,
        }
    }

    fn __repr__(&self) -> String {
        if !self.stuck {
            return "LoopVerdict(stuck=False)".to_string();
        }
        format!(
            "LoopVerdict(stuck=True, level={:?}, detector={:?}, count={})",
            self.level.unwrap_or(""),
            self.detector.unwrap_or(""),
            self.count
        )
    }

    fn __bool__(&self) -> bool {
        self.stuck
    }

    /// The verdict as a dict with OpenClaw's camelCase keys.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("stuck", self.stuck)?;
        if self.stuck {
            d.set_item("level", self.level)?;
            d.set_item("detector", self.detector)?;
            d.set_item("count", self.count)?;
            d.set_item("message", self.message())?;
            d.set_item("warningKey", self.warning_key())?;
            d.set_item("pairedToolName", self.paired_tool_name())?;
        }
        Ok(d)
    }
}

/// What to do with a call about to run.
#[pyclass(module = "doomloop._core", frozen)]
pub struct ToolCallDecision {
    /// A stuck call's verdict, as Rust data: its Python object is made when `verdict` is first
    /// read, as most warned calls' decisions are only asked whether they block.
    found: Option<LoopVerdict>,
    verdict: PyOnceLock<Py<LoopVerdict>>,
    #[pyo3(get)]
    blocked: bool,
    #[pyo3(get)]
    emit_warning: bool,
    #[pyo3(get)]
    blocked_result: Option<Py<PyDict>>,
}

impl ToolCallDecision {
    /// Whether the verdict found a loop (a monitor reports it as a finding).
    pub(crate) fn stuck(&self) -> bool {
        self.found.is_some()
    }

    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked
    }

    pub(crate) fn blocked_result(&self, py: Python<'_>) -> Option<Py<PyDict>> {
        self.blocked_result.as_ref().map(|result| result.clone_ref(py))
    }

    /// The verdict's message (the veto text of a blocked call).
    pub(crate) fn message(&self) -> Option<String> {
        self.found.as_ref()?.message().map(str::to_owned)
    }
}

#[pymethods]
impl ToolCallDecision {
    /// The loop verdict for the call.
    #[getter]
    pub(crate) fn verdict(&self, py: Python<'_>) -> PyResult<Py<LoopVerdict>> {
        let Some(found) = &self.found else {
            return not_stuck(py);
        };
        self.verdict
            .get_or_try_init(py, || Py::new(py, found.clone()))
            .map(|verdict| verdict.clone_ref(py))
    }

    fn __repr__(&self) -> String {
        let verdict = match &self.found {
            Some(found) => found.__repr__(),
            None => "LoopVerdict(stuck=False)".to_string(),
        };
        format!(
            "ToolCallDecision(blocked={}, emit_warning={}, verdict={verdict})",
            py_bool(self.blocked),
            py_bool(self.emit_warning),
        )
    }
}

/// The post-compaction guard's answer for one outcome.
#[pyclass(module = "doomloop._core", frozen, get_all)]
pub struct GuardVerdict {
    should_abort: bool,
    detector: Option<&'static str>,
    count: u32,
    tool_name: Option<Py<PyString>>,
    message: Option<String>,
}

#[pymethods]
impl GuardVerdict {
    fn __repr__(&self, py: Python<'_>) -> String {
        match &self.tool_name {
            Some(tool) if self.should_abort => {
                format!(
                    "GuardVerdict(should_abort=True, tool_name={:?}, count={})",
                    tool.bind(py).to_string(),
                    self.count
                )
            }
            _ => "GuardVerdict(should_abort=False)".to_string(),
        }
    }

    fn __bool__(&self) -> bool {
        self.should_abort
    }
}

/// One recorded outcome: its hashes and the guard's verdict (`None` when the outcome has no
/// result hash: no result, or a loop veto; or when it was not fed to the guard).
#[pyclass(module = "doomloop._core", frozen, get_all, freelist = 4)]
pub struct ToolOutcome {
    tool: Py<PyString>,
    args_hash: u64,
    result_hash: Option<u64>,
    is_error: bool,
    unknown_tool_name: Option<String>,
    guard: Option<Py<GuardVerdict>>,
}

impl ToolOutcome {
    /// Whether the post-compaction guard stops the run on this outcome.
    pub(crate) fn aborts(&self) -> bool {
        self.guard.as_ref().is_some_and(|guard| guard.get().should_abort)
    }
}

#[pymethods]
impl ToolOutcome {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "ToolOutcome(tool={:?}, result_hash={}, guard={})",
            self.tool.bind(py).to_string(),
            self.result_hash.map_or("None".to_string(), |h| h.to_string()),
            self.guard.as_ref().map_or("None".to_string(), |g| g.get().__repr__(py))
        )
    }
}

fn py_bool(value: bool) -> &'static str {
    if value {
        "True"
    } else {
        "False"
    }
}

static NOT_STUCK: PyOnceLock<Py<LoopVerdict>> = PyOnceLock::new();
static ALLOW: PyOnceLock<Py<ToolCallDecision>> = PyOnceLock::new();
static CONTINUE: PyOnceLock<Py<GuardVerdict>> = PyOnceLock::new();

/// The shared immutable instance in `cell`, built by `make` on first use (the verdicts of the
/// common, not-stuck path cost no allocation).
fn shared<T: pyo3::PyClass + Into<PyClassInitializer<T>>>(
    cell: &PyOnceLock<Py<T>>,
    py: Python<'_>,
    make: impl FnOnce() -> PyResult<T>,
) -> PyResult<Py<T>> {
    cell.get_or_try_init(py, || Py::new(py, make()?))
        .map(|v| v.clone_ref(py))
}

fn not_stuck(py: Python<'_>) -> PyResult<Py<LoopVerdict>> {
    shared(&NOT_STUCK, py, || {
        Ok(LoopVerdict {
            stuck: false,
            level: None,
            detector: None,
            count: 0,
            wording: None,
            text: OnceLock::new(),
        })
    })
}

pub(crate) fn allow(py: Python<'_>) -> PyResult<Py<ToolCallDecision>> {
    shared(&ALLOW, py, || {
        Ok(ToolCallDecision {
            found: None,
            verdict: PyOnceLock::new(),
            blocked: false,
            emit_warning: false,
            blocked_result: None,
        })
    })
}

fn guard_continue(py: Python<'_>) -> PyResult<Py<GuardVerdict>> {
    shared(&CONTINUE, py, || {
        Ok(GuardVerdict {
            should_abort: false,
            detector: None,
            count: 0,
            tool_name: None,
            message: None,
        })
    })
}

fn guard_verdict(
    py: Python<'_>,
    verdict: EngineGuardVerdict,
    tool: &Bound<'_, PyString>,
) -> PyResult<Py<GuardVerdict>> {
    match verdict {
        EngineGuardVerdict::Continue => guard_continue(py),
        EngineGuardVerdict::Abort(count) => Py::new(
            py,
            GuardVerdict {
                should_abort: true,
                detector: Some(COMPACTION_DETECTOR),
                count,
                tool_name: Some(tool.clone().unbind()),
                message: Some(compaction_message(&tool.to_string_lossy(), count)),
            },
        ),
    }
}

// ---------------------------------------------------------------------------------------
// ToolLoopEngine
// ---------------------------------------------------------------------------------------

/// What a finding's message and warning key are rendered from, captured under the lock (they
/// read the history's names, which later calls change). Names are `CompactString`s: a tool
/// name of up to 24 bytes is copied without an allocation.
#[derive(Clone)]
struct Wording {
    finding: Finding,
    tool: CompactString,
    /// The `(tool, params)` digest of the call.
    args: u64,
    /// The tool of the record the finding points back to (a ping-pong's other tool).
    source: Option<CompactString>,
    /// The unknown tool that record's error named.
    unknown: Option<CompactString>,
    /// A cycle's calls' args digests in call order from this one (see
    /// `NamedSession::cycle_calls`); `cycle_len` of them, none for any other finding.
    cycle: [u64; MAX_CYCLE_PERIOD],
    cycle_len: usize,
    /// The tools of those calls, when they are not all the call's own (usually they are, and
    /// this stays empty and unallocated).
    cycle_tools: Box<[CompactString]>,
}

impl Wording {
    fn render(&self) -> (String, String) {
        let mut cycle = [("", 0); MAX_CYCLE_PERIOD];
        for (i, slot) in cycle[..self.cycle_len].iter_mut().enumerate() {
            let tool = self.cycle_tools.get(i).unwrap_or(&self.tool);
            *slot = (tool.as_str(), self.cycle[i]);
        }
        self.finding.render(
            &self.tool,
            self.args,
            self.source.as_deref(),
            self.unknown.as_deref(),
            &cycle[..self.cycle_len],
        )
    }
}

/// The state's snapshot, the state marked with it.
fn encoded(state: &mut Tracked<NamedSession>) -> Vec<u8> {
    let bytes = state.to_snapshot();
    Tracked::mark(state, Mark::of(&bytes, None));
    bytes
}

#[pyclass(module = "doomloop._core", subclass, frozen)]
pub struct ToolLoopEngine {
    state: Mutex<Tracked<NamedSession>>,
    rules: Option<Box<Rules>>,
    memo: Mutex<CallMemo>,
    /// Called (lock released) with the detector and each decision that emits a warning or
    /// starts a blocked episode (what the Python layer logs). The hooks take the detector
    /// rather than being bound to it, so every detector shares them and holds no cycle.
    on_loop: Option<Py<PyAny>>,
    /// Called (lock released) with the detector, every decision that emits a warning or
    /// blocks, and the call's run id (the events of `on_event`).
    on_event: Option<Py<PyAny>>,
    /// Called (lock released) with the detector, each outcome whose guard verdict says abort,
    /// and the call's run id; it may raise.
    on_compaction_loop: Option<Py<PyAny>>,
    /// How the thresholds were reordered at construction (for the Python layer to log).
    fixes: Vec<String>,
    /// `hash_plain_results`, read without the lock (the config never changes).
    plain_by_value: bool,
}

impl ToolLoopEngine {
    /// [`Self::before_tool_call`] with the call's tool policy thresholds, if any (a monitor's).
    pub(crate) fn before_limited(
        slf: &Bound<'_, Self>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        run_id: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&Bound<'_, PyAny>>,
        limits: Option<ToolLimits>,
    ) -> PyResult<Py<ToolCallDecision>> {
        let py = slf.py();
        let engine = slf.get();
        let mut call = parse_call(engine.rules(), Some(&engine.memo), tool, params, run_id, tool_call_id)?;
        call.key.limits = limits;
        let tool_name = call.tool.to_string_lossy();
        let (decision, new_episode, found): (Decision, bool, Option<Wording>) = {
            let mut session = engine.lock(py);
            let (decision, new_episode) = session.before_call(&call.key, call.call_id, &tool_name);
            let found = decision.finding.map(|f| worded(&session, f, &call, &tool_name));
            (decision, new_episode, found)
        };
        let Some(found) = found.map(stuck_verdict) else {
            return allow(py);
        };
        let blocked = if decision.blocked {
            let message = found.message().unwrap_or_default();
            Some(blocked_result(py, message)?.unbind())
        } else {
            None
        };
        let decision = Py::new(
            py,
            ToolCallDecision {
                found: Some(found),
                verdict: PyOnceLock::new(),
                blocked: decision.blocked,
                emit_warning: decision.emit_warning,
                blocked_result: blocked,
            },
        )?;
        let d = decision.get();
        if let (true, Some(on_loop)) = (d.emit_warning || new_episode, &engine.on_loop) {
            on_loop.call1(py, (slf, decision.clone_ref(py)))?;
        }
        if let (true, Some(on_event)) = (d.blocked || d.emit_warning, &engine.on_event) {
            on_event.call1(py, (slf, decision.clone_ref(py), run_id))?;
        }
        Ok(decision)
    }

    #[inline]
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Tracked<NamedSession>> {
        lock(py, &self.state)
    }

    /// `to_bytes()`'s bytes.
    pub(crate) fn snapshot(&self, py: Python<'_>) -> Vec<u8> {
        encoded(&mut self.lock(py))
    }

    /// A snapshot of the state now, given `part`, the snapshot it was last restored from or
    /// saved to: `part` itself while no hook changed the state since, else encoded anew.
    pub(crate) fn snapshot_after<'a>(&self, py: Python<'_>, part: &'a [u8]) -> Cow<'a, [u8]> {
        let mut state = self.lock(py);
        if let Some(unchanged) = Tracked::unchanged_snapshot(&mut state, part, |_| 0.0) {
            return unchanged;
        }
        Cow::Owned(encoded(&mut state))
    }

    /// `_restore(data)` of the snapshot's bytes.
    pub(crate) fn restore(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let read = |data: &[u8]| NamedSession::from_snapshot(data).map_err(|e| snapshot_error(py, e));
        // A detector's settings never change: they need not be compared under the swap's lock.
        let restored = restored_state(data, read, |restored| restored.settings() == self.lock(py).settings())?;
        Tracked::restored(&mut self.lock(py), restored, Mark::of(data, None));
        Ok(())
    }

    fn rules(&self) -> Option<&Rules> {
        self.rules.as_deref()
    }
}

/// What `finding` for the call to `tool` is worded from (`tool` as displayed: a lone
/// surrogate shows as U+FFFD), with the session's names; pure Rust, so it runs under the lock.
fn worded(session: &NamedSession, finding: Finding, call: &Call<'_>, tool: &str) -> Wording {
    let (source, unknown) = session.source_names(&finding);
    let mut cycle = [("", 0); MAX_CYCLE_PERIOD];
    let cycle_len = session.cycle_calls(&finding, &call.key, tool, &mut cycle);
    let calls = &cycle[..cycle_len];
    Wording {
        finding,
        tool: CompactString::from(tool),
        args: call.key.args,
        source: source.map(CompactString::from),
        unknown: unknown.map(CompactString::from),
        cycle: cycle.map(|(_, args)| args),
        cycle_len,
        // The call's own name is passed through as the same `&str` (see `cycle_calls`).
        cycle_tools: if calls.iter().all(|&(name, _)| std::ptr::eq(name, tool) || name == tool) {
            Box::default()
        } else {
            calls.iter().map(|&(name, _)| CompactString::from(name)).collect()
        },
    }
}

fn verdict_of(py: Python<'_>, found: Option<Wording>) -> PyResult<Py<LoopVerdict>> {
    match found {
        Some(wording) => Py::new(py, stuck_verdict(wording)),
        None => not_stuck(py),
    }
}

fn stuck_verdict(wording: Wording) -> LoopVerdict {
    let f = wording.finding;
    LoopVerdict {
        stuck: true,
        level: Some(if f.level == Level::Critical {
            "critical"
        } else {
            "warning"
        }),
        detector: Some(f.detector.name()),
        count: f.count,
        wording: Some(wording),
        text: OnceLock::new(),
    }
}

pub(crate) fn blocked_result<'py>(py: Python<'py>, message: &str) -> PyResult<Bound<'py, PyDict>> {
    // Interned keys and constants: a loop that keeps being blocked builds this on every call.
    let message = PyString::new(py, message);
    let entry = PyDict::new(py);
    entry.set_item(intern!(py, "type"), intern!(py, "text"))?;
    entry.set_item(intern!(py, "text"), &message)?;
    let details = PyDict::new(py);
    details.set_item(intern!(py, "status"), intern!(py, VETO_STATUS))?;
    details.set_item(intern!(py, "deniedReason"), intern!(py, VETO_REASON))?;
    details.set_item(intern!(py, "reason"), &message)?;
    let result = PyDict::new(py);
    result.set_item(intern!(py, "content"), PyList::new(py, [entry])?)?;
    result.set_item(intern!(py, "details"), details)?;
    Ok(result)
}

#[pymethods]
impl ToolLoopEngine {
    /// Build from a `LoopDetectionConfig`'s values (in `settings_of("LoopDetectionConfig")`
    /// order; checked again here) and the extension points.
    #[new]
    #[pyo3(signature = (
        settings,
        /,
        *,
        tool_aliases = None,
        known_poll_tools = None,
        volatile_keys = None,
        normalisers = None,
        send_like = None,
        _on_loop = None,
        _on_event = None,
        _on_compaction_loop = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        settings: &Bound<'_, PyTuple>,
        tool_aliases: Option<&Bound<'_, PyAny>>,
        known_poll_tools: Option<&Bound<'_, PyAny>>,
        volatile_keys: Option<&Bound<'_, PyAny>>,
        normalisers: Option<&Bound<'_, PyAny>>,
        send_like: Option<&Bound<'_, PyAny>>,
        _on_loop: Option<Py<PyAny>>,
        _on_event: Option<Py<PyAny>>,
        _on_compaction_loop: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        for (hook, name) in [
            (&_on_loop, "_on_loop"),
            (&_on_event, "_on_event"),
            (&_on_compaction_loop, "_on_compaction_loop"),
        ] {
            if hook.as_ref().is_some_and(|hook| !hook.bind(py).is_callable()) {
                return Err(PyTypeError::new_err(format!("{name} must be callable")));
            }
        }
        let (session, fixes) = NamedSession::new(checked(&TOOL_LOOP, settings)?);
        Ok(ToolLoopEngine {
            plain_by_value: session.config().hash_plain_results,
            state: Mutex::new(Tracked::new(session)),
            rules: Rules::from_options(tool_aliases, known_poll_tools, volatile_keys, normalisers, send_like)?,
            memo: Mutex::default(),
            on_loop: _on_loop,
            on_event: _on_event,
            on_compaction_loop: _on_compaction_loop,
            fixes,
        })
    }

    /// The detector's state and settings as a snapshot (docs/snapshots.md); the extension
    /// points are not part of it.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.snapshot(py))
    }

    /// Replace the state with a snapshot's (made under the same settings); on any error the
    /// state is left as it was.
    fn _restore(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.restore(py, &snapshot_bytes(data)?)
    }

    /// How the thresholds were reordered at construction, as OpenClaw's run time reorders
    /// them (empty when they were ordered).
    #[getter]
    fn _setting_fixes(&self) -> Vec<String> {
        self.fixes.clone()
    }

    /// The verdict for this call now, with no side effects.
    #[pyo3(signature = (tool, params, *, run_id = None))]
    fn check(
        &self,
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        run_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<LoopVerdict>> {
        let call = parse_call(self.rules(), Some(&self.memo), tool, params, run_id, None)?;
        let tool_name = call.tool.to_string_lossy();
        let found = {
            let session = self.lock(py);
            session
                .detect(&call.key)
                .map(|f| worded(&session, f, &call, &tool_name))
        };
        verdict_of(py, found)
    }

    /// Append the call to the history without a result.
    #[pyo3(signature = (tool, params, *, run_id = None, tool_call_id = None))]
    fn record_call(
        &self,
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        run_id: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let call = parse_call(self.rules(), Some(&self.memo), tool, params, run_id, tool_call_id)?;
        self.lock(py)
            .record_call(&call.key, call.call_id, &call.tool.to_string_lossy());
        Ok(())
    }

    /// Record a finished call's outcome (not fed to the guard; see `after_tool_call`).
    #[pyo3(signature = (tool, params, *, result = None, error = None, run_id = None, tool_call_id = None))]
    #[allow(clippy::too_many_arguments)]
    fn record_outcome(
        &self,
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        result: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        run_id: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<ToolOutcome>> {
        let call = parse_call(self.rules(), Some(&self.memo), tool, params, run_id, tool_call_id)?;
        let normalised = normalise(
            self.rules(),
            Some(&self.memo),
            &call,
            result,
            error,
            self.plain_by_value,
        )?;
        if let Some(outcome) = normalised.outcome {
            self.lock(py).record_outcome(
                &call.key,
                call.call_id,
                outcome,
                &call.tool.to_string_lossy(),
                normalised.unknown_name.as_deref(),
            );
        }
        outcome_object(py, &call, normalised, None)
    }

    /// Detect, decide and record one call about to run (see docs/tool-loop.md for the steps).
    #[pyo3(signature = (tool, params, *, run_id = None, tool_call_id = None))]
    pub(crate) fn before_tool_call(
        slf: &Bound<'_, Self>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        run_id: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<ToolCallDecision>> {
        Self::before_limited(slf, tool, params, run_id, tool_call_id, None)
    }

    /// Record a finished call's outcome and feed it to the post-compaction guard.
    #[pyo3(signature = (tool, params, *, result = None, error = None, run_id = None, tool_call_id = None))]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn after_tool_call(
        slf: &Bound<'_, Self>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        result: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        run_id: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<ToolOutcome>> {
        let py = slf.py();
        let engine = slf.get();
        let call = parse_call(engine.rules(), Some(&engine.memo), tool, params, run_id, tool_call_id)?;
        let normalised = normalise(
            engine.rules(),
            Some(&engine.memo),
            &call,
            result,
            error,
            engine.plain_by_value,
        )?;
        let verdict = engine.lock(py).after_call(
            &call.key,
            call.call_id,
            normalised.outcome,
            &call.tool.to_string_lossy(),
            normalised.unknown_name.as_deref(),
        );
        let guard = verdict.map(|v| guard_verdict(py, v, &call.tool)).transpose()?;
        let abort = guard.as_ref().is_some_and(|g| g.get().should_abort);
        let outcome = outcome_object(py, &call, normalised, guard)?;
        if let (true, Some(on_compaction_loop)) = (abort, &engine.on_compaction_loop) {
            on_compaction_loop.call1(py, (slf, outcome.clone_ref(py), run_id))?;
        }
        Ok(outcome)
    }

    /// Arm the post-compaction guard; returns the attempts armed for (0: guard disabled).
    fn _arm(&self, py: Python<'_>) -> u32 {
        self.lock(py).arm_guard()
    }

    /// Counts since the detector was built (O(1)): calls decided, warnings emitted, calls
    /// blocked, blocked episodes, finished calls reported, guard aborts, and the history's
    /// length.
    fn get_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (s, history) = {
            let state = self.lock(py);
            (state.stats(), state.history_len())
        };
        let stats = PyDict::new(py);
        stats.set_item("calls", s.calls)?;
        stats.set_item("warnings", s.warnings)?;
        stats.set_item("blocks", s.blocks)?;
        stats.set_item("blocked_episodes", s.blocked_episodes)?;
        stats.set_item("outcomes", s.outcomes)?;
        stats.set_item("guard_aborts", s.guard_aborts)?;
        stats.set_item("history_len", history)?;
        Ok(stats)
    }

    /// Records in the history now.
    #[getter]
    fn history_len(&self, py: Python<'_>) -> usize {
        self.lock(py).history_len()
    }

    /// Warning keys remembered now (at most 256).
    #[getter]
    fn _warning_keys(&self, py: Python<'_>) -> usize {
        self.lock(py).warning_keys()
    }

    /// Guard attempts left in the armed window (0: not armed).
    #[getter]
    fn guard_remaining(&self, py: Python<'_>) -> u32 {
        self.lock(py).guard().remaining()
    }

    /// Bytes this detector's Rust state holds outside the Python object (history ring,
    /// warning buckets, guard window, extension rules).
    fn _state_size(&self, py: Python<'_>) -> usize {
        let memo = lock(py, &self.memo).heap_bytes();
        self.lock(py).heap_bytes() + memo + self.rules.as_ref().map_or(0, |r| r.heap_bytes())
    }
}

fn outcome_object(
    py: Python<'_>,
    call: &Call<'_>,
    normalised: Normalised,
    guard: Option<Py<GuardVerdict>>,
) -> PyResult<Py<ToolOutcome>> {
    Py::new(
        py,
        ToolOutcome {
            tool: call.tool.clone().unbind(),
            args_hash: call.key.args,
            result_hash: normalised.outcome.map(|o| o.result),
            is_error: normalised.is_error,
            unknown_tool_name: normalised.unknown_name,
            guard,
        },
    )
}

// ---------------------------------------------------------------------------------------
// Standalone guard and hashing helper
// ---------------------------------------------------------------------------------------

/// The post-compaction guard on its own (the Rust half of `doomloop.PostCompactionGuard`).
#[pyclass(module = "doomloop._core", subclass, frozen)]
pub struct GuardEngine {
    guard: Mutex<CompactionGuard>,
}

impl GuardEngine {
    #[inline]
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, CompactionGuard> {
        lock(py, &self.guard)
    }
}

#[pymethods]
impl GuardEngine {
    #[new]
    #[pyo3(signature = (window_size = None))]
    fn new(py: Python<'_>, window_size: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let window = match window_size {
            Some(value) => checked_one(&GUARD, value)?,
            None => GUARD.settings[0].default,
        };
        // Checked: within 1..=MAX_GUARD_WINDOW.
        let window = u32::try_from(window.count()).unwrap_or(1);
        let _ = py;
        Ok(GuardEngine {
            guard: Mutex::new(CompactionGuard::new(window)),
        })
    }

    /// Observe a finished call (hashed like the detector does). `None` when the outcome has
    /// no result hash (no result, or a loop veto).
    #[pyo3(signature = (tool, params, *, result = None, error = None))]
    fn observe(
        &self,
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        result: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<GuardVerdict>>> {
        let call = parse_call(None, None, tool, params, None, None)?;
        // OpenClaw's guard, OpenClaw's hashing.
        let Some(outcome) = normalise(None, None, &call, result, error, false)?.outcome else {
            return Ok(None);
        };
        let verdict = self.lock(py).observe(call.key.tool, call.key.args, outcome.result);
        guard_verdict(py, verdict, &call.tool).map(Some)
    }

    /// Observe an outcome given as hashes (`args_hash`/`result_hash` as on `ToolOutcome`).
    #[pyo3(signature = (tool, args_hash, result_hash))]
    fn observe_hashes(
        &self,
        py: Python<'_>,
        tool: &Bound<'_, PyAny>,
        args_hash: u64,
        result_hash: u64,
    ) -> PyResult<Py<GuardVerdict>> {
        let tool = tool
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err(format!("tool must be a str, got {}", type_name(tool))))?;
        let verdict = self.lock(py).observe(fingerprint_str(tool), args_hash, result_hash);
        guard_verdict(py, verdict, tool)
    }

    fn _arm(&self, py: Python<'_>) -> u32 {
        self.lock(py).arm()
    }

    #[getter]
    fn window_size(&self, py: Python<'_>) -> u32 {
        self.lock(py).window_size()
    }

    /// Attempts left in the armed window (0: not armed).
    #[getter]
    fn remaining(&self, py: Python<'_>) -> u32 {
        self.lock(py).remaining()
    }
}

/// The result hash a detector records for this outcome (`None`: nothing recorded), with the
/// built-in normalisation rules; `hash_plain_results` as the detector's setting (by default
/// the settings table's, as `ToolLoopDetector()` has it).
#[pyfunction]
#[pyo3(signature = (tool, params, *, result = None, error = None, hash_plain_results = None))]
pub fn tool_result_hash(
    tool: &Bound<'_, PyAny>,
    params: &Bound<'_, PyAny>,
    result: Option<&Bound<'_, PyAny>>,
    error: Option<&Bound<'_, PyAny>>,
    hash_plain_results: Option<bool>,
) -> PyResult<Option<u64>> {
    let plain_by_value = hash_plain_results.unwrap_or_else(|| LoopConfig::default().hash_plain_results);
    let call = parse_call(None, None, tool, params, None, None)?;
    Ok(normalise(None, None, &call, result, error, plain_by_value)?
        .outcome
        .map(|o| o.result))
}
