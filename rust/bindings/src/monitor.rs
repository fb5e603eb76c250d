//! `MonitorEngine`: the tool-call hooks of `doomloop.Monitor` (which subclasses it), one Rust
//! call each. `before_tool_call` asks the session's tool-loop detector; `after_tool_call`
//! records the outcome there and the action in the session detector, then asks whether a
//! session loop stands. Python code runs only when there is something to report: the hooks
//! handed over by `_bind_monitor` at import build the findings.

use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use doomloop_engine::policy::{Policies, Policy};
use doomloop_engine::snapshot::{monitor_parts, pack_monitor};

use crate::chant::ChantEngine;
use crate::errors::snapshot_refused;
use crate::ffi::{lock, DictPosition};
use crate::policies::ToolPolicies;
use crate::session::SessionEngine;
use crate::tool_loop::{allow, blocked_result, LoopVerdict, ToolCallDecision, ToolLoopEngine};

/// What `before_tool_call` returns: the tool-loop detector's decision and the monitor's
/// findings about it (immutable).
#[pyclass(module = "doomloop._core", frozen)]
pub struct ToolDecision {
    decision: Py<ToolCallDecision>,
    /// None for no finding: the healthy path allocates no list (each read of `findings` then
    /// gives a fresh empty one, so no caller can change another's).
    findings: Option<Py<PyList>>,
    /// The monitor's own veto of a call the detector let through (a warned loop that went on
    /// past its warning), with the text the model sees instead of the result.
    veto: Option<String>,
}

impl ToolDecision {
    /// The decision for a call no detector watches: allowed, no finding.
    fn allowed(py: Python<'_>) -> PyResult<Self> {
        Ok(ToolDecision {
            decision: allow(py)?,
            findings: None,
            veto: None,
        })
    }
}

#[pymethods]
impl ToolDecision {
    #[new]
    #[pyo3(signature = (decision, findings, veto = None))]
    fn new(decision: Py<ToolCallDecision>, findings: Py<PyList>, veto: Option<String>) -> Self {
        ToolDecision {
            decision,
            findings: Some(findings),
            veto,
        }
    }

    /// What the monitor found (empty when nothing).
    #[getter]
    fn findings(&self, py: Python<'_>) -> Py<PyList> {
        match &self.findings {
            Some(findings) => findings.clone_ref(py),
            None => PyList::empty(py).unbind(),
        }
    }

    /// The tool-loop detector's own decision.
    #[getter]
    fn decision(&self, py: Python<'_>) -> Py<ToolCallDecision> {
        self.decision.clone_ref(py)
    }

    /// A critical finding vetoes the call: do not run it; give the model `veto`.
    #[getter]
    fn blocked(&self) -> bool {
        self.decision.get().is_blocked() || self.veto.is_some()
    }

    /// OpenClaw's veto result (a dict carrying the veto text) when blocked, else None.
    #[getter]
    fn blocked_result(&self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        let decision = self.decision.get();
        if decision.is_blocked() {
            return Ok(decision.blocked_result(py));
        }
        match &self.veto {
            Some(veto) => Ok(Some(blocked_result(py, veto)?.unbind())),
            None => Ok(None),
        }
    }

    /// The tool-loop detector's verdict.
    #[getter]
    fn verdict(&self, py: Python<'_>) -> PyResult<Py<LoopVerdict>> {
        self.decision.get().verdict(py)
    }

    /// The text the model sees instead of the call's result when blocked, else None.
    #[getter]
    fn veto(&self) -> Option<String> {
        let decision = self.decision.get();
        if decision.is_blocked() {
            decision.message()
        } else {
            self.veto.clone()
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let findings = self.findings(py).into_bound(py).repr()?;
        let blocked = if self.blocked() { "True" } else { "False" };
        Ok(format!("ToolDecision(blocked={blocked}, findings={findings})"))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.decision)?;
        if let Some(findings) = &self.findings {
            visit.call(findings)?;
        }
        Ok(())
    }
}

/// The four parts of a `Monitor` snapshot (its header's JSON, then the tool-loop, session
/// and chant detectors' snapshots); a `SnapshotError` naming what is wrong with its framing.
#[pyfunction]
pub fn _monitor_parts<'py>(data: &Bound<'py, PyBytes>) -> PyResult<[Bound<'py, PyBytes>; 4]> {
    let py = data.py();
    let parts = monitor_parts(data.as_bytes()).map_err(|why| snapshot_refused(py, why))?;
    Ok(parts.map(|part| PyBytes::new(py, part)))
}

/// The `Monitor` snapshot of its four parts (`_monitor_parts` reads it).
#[pyfunction]
pub fn _pack_monitor<'py>(
    py: Python<'py>,
    header: &[u8],
    tool: &[u8],
    session: &[u8],
    chant: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    packed(py, [header, tool, session, chant])
}

/// The `Monitor` snapshot of `parts` as bytes; a `SnapshotError` for a part too long to frame.
/// The detectors' hooks `MonitorEngine::_hook_update` runs (the registries' `HOOKS` less
/// `arm_post_compaction`, which logs from Python, and `apply`, which runs the caller's code).
#[derive(Clone, Copy)]
enum DetectorHook {
    BeforeToolCall,
    AfterToolCall,
    RecordAction,
    MarkProgress,
    RecordResponse,
    IsDoomLoop,
}

impl DetectorHook {
    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "before_tool_call" => Self::BeforeToolCall,
            "after_tool_call" => Self::AfterToolCall,
            "record_action" => Self::RecordAction,
            "mark_progress" => Self::MarkProgress,
            "record_response" => Self::RecordResponse,
            "is_doom_loop" => Self::IsDoomLoop,
            _ => return None,
        })
    }

    /// How many positional arguments the hook takes.
    fn arity(self) -> usize {
        match self {
            Self::BeforeToolCall => 4,
            Self::AfterToolCall | Self::RecordAction => 6,
            Self::MarkProgress | Self::RecordResponse => 1,
            Self::IsDoomLoop => 0,
        }
    }

    /// Run the hook on the monitor's detectors with `args` (None stands for an argument not
    /// given, as in the detectors' own methods); its return, None for the session's.
    fn run(
        self,
        detector: &Bound<'_, ToolLoopEngine>,
        session: &Bound<'_, SessionEngine>,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<Py<PyAny>> {
        let py = args.py();
        if args.len() != self.arity() {
            let problem = format!(
                "this detector hook takes {} arguments, got {}",
                self.arity(),
                args.len()
            );
            return Err(PyTypeError::new_err(problem));
        }
        let arg = |k: usize| args.get_item(k);
        let given = |k: usize| -> PyResult<Option<Bound<'_, PyAny>>> {
            let value = args.get_item(k)?;
            Ok((!value.is_none()).then_some(value))
        };
        Ok(match self {
            Self::BeforeToolCall => {
                let (run_id, call_id) = (given(2)?, given(3)?);
                let (tool, params) = (arg(0)?, arg(1)?);
                ToolLoopEngine::before_tool_call(detector, &tool, &params, run_id.as_ref(), call_id.as_ref())?
                    .into_any()
            }
            Self::AfterToolCall => {
                let (result, error, run_id, call_id) = (given(2)?, given(3)?, given(4)?, given(5)?);
                let (tool, params) = (arg(0)?, arg(1)?);
                let (result, error, run_id, call_id) =
                    (result.as_ref(), error.as_ref(), run_id.as_ref(), call_id.as_ref());
                ToolLoopEngine::after_tool_call(detector, &tool, &params, result, error, run_id, call_id)?.into_any()
            }
            Self::RecordAction => {
                let (duration, metadata) = (given(4)?, given(5)?);
                let (action, params, result, success) = (arg(0)?, arg(1)?, arg(2)?, arg(3)?);
                SessionEngine::record_action(
                    session,
                    &action,
                    &params,
                    &result,
                    &success,
                    duration.as_ref(),
                    metadata.as_ref(),
                )?;
                py.None()
            }
            Self::MarkProgress => {
                session.get().mark_progress(py, &arg(0)?)?;
                py.None()
            }
            Self::RecordResponse => {
                SessionEngine::record_response(session, &arg(0)?)?;
                py.None()
            }
            Self::IsDoomLoop => PyBool::new(py, SessionEngine::is_doom_loop(session)?)
                .to_owned()
                .into_any()
                .unbind(),
        })
    }
}

fn packed<'py>(py: Python<'py>, parts: [&[u8]; 4]) -> PyResult<Bound<'py, PyBytes>> {
    let blob =
        pack_monitor(parts).ok_or_else(|| snapshot_refused(py, "a part of the Monitor snapshot is 4 GiB or more"))?;
    Ok(PyBytes::new(py, &blob))
}

/// The Python side of a monitor's tool hooks, handed over once at import.
struct Hooks {
    /// `(monitor, decision, tool, params, step) -> ToolDecision`: a verdict to report, or a
    /// call while the monitor has stopped a session loop.
    on_verdict: Py<PyAny>,
    /// `(monitor, outcome, tool, params, step) -> list[Finding]`: a guard abort, or a session
    /// loop that stands.
    on_after: Py<PyAny>,
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Hand the extension the monitor's finding builders (`doomloop.monitor` calls it once).
#[pyfunction]
pub fn _bind_monitor(on_verdict: Py<PyAny>, on_after: Py<PyAny>) {
    // A second call (a reloaded module) keeps the first hooks: they are the same functions.
    let _ = HOOKS.set(Hooks { on_verdict, on_after });
}

fn hooks() -> PyResult<&'static Hooks> {
    HOOKS
        .get()
        .ok_or_else(|| PyRuntimeError::new_err("doomloop.monitor was not imported (its hooks are not bound)"))
}

/// The detectors a monitor's tool hooks call, its step counter and its run id.
#[derive(Default)]
struct Parts {
    tool: Option<Py<ToolLoopEngine>>,
    session: Option<Py<SessionEngine>>,
    step: u64,
    run_id: Option<Py<PyString>>,
    /// The session loop the monitor stopped (its Python record), while it holds: every
    /// `before_tool_call` then goes to the Python hook, which vetoes the stopped action. An
    /// `after_tool_call` that finds no loop clears it.
    stop: Option<Py<PyAny>>,
    /// Argument keys left out of a call's identity (the profile's `ignore_argument_keys`).
    ignore: Arc<Ignored>,
    /// The profile's `tool_policies` (none: every tool has the profile's thresholds).
    policies: Option<Arc<Policies>>,
}

/// Argument keys left out of a call's identity, with the lengths of those starting with each
/// byte (a bit per UTF-8 length, under 64) so that most keys of a call are ruled out by their
/// first byte and length, without comparing them with the names.
struct Ignored {
    names: Vec<String>,
    lengths: [u64; 256],
}

impl Default for Ignored {
    fn default() -> Self {
        Ignored::new(Vec::new())
    }
}

impl Ignored {
    fn new(names: Vec<String>) -> Self {
        let mut lengths = [0; 256];
        for name in &names {
            if let Some(&first) = name.as_bytes().first() {
                lengths[usize::from(first)] |= length_bit(name.len());
            }
        }
        Ignored { names, lengths }
    }

    fn holds(&self, key: Borrowed<'_, '_, PyAny>) -> bool {
        let Ok(key) = key.cast::<PyString>() else {
            return false;
        };
        let Ok(key) = key.to_str() else {
            return false;
        };
        let fits = key
            .as_bytes()
            .first()
            .is_some_and(|&first| self.lengths[usize::from(first)] & length_bit(key.len()) != 0);
        fits && self.names.iter().any(|name| name == key)
    }
}

/// The [`Ignored`] of recent profiles, shared by their monitors: a gateway keeps thousands of
/// sessions of one profile, and each then holds a pointer, not its own table.
static IGNORED: Mutex<Vec<Arc<Ignored>>> = Mutex::new(Vec::new());

/// Distinct lists of names [`IGNORED`] keeps at most (more are not shared).
const IGNORED_SHARED: usize = 32;

fn shared_ignored(py: Python<'_>, names: Vec<String>) -> Arc<Ignored> {
    let mut shared = lock(py, &IGNORED);
    if let Some(found) = shared.iter().find(|ignored| ignored.names == names) {
        return Arc::clone(found);
    }
    let made = Arc::new(Ignored::new(names));
    if shared.len() < IGNORED_SHARED {
        shared.push(Arc::clone(&made));
    }
    made
}

/// A UTF-8 length's bit in [`Ignored::lengths`] (all longer names share the top bit).
fn length_bit(length: usize) -> u64 {
    1u64 << length.min(63)
}

/// `params` without the ignored keys: a copy of a dict that holds one of them, else `params`
/// itself (a call's identity, for both detectors, leaves out what varies by design: a request
/// id, a timestamp).
fn without_ignored<'py>(params: &Bound<'py, PyAny>, ignore: &Ignored) -> PyResult<Bound<'py, PyAny>> {
    let dict = match params.cast::<PyDict>() {
        Ok(dict) if !ignore.names.is_empty() => dict,
        _ => return Ok(params.clone()),
    };
    let py = params.py();
    let mut position = DictPosition::default();
    let mut found = false;
    while let Some((key, _)) = position.next_pointers(dict.as_any()) {
        // SAFETY: `key` is a non-null reference borrowed from the live dict, used only within
        // this iteration, during which no Python code runs (a str's UTF-8 view is read).
        let key = unsafe { Borrowed::from_ptr(py, key) };
        if ignore.holds(key) {
            found = true;
            break;
        }
    }
    if !found {
        return Ok(params.clone());
    }
    let copy = PyDict::new(py);
    for (key, value) in dict.iter() {
        if !ignore.holds(key.as_borrowed()) {
            copy.set_item(key, value)?;
        }
    }
    Ok(copy.into_any())
}

#[pyclass(module = "doomloop._core", subclass, frozen)]
pub struct MonitorEngine {
    parts: Mutex<Parts>,
}

/// What one tool hook works with, read under the lock.
struct Hooked {
    tool: Py<ToolLoopEngine>,
    session: Py<SessionEngine>,
    /// The step before the hook (`before_tool_call` takes the next one).
    step: u64,
    run_id: Option<Py<PyString>>,
    stopped: bool,
    ignore: Arc<Ignored>,
    policies: Option<Arc<Policies>>,
}

impl Hooked {
    /// The policy of the tool named by `tool`, if a rule names it.
    fn policy(&self, tool: &Bound<'_, PyAny>) -> Option<Policy> {
        let policies = self.policies.as_deref()?;
        let name = tool.cast::<PyString>().ok()?;
        policies.find(name.to_str().ok()?).copied()
    }
}

impl MonitorEngine {
    fn hooked(&self, py: Python<'_>, take_step: bool) -> PyResult<Hooked> {
        let mut parts = lock(py, &self.parts);
        let (Some(tool), Some(session)) = (&parts.tool, &parts.session) else {
            return Err(PyRuntimeError::new_err(
                "the monitor has no detectors (its __init__ did not run)",
            ));
        };
        let hooked = Hooked {
            tool: tool.clone_ref(py),
            session: session.clone_ref(py),
            step: parts.step,
            run_id: parts.run_id.as_ref().map(|r| r.clone_ref(py)),
            stopped: parts.stop.is_some(),
            ignore: Arc::clone(&parts.ignore),
            policies: parts.policies.clone(),
        };
        if take_step {
            parts.step += 1;
        }
        Ok(hooked)
    }
}

#[pymethods]
impl MonitorEngine {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        MonitorEngine {
            parts: Mutex::new(Parts::default()),
        }
    }

    /// Set the detectors the tool hooks call (the monitor's own, on construction and restore).
    fn _set_detectors(&self, py: Python<'_>, tool: Py<ToolLoopEngine>, session: Py<SessionEngine>) {
        let mut parts = lock(py, &self.parts);
        parts.tool = Some(tool);
        parts.session = Some(session);
    }

    /// Steps recorded so far.
    #[getter]
    fn step(&self, py: Python<'_>) -> u64 {
        lock(py, &self.parts).step
    }

    #[setter]
    fn set_step(&self, py: Python<'_>, step: u64) {
        lock(py, &self.parts).step = step;
    }

    /// The tool-loop detector's run: the turn's number (None before the first user message).
    #[getter(_run_id)]
    fn run_id(&self, py: Python<'_>) -> Option<Py<PyString>> {
        lock(py, &self.parts).run_id.as_ref().map(|r| r.clone_ref(py))
    }

    #[setter(_run_id)]
    fn set_run_id(&self, py: Python<'_>, run_id: Option<Py<PyString>>) {
        lock(py, &self.parts).run_id = run_id;
    }

    /// Set the argument keys left out of a call's identity (the profile's).
    fn _set_ignored_keys(&self, py: Python<'_>, keys: Vec<String>) {
        let ignore = shared_ignored(py, keys);
        lock(py, &self.parts).ignore = ignore;
    }

    /// Set the tool policies (the profile's; None: none).
    fn _set_tool_policies(&self, py: Python<'_>, policies: Option<PyRef<'_, ToolPolicies>>) {
        let table = policies.map(|p| Arc::clone(&p.table)).filter(|table| !table.is_empty());
        lock(py, &self.parts).policies = table;
    }

    /// The session loop the monitor stopped, while it holds (None: none).
    #[getter(_stop)]
    fn stop(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        lock(py, &self.parts).stop.as_ref().map(|s| s.clone_ref(py))
    }

    #[setter(_stop)]
    fn set_stop(&self, py: Python<'_>, stop: Option<Py<PyAny>>) {
        // The replaced record is dropped after the lock is released.
        let _replaced = std::mem::replace(&mut lock(py, &self.parts).stop, stop);
    }

    /// The agent is about to call `tool`: the tool-loop detector's decision, with its verdict
    /// as a finding (a critical one vetoes the call).
    #[pyo3(signature = (tool, params, *, call_id = None))]
    fn before_tool_call(
        slf: &Bound<'_, Self>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        call_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let hooked = slf.get().hooked(py, true)?;
        let run_id = hooked.run_id.as_ref().map(|r| r.bind(py).as_any());
        let limits = match hooked.policy(tool) {
            // Not watched: neither detector sees the call.
            Some(Policy::Exempt) => return Ok(Py::new(py, ToolDecision::allowed(py)?)?.into_any()),
            Some(Policy::Limits { tool, .. }) => Some(tool),
            None => None,
        };
        let params = &without_ignored(params, &hooked.ignore)?;
        let decision = ToolLoopEngine::before_limited(hooked.tool.bind(py), tool, params, run_id, call_id, limits)?;
        if !decision.get().stuck() && !hooked.stopped {
            let found = ToolDecision {
                decision,
                findings: None,
                veto: None,
            };
            return Ok(Py::new(py, found)?.into_any());
        }
        hooks()?
            .on_verdict
            .call1(py, (slf, decision, tool, params, hooked.step))
    }

    /// The call returned `result` or failed with `error`: recorded by the tool-loop detector
    /// (and the post-compaction guard, when armed) and, as an action, by the session
    /// detector. `success` defaults to `error is None`.
    #[pyo3(signature = (tool, params, *, result = None, error = None, call_id = None, success = None))]
    fn after_tool_call(
        slf: &Bound<'_, Self>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        result: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        call_id: Option<&Bound<'_, PyAny>>,
        success: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let hooked = slf.get().hooked(py, false)?;
        let limits = match hooked.policy(tool) {
            Some(Policy::Exempt) => return Ok(PyList::empty(py).into_any().unbind()),
            Some(Policy::Limits { session, .. }) => Some(session),
            None => None,
        };
        let run_id = hooked.run_id.as_ref().map(|r| r.bind(py).as_any());
        let params = &without_ignored(params, &hooked.ignore)?;
        let outcome =
            ToolLoopEngine::after_tool_call(hooked.tool.bind(py), tool, params, result, error, run_id, call_id)?;
        let none = py.None().into_bound(py);
        let recorded = error.or(result).unwrap_or(&none);
        let ok = PyBool::new(py, success.unwrap_or(error.is_none()));
        let session = hooked.session.bind(py);
        SessionEngine::record_limited(session, tool, params, recorded, ok.as_any(), None, None, limits)?;
        if !outcome.get().aborts() && !SessionEngine::is_doom_loop(session)? {
            if hooked.stopped {
                // The stopped loop no longer holds.
                let _cleared = lock(py, &slf.get().parts).stop.take();
            }
            return Ok(PyList::empty(py).into_any().unbind());
        }
        // The step of the call being completed (its before_tool_call took it).
        hooks()?
            .on_after
            .call1(py, (slf, outcome, tool, params, hooked.step.saturating_sub(1)))
    }

    /// One update of the session's blob in a shared store by a registry's detector hook
    /// (`DetectorUpdate`'s, in one call): restore what the store holds when another replica
    /// changed only the detectors' state since `saved` (the blob this monitor stored last,
    /// whose header part is `header`), run the hook named `hook` with `args` (the tool-loop
    /// detector's `before_tool_call` (tool, params, run_id, tool_call_id) or `after_tool_call`
    /// (tool, params, result, error, run_id, tool_call_id); the session detector's
    /// `record_action`, `mark_progress`, `record_response` or `is_doom_loop`, with their
    /// positional arguments), and snapshot the monitor with that header. Returns the hook's
    /// return and the new blob, or None, having changed nothing, when the update needs the
    /// Python path: the header (the monitor's own state) or the chant part differs from this
    /// monitor's, or a part cannot be restored here (that path reports it).
    fn _hook_update<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyBytes>,
        saved: Option<&Bound<'py, PyBytes>>,
        header: &Bound<'py, PyBytes>,
        chant: Option<&Bound<'py, ChantEngine>>,
        hook: &Bound<'py, PyString>,
        args: &Bound<'py, PyTuple>,
    ) -> PyResult<Option<(Py<PyAny>, Bound<'py, PyBytes>)>> {
        let py = slf.py();
        let Some(hook) = DetectorHook::named(hook.to_str()?) else {
            return Err(PyValueError::new_err(format!("no detector hook named {hook}")));
        };
        let (detector, session) = {
            let parts = lock(py, &slf.get().parts);
            let (Some(tool), Some(session)) = (&parts.tool, &parts.session) else {
                return Ok(None);
            };
            (tool.clone_ref(py), session.clone_ref(py))
        };
        let (detector, session) = (detector.bind(py), session.bind(py));
        // The chant detector's part is this monitor's own either way: its streams are not
        // shared through the store (a blob with another is the Python path's).
        let chant = chant.map(|c| c.get().snapshot(py)).unwrap_or_default();
        let Ok([stored_header, tool_part, session_part, chant_part]) = monitor_parts(data.as_bytes()) else {
            return Ok(None);
        };
        let unchanged = saved.is_some_and(|saved| saved.is(data) || saved.as_bytes() == data.as_bytes());
        if !unchanged {
            if stored_header != header.as_bytes() || chant_part != chant.as_slice() {
                return Ok(None);
            }
            // A part refused (another build's settings, damage) leaves the Python path to
            // restore the whole monitor, which reports it.
            if detector.get().restore(py, tool_part).is_err() || session.get().restore(py, session_part).is_err() {
                return Ok(None);
            }
        }
        let returned = hook.run(detector, session, args)?;
        // Only the detector the hook changed is encoded: the other keeps its part's bytes
        // (the session's with its clock read anew).
        let tool_part = detector.get().snapshot_after(py, tool_part);
        let session_part = session.get().snapshot_after(py, session_part)?;
        let blob = packed(py, [header.as_bytes(), &tool_part, &session_part, &chant])?;
        Ok(Some((returned, blob)))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never wait for the lock here: a collection can run while it is held.
        if let Ok(parts) = self.parts.try_lock() {
            if let Some(tool) = &parts.tool {
                visit.call(tool)?;
            }
            if let Some(session) = &parts.session {
                visit.call(session)?;
            }
            if let Some(stop) = &parts.stop {
                visit.call(stop)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        if let Ok(mut parts) = self.parts.try_lock() {
            parts.tool = None;
            parts.session = None;
            parts.stop = None;
        }
    }
}
