//! `RegistryEngine`: the session table of `doomloop.gateway.SessionRegistry` (which
//! subclasses it), over `doomloop_engine::idle_map`.
//!
//! A tool call through the registry is one Rust call: the key is looked up, the session
//! touched and its tool-loop detector called with no Python frame in between. The table's
//! lock is held only for map operations: Python code (the clock, building a session, the
//! detectors and their hooks, dropping evicted sessions) always runs with it released, so a
//! hook that calls back into the registry cannot deadlock.

use std::sync::{Mutex, MutexGuard};

use doomloop_engine::idle_map::IdleMap;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use pyo3::{PyTraverseError, PyVisit};

use crate::ffi::lock;
use crate::session::monotonic_seconds;
use crate::tool_loop::{ToolCallDecision, ToolLoopEngine, ToolOutcome};

/// A `str` key this short (in code points) is at most `MAX_KEY_BYTES` of UTF-8: it is used
/// as it is, unchecked (the registry's `_SHORT_KEY`).
const SHORT_KEY: usize = 1024 / 4;

/// One live session.
struct Entry {
    /// The registry's form of the key (an exact `str`).
    key: Py<PyString>,
    /// The Python `Session` object (`get(key)` returns it).
    session: Py<PyAny>,
    /// Its tool-loop detector, called directly by the tool-call hooks (`None` with a shared
    /// store, where every hook runs on the store's state in Python).
    tool: Option<Py<ToolLoopEngine>>,
}

#[derive(Default)]
struct Table {
    sessions: IdleMap<Entry>,
    created: u64,
    evicted: u64,
    expired: u64,
}

/// What the constructor is given (the registry's `__new__` validates it first).
struct Config {
    ttl: f64,
    max_sessions: usize,
    /// `None`: a monotonic clock read here.
    clock: Option<Py<PyAny>>,
    /// `callable(registry, key) -> Session`: a new session's detectors (Python code: the
    /// registry's configs, options and event callback).
    new_session: Py<PyAny>,
    /// `callable(key) -> str`: the registry's form of a key that is not a short exact `str`
    /// (it checks the key and decodes bytes; the registry's `_normalised`).
    normalise_key: Py<PyAny>,
    /// With a shared store, the tool-call hooks hand the session to these callables (the
    /// registry's Python path through the store), `(registry, session, tool, params, run_id,
    /// tool_call_id)` and `(registry, session, tool, params, result, error, run_id,
    /// tool_call_id)`.
    shared: Option<(Py<PyAny>, Py<PyAny>)>,
}

#[pyclass(module = "doomloop._core", subclass, frozen)]
pub struct RegistryEngine {
    table: Mutex<Table>,
    config: Config,
}

impl RegistryEngine {
    #[inline]
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, Table> {
        lock(py, &self.table)
    }

    /// The tool-call hooks' path through the shared store (only asked for with one).
    fn shared_hooks(&self) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
        self.config
            .shared
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("the registry has no shared store"))
    }

    fn now(py: Python<'_>, config: &Config) -> PyResult<f64> {
        let Some(clock) = &config.clock else {
            return Ok(monotonic_seconds());
        };
        match clock.call0(py)?.extract::<f64>(py) {
            Ok(seconds) if !seconds.is_nan() => Ok(seconds),
            _ => Err(PyTypeError::new_err("clock() must return a number of seconds")),
        }
    }

    /// The session's entry (its `Session` object and tool-loop detector), created if it has
    /// none or its idle TTL passed.
    fn entry(slf: &Bound<'_, Self>, key: &Bound<'_, PyAny>) -> PyResult<(Py<PyAny>, Option<Py<ToolLoopEngine>>)> {
        let py = slf.py();
        let engine = slf.get();
        let config = &engine.config;
        let name = config.normalised(key)?;
        let hash = name.hash()? as u64;
        let now = Self::now(py, config)?;
        {
            let mut table = engine.lock(py);
            let found = table.sessions.find(hash, |e| same_key(&e.key, &name));
            if let Some(id) = found {
                if let Some((entry, touched)) = table.sessions.get(id) {
                    if now - touched <= config.ttl {
                        let found = (
                            entry.session.clone_ref(py),
                            entry.tool.as_ref().map(|t| t.clone_ref(py)),
                        );
                        table.sessions.touch(id, now);
                        return Ok(found);
                    }
                }
            }
        }
        Self::create(slf, config, name, hash, now)
    }

    #[cold]
    fn create(
        slf: &Bound<'_, Self>,
        config: &Config,
        name: Bound<'_, PyString>,
        hash: u64,
        now: f64,
    ) -> PyResult<(Py<PyAny>, Option<Py<ToolLoopEngine>>)> {
        let py = slf.py();
        // Built with the lock released (it runs Python code); a thread that loses the race to
        // create the same session drops its own.
        let session = config.new_session.bind(py).call1((slf, &name))?;
        let tool = if config.shared.is_some() {
            None
        } else {
            Some(
                session
                    .getattr(intern!(py, "tool_loop"))?
                    .cast_into::<ToolLoopEngine>()?
                    .unbind(),
            )
        };
        let mut dropped = Vec::new();
        let found = {
            let mut table = slf.get().lock(py);
            let table = &mut *table;
            let mut winner = None;
            if let Some(id) = table.sessions.find(hash, |e| same_key(&e.key, &name)) {
                match table.sessions.get(id) {
                    Some((entry, touched)) if now - touched <= config.ttl => {
                        winner = Some((
                            entry.session.clone_ref(py),
                            entry.tool.as_ref().map(|t| t.clone_ref(py)),
                        ));
                    }
                    _ => {
                        dropped.extend(table.sessions.remove(id));
                        table.expired += 1;
                    }
                }
            }
            match winner {
                Some(found) => found,
                None => {
                    let found = (session.clone().unbind(), tool.as_ref().map(|t| t.clone_ref(py)));
                    let entry = Entry {
                        key: name.unbind(),
                        session: session.unbind(),
                        tool,
                    };
                    table.sessions.insert(hash, entry, now);
                    table.created += 1;
                    // Idle sessions are dropped here, so the map only grows while sessions
                    // are live.
                    table.expired += table.sessions.expire(now, config.ttl, &mut dropped);
                    table.evicted += table.sessions.evict_over(config.max_sessions, &mut dropped);
                    found
                }
            }
        };
        // Dropped here, lock released: freeing a session may run Python code.
        drop(dropped);
        Ok(found)
    }

    /// Sweep the idle sessions, then read the table.
    fn swept<R>(&self, py: Python<'_>, read: impl FnOnce(&Table) -> R) -> PyResult<R> {
        let config = &self.config;
        let now = Self::now(py, config)?;
        let mut dropped = Vec::new();
        let result = {
            let mut table = self.lock(py);
            let table = &mut *table;
            table.expired += table.sessions.expire(now, config.ttl, &mut dropped);
            read(table)
        };
        drop(dropped);
        Ok(result)
    }
}

/// Whether two registry keys (exact `str`s) are equal: the same object, or equal text.
fn same_key(known: &Py<PyString>, name: &Bound<'_, PyString>) -> bool {
    known.is(name) || known.bind(name.py()).as_any().eq(name).unwrap_or(false)
}

impl Config {
    /// The registry's own form of a session key: a short, non-empty exact `str` itself,
    /// anything else through `normalise_key` (which checks it and decodes bytes; an empty key
    /// is a ValueError there, with or without a store).
    fn normalised<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
        if let Ok(name) = key.cast_exact::<PyString>() {
            if (1..=SHORT_KEY).contains(&name.len()?) {
                return Ok(name.clone());
            }
        }
        Ok(self
            .normalise_key
            .call1(key.py(), (key,))?
            .into_bound(key.py())
            .cast_into::<PyString>()?)
    }
}

#[pymethods]
impl RegistryEngine {
    /// The TTL, the maximum, the clock (`None`: monotonic), what builds a session, what
    /// normalises a key and, with a shared store, the two tool-call hooks' path through it (see
    /// `Config`): the registry's `__new__` checks them and builds the engine with them.
    #[new]
    #[pyo3(signature = (*, ttl, max_sessions, clock, new_session, normalise_key, shared))]
    fn new(
        ttl: f64,
        max_sessions: usize,
        clock: Option<Py<PyAny>>,
        new_session: Py<PyAny>,
        normalise_key: Py<PyAny>,
        shared: Option<(Py<PyAny>, Py<PyAny>)>,
    ) -> Self {
        RegistryEngine {
            table: Mutex::default(),
            config: Config {
                ttl,
                max_sessions,
                clock,
                new_session,
                normalise_key,
                shared,
            },
        }
    }

    /// Seconds a session may stay idle before it is evicted.
    #[getter]
    fn ttl(&self) -> f64 {
        self.config.ttl
    }

    /// Sessions kept at most; past it the least recently used is evicted.
    #[getter]
    fn max_sessions(&self) -> usize {
        self.config.max_sessions
    }

    /// Sessions created since the registry was built.
    #[getter]
    fn created(&self, py: Python<'_>) -> u64 {
        self.lock(py).created
    }

    /// Sessions evicted over `max_sessions`.
    #[getter]
    fn evicted(&self, py: Python<'_>) -> u64 {
        self.lock(py).evicted
    }

    /// Sessions dropped when idle past the TTL.
    #[getter]
    fn expired(&self, py: Python<'_>) -> u64 {
        self.lock(py).expired
    }

    /// The session's `Session`, created if it has none (or its idle TTL passed).
    fn _session(slf: &Bound<'_, Self>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Ok(Self::entry(slf, key)?.0)
    }

    /// Forget the session here (`name` in the registry's form).
    fn _forget(&self, py: Python<'_>, name: &Bound<'_, PyString>) -> PyResult<()> {
        let hash = name.hash()? as u64;
        let dropped = {
            let mut table = self.lock(py);
            let found = table.sessions.find(hash, |e| same_key(&e.key, name));
            found.and_then(|id| table.sessions.remove(id))
        };
        drop(dropped);
        Ok(())
    }

    /// Live sessions (idle ones past the TTL are dropped first).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.swept(py, |table| table.sessions.len())
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        if !(key.is_instance_of::<PyString>() || key.is_instance_of::<PyBytes>()) {
            return Ok(false);
        }
        let py = key.py();
        let config = &self.config;
        let name = config.normalised(key)?;
        let hash = name.hash()? as u64;
        let now = Self::now(py, config)?;
        let table = self.lock(py);
        let found = table.sessions.find(hash, |e| same_key(&e.key, &name));
        Ok(found
            .and_then(|id| table.sessions.get(id))
            .is_some_and(|(_, touched)| now - touched <= config.ttl))
    }

    /// Registry-wide counters: ``live`` sessions, sessions ``created``, ``evicted`` (over
    /// ``max_sessions``) and ``expired`` (idle past the TTL).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (live, created, evicted, expired) =
            self.swept(py, |t| (t.sessions.len(), t.created, t.evicted, t.expired))?;
        let stats = PyDict::new(py);
        stats.set_item("live", live)?;
        stats.set_item("created", created)?;
        stats.set_item("evicted", evicted)?;
        stats.set_item("expired", expired)?;
        Ok(stats)
    }

    /// :meth:`ToolLoopDetector.before_tool_call` of the session's detector.
    #[pyo3(signature = (key, tool, params, *, run_id = None, tool_call_id = None))]
    fn before_tool_call(
        slf: &Bound<'_, Self>,
        key: &Bound<'_, PyAny>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        run_id: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        match Self::entry(slf, key)? {
            (_, Some(detector)) => {
                let decision: Py<ToolCallDecision> =
                    ToolLoopEngine::before_tool_call(detector.bind(py), tool, params, run_id, tool_call_id)?;
                Ok(decision.into_any())
            }
            (session, None) => {
                let before = &slf.get().shared_hooks()?.0;
                Ok(before.call1(py, (slf, session, tool, params, run_id, tool_call_id))?)
            }
        }
    }

    /// :meth:`ToolLoopDetector.after_tool_call` of the session's detector.
    #[pyo3(signature = (key, tool, params, *, result = None, error = None, run_id = None, tool_call_id = None))]
    #[allow(clippy::too_many_arguments)]
    fn after_tool_call(
        slf: &Bound<'_, Self>,
        key: &Bound<'_, PyAny>,
        tool: &Bound<'_, PyAny>,
        params: &Bound<'_, PyAny>,
        result: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        run_id: Option<&Bound<'_, PyAny>>,
        tool_call_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        match Self::entry(slf, key)? {
            (_, Some(detector)) => {
                let outcome: Py<ToolOutcome> = ToolLoopEngine::after_tool_call(
                    detector.bind(py),
                    tool,
                    params,
                    result,
                    error,
                    run_id,
                    tool_call_id,
                )?;
                Ok(outcome.into_any())
            }
            (session, None) => {
                let after = &slf.get().shared_hooks()?.1;
                Ok(after.call1(py, (slf, session, tool, params, result, error, run_id, tool_call_id))?)
            }
        }
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // The collector runs with the interpreter held: never wait for the lock here (a
        // holder never runs Python code, so it is only ever held briefly, never across this).
        if let Ok(table) = self.table.try_lock() {
            for entry in table.sessions.values() {
                visit.call(&entry.session)?;
                visit.call(&entry.tool)?;
            }
        }
        let config = &self.config;
        visit.call(&config.clock)?;
        visit.call(&config.new_session)?;
        visit.call(&config.normalise_key)?;
        if let Some((before, after)) = &config.shared {
            visit.call(before)?;
            visit.call(after)?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        // As in `__traverse__`, never wait: a table in use is left for a later collection.
        let dropped = match self.table.try_lock() {
            Ok(mut table) => table.sessions.drain(),
            Err(_) => Vec::new(),
        };
        drop(dropped);
    }
}
