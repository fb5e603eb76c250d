//! The Python side of the tool-loop detector's call identity and result rules: parsing a
//! call's arguments, and [`PyValue`], the engine's [`ResultValue`] view of Python objects,
//! which reads dicts in place so the hot path builds no intermediate objects. The rules
//! themselves (OpenClaw's result hashing, tool kinds, known polls, volatile keys) are the
//! engine's (`doomloop_engine::tool_result`).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use doomloop_engine::fingerprint::{self as fp, hash_action};
use doomloop_engine::tool_loop::{CallKey, Outcome};
use doomloop_engine::tool_result::{self, Extensions, Field, ResultValue, ToolKind, ToolRules};
use pyo3::exceptions::{PyBaseException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::canonical::{
    fingerprint, fingerprint_masked, fingerprint_skipping, fingerprint_str, fingerprint_utf8, text_bytes, DictSnapshot,
};
use crate::ffi::{lock, type_name};

/// Optional extension points; `None` on the engine when none is used (keeps sessions small).
#[derive(Default)]
pub(crate) struct Rules {
    /// Aliases, extra known polls and extra volatile keys (the engine's plain-data rules).
    pub(crate) plain: ToolRules,
    pub(crate) normalisers: HashMap<String, Py<PyAny>>,
    pub(crate) send_like: Option<Py<PyAny>>,
}

impl Rules {
    pub(crate) fn from_options(
        aliases: Option<&Bound<'_, PyAny>>,
        known_polls: Option<&Bound<'_, PyAny>>,
        volatile_keys: Option<&Bound<'_, PyAny>>,
        normalisers: Option<&Bound<'_, PyAny>>,
        send_like: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Box<Rules>>> {
        let mut rules = Rules::default();
        if let Some(aliases) = aliases.filter(|a| !a.is_none()) {
            let aliases = aliases
                .cast::<PyDict>()
                .map_err(|_| PyTypeError::new_err("tool_aliases must be a dict of str to str"))?;
            for (k, v) in aliases.iter() {
                let (Ok(k), Ok(v)) = (k.cast::<PyString>(), v.cast::<PyString>()) else {
                    return Err(PyTypeError::new_err("tool_aliases must be a dict of str to str"));
                };
                rules
                    .plain
                    .aliases
                    .insert(plain_str(k, "tool_aliases")?, plain_str(v, "tool_aliases")?);
            }
        }
        rules.plain.known_polls = str_set(known_polls, "known_poll_tools")?;
        rules.plain.volatile_keys = str_set(volatile_keys, "volatile_keys")?;
        if let Some(normalisers) = normalisers.filter(|n| !n.is_none()) {
            let normalisers = normalisers
                .cast::<PyDict>()
                .map_err(|_| PyTypeError::new_err("normalisers must be a dict of tool name to callable"))?;
            for (k, v) in normalisers.iter() {
                let Ok(k) = k.cast::<PyString>() else {
                    return Err(PyTypeError::new_err(
                        "normalisers must be a dict of tool name to callable",
                    ));
                };
                if !v.is_callable() {
                    return Err(PyTypeError::new_err(format!("normalisers[{k:?}] must be callable")));
                }
                rules.normalisers.insert(plain_str(k, "normalisers")?, v.unbind());
            }
        }
        if let Some(send_like) = send_like.filter(|s| !s.is_none()) {
            if !send_like.is_callable() {
                return Err(PyTypeError::new_err(
                    "send_like must be a callable (tool, params) -> bool",
                ));
            }
            rules.send_like = Some(send_like.clone().unbind());
        }
        let unused = rules.plain.is_empty() && rules.normalisers.is_empty() && rules.send_like.is_none();
        Ok((!unused).then(|| Box::new(rules)))
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Rules>()
            + self.plain.heap_bytes()
            + self.normalisers.keys().map(|k| k.capacity() + 32).sum::<usize>()
    }
}

/// A tool name or key given in an option, as Rust text (a lone surrogate names no tool).
fn plain_str(text: &Bound<'_, PyString>, name: &str) -> PyResult<String> {
    text.to_str()
        .map(str::to_owned)
        .map_err(|_| PyValueError::new_err(format!("{name} must not contain lone surrogates, got {text:?}")))
}

pub(crate) fn str_set(value: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<HashSet<String>> {
    let mut set = HashSet::new();
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(set);
    };
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a collection of str, not a str"
        )));
    }
    let items = value
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a collection of str")))?;
    for item in items {
        let item = item?;
        let text = item
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err(format!("{name} must contain only str")))?;
        set.insert(plain_str(text, name)?);
    }
    Ok(set)
}

/// A call's identity, parsed and checked.
pub(crate) struct Call<'py> {
    pub(crate) tool: Bound<'py, PyString>,
    pub(crate) kind: ToolKind,
    /// The params as given (`None` for `None`).
    pub(crate) params: Option<Bound<'py, PyAny>>,
    /// Whether the params are a mapping: only then do the rules read fields of them.
    pub(crate) mapping: bool,
    pub(crate) key: CallKey,
    pub(crate) call_id: Option<u64>,
}

impl<'py> Call<'py> {
    /// The params as the result and known-poll rules read them: a mapping, or none (params
    /// that are a list, a str or a number have no `action`, as in OpenClaw).
    pub(crate) fn rule_params(&self) -> Option<PyValue<'py>> {
        self.params.as_ref().filter(|_| self.mapping).map(PyValue::of)
    }
}

pub(crate) static MAPPING_ABC: PyOnceLock<Py<pyo3::types::PyType>> = PyOnceLock::new();

pub(crate) fn optional_str_digest(value: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<u64>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => match v.cast::<PyString>() {
            Ok(s) => Ok(Some(fingerprint_str(s))),
            Err(_) => Err(PyTypeError::new_err(format!(
                "{name} must be a str or None, got {}",
                type_name(v)
            ))),
        },
    }
}

/// Digests of the identity parts of the last call parsed, reused when the next hook is handed
/// the same objects (the usual case: a call's `after_tool_call` after its `before_tool_call`,
/// and one run id for many calls). Only what cannot have changed is reused: a tool name or run
/// id that is the very `str` remembered (held by strong reference; a `str` is immutable), and
/// params through [`DictSnapshot`].
#[derive(Default)]
pub(crate) struct CallMemo {
    tool: Option<RememberedStr<ToolKind>>,
    run: Option<RememberedStr<()>>,
    params: Option<DictSnapshot>,
    /// The last result's `details` mapping (OpenClaw's results carry one): a tool builds it
    /// from the same literals call after call.
    details: Option<DictSnapshot>,
}

impl CallMemo {
    pub(crate) fn heap_bytes(&self) -> usize {
        self.params.as_ref().map_or(0, DictSnapshot::heap_bytes)
            + self.details.as_ref().map_or(0, DictSnapshot::heap_bytes)
    }
}

/// The longest str a remembered `details` mapping holds: its objects stay alive until the next
/// result, so a long output is not kept for that.
const DETAILS_LONGEST_STR: usize = 256;

/// An exact `str`, its digest and what else was derived from it.
struct RememberedStr<T> {
    value: Py<PyString>,
    digest: u64,
    derived: T,
}

impl<T: Copy> RememberedStr<T> {
    /// Only an exact `str` is remembered: a subclass could carry other state.
    fn new(value: &Bound<'_, PyAny>, digest: u64, derived: T) -> Option<Self> {
        let value = value.cast_exact::<PyString>().ok()?;
        Some(RememberedStr {
            value: value.clone().unbind(),
            digest,
            derived,
        })
    }

    /// The digest and derived value if `value` is the very object remembered.
    fn recall(&self, value: &Bound<'_, PyAny>) -> Option<(u64, T)> {
        (self.value.as_ptr() == value.as_ptr()).then_some((self.digest, self.derived))
    }
}

pub(crate) fn parse_call<'py>(
    rules: Option<&Rules>,
    memo: Option<&Mutex<CallMemo>>,
    tool: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    run_id: Option<&Bound<'py, PyAny>>,
    tool_call_id: Option<&Bound<'py, PyAny>>,
) -> PyResult<Call<'py>> {
    let py = tool.py();
    let mut tool = tool
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("tool must be a str, got {}", type_name(tool))))?
        .clone();
    if let Some(rules) = rules.filter(|r| !r.plain.aliases.is_empty()) {
        if let Some(target) = tool.to_str().ok().and_then(|name| rules.plain.alias(name)) {
            tool = PyString::new(py, target);
        }
    }
    // Params are any JSON-like value, as OpenClaw hashes whatever the model sent (arguments
    // that failed to parse as JSON arrive as a str); a dict is by far the most common.
    let (params, mapping) = if params.is_none() {
        (None, false)
    } else if params.is_instance_of::<PyDict>() {
        (Some(params.clone()), true)
    } else if params.is_instance_of::<PyString>()
        || params.is_instance_of::<PyList>()
        || params.is_instance_of::<PyTuple>()
        || params.is_instance_of::<PyInt>()
        || params.is_instance_of::<PyFloat>()
    {
        // (bool is an int.)
        (Some(params.clone()), false)
    } else if params.is_instance(MAPPING_ABC.import(py, "collections.abc", "Mapping")?)? {
        (Some(params.clone()), true)
    } else {
        return Err(PyTypeError::new_err(format!(
            "params must be a JSON-like value (a mapping, list, tuple, str, int, float or bool) or None, got {}",
            type_name(params)
        )));
    };
    // The memo is only read and written here, never while Python code can run.
    let (known_tool, known_run, known_params, previous_params) = match memo {
        Some(memo) => {
            let mut m = lock(py, memo);
            let known_params = params
                .as_ref()
                .and_then(|p| m.params.as_ref().filter(|s| s.matches(p)))
                .map(DictSnapshot::digest);
            (
                m.tool.as_ref().and_then(|t| t.recall(tool.as_any())),
                run_id.and_then(|r| m.run.as_ref()?.recall(r)),
                known_params,
                // Fresh params refresh the snapshot of the last ones in place: they usually
                // share its keys (and constant values).
                (params.is_some() && known_params.is_none())
                    .then(|| m.params.take())
                    .flatten(),
            )
        }
        None => (None, None, None, None),
    };
    let (tool_digest, kind) = match known_tool {
        Some(known) => known,
        // One UTF-8 view of the name serves both its digest and the name rules; a name with
        // lone surrogates is no built-in tool's.
        None => match tool.to_str() {
            Ok(name) => (fingerprint_utf8(py, name), ToolKind::of(name)),
            Err(_) => (fingerprint_str(&tool), ToolKind::Other),
        },
    };
    // `params=None` is the empty mapping.
    let mut params_memo = previous_params;
    let params_digest = match (&params, known_params) {
        (_, Some(digest)) => digest,
        (Some(params), None) => {
            let snapshot = params_memo.get_or_insert_with(DictSnapshot::empty);
            if snapshot.refresh(params, usize::MAX) {
                snapshot.digest()
            } else {
                // Nothing to remember: the memo is not written (no second lock).
                params_memo = None;
                fingerprint(params)
            }
        }
        (None, None) => tool_result::hash_fields(&[]),
    };
    let known_poll = tool_result::is_known_poll(
        kind,
        // Only extra known polls need the name itself.
        rules
            .filter(|r| !r.plain.known_polls.is_empty())
            .and_then(|_| tool.to_str().ok()),
        params.as_ref().filter(|_| mapping).map(PyValue::of).as_ref(),
        rules.map(|r| &r.plain),
    );
    let run = match known_run {
        Some((digest, ())) => Some(digest),
        None => optional_str_digest(run_id, "run_id")?,
    };
    let call_id = optional_str_digest(tool_call_id, "tool_call_id")?;
    if let Some(memo) = memo {
        let tool = known_tool
            .is_none()
            .then(|| RememberedStr::new(tool.as_any(), tool_digest, kind));
        let run = match (known_run, run_id, run) {
            (None, Some(run_id), Some(digest)) => Some(RememberedStr::new(run_id, digest, ())),
            _ => None,
        };
        // The snapshot goes back, of these params or of `{}` (another thread may have
        // remembered its params meanwhile: either is right).
        let params = params_memo;
        if tool.is_some() || run.is_some() || params.is_some() {
            let mut m = lock(py, memo);
            // The replaced entries are dropped after the lock is released.
            let _replaced = (
                tool.map(|t| std::mem::replace(&mut m.tool, t)),
                run.map(|r| std::mem::replace(&mut m.run, r)),
                params.map(|s| m.params.replace(s)),
            );
            drop(m);
        }
    }
    Ok(Call {
        kind,
        key: CallKey {
            tool: tool_digest,
            args: hash_action(tool_digest, params_digest),
            run,
            known_poll,
            limits: None,
        },
        call_id,
        tool,
        params,
        mapping,
    })
}

/// The outcome of a finished call as digests (`None`: nothing to record), plus the unknown
/// tool name its error text names.
pub(crate) struct Normalised {
    pub(crate) outcome: Option<Outcome>,
    pub(crate) unknown_name: Option<String>,
    pub(crate) is_error: bool,
}

/// An error's text: the str itself, or `str()` of an exception (its type name when that
/// raises).
pub(crate) fn error_text<'py>(error: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    if let Ok(text) = error.cast::<PyString>() {
        return Ok(text.clone());
    }
    if error.is_instance_of::<PyBaseException>() {
        return Ok(error
            .str()
            .unwrap_or_else(|_| PyString::new(error.py(), &type_name(error))));
    }
    Err(PyTypeError::new_err(format!(
        "error must be an exception, a str or None, got {}",
        type_name(error)
    )))
}

/// The outcome of `call` given its result or error; `plain_by_value` hashes results that are
/// not OpenClaw-shaped by value (`LoopConfig::hash_plain_results`).
pub(crate) fn normalise(
    rules: Option<&Rules>,
    memo: Option<&Mutex<CallMemo>>,
    call: &Call<'_>,
    result: Option<&Bound<'_, PyAny>>,
    error: Option<&Bound<'_, PyAny>>,
    plain_by_value: bool,
) -> PyResult<Normalised> {
    if let Some(error) = error.filter(|e| !e.is_none()) {
        let text = error_text(error)?;
        let (result, name) = tool_result::error_outcome(&text_bytes(&text), &text.to_string_lossy());
        return Ok(Normalised {
            outcome: Some(Outcome {
                result,
                unknown: name.as_deref().map(|n| fp::hash_str(n.as_bytes())),
            }),
            unknown_name: name,
            is_error: true,
        });
    }
    let Some(result) = result.filter(|r| !r.is_none()) else {
        return Ok(Normalised {
            outcome: None,
            unknown_name: None,
            is_error: false,
        });
    };
    let mut extensions = PyExtensions { rules, memo, call };
    let params = call.rule_params();
    let digest = tool_result::result_digest(
        call.kind,
        params.as_ref(),
        &PyValue::of(result),
        rules.map(|r| &r.plain),
        plain_by_value,
        &mut extensions,
    )?;
    Ok(Normalised {
        outcome: digest.map(|result| Outcome { result, unknown: None }),
        unknown_name: None,
        is_error: false,
    })
}

/// The Python extension points of one call: a normaliser for its tool, the send-like
/// predicate.
struct PyExtensions<'a, 'py> {
    rules: Option<&'a Rules>,
    memo: Option<&'a Mutex<CallMemo>>,
    call: &'a Call<'py>,
}

impl<'py> Extensions<PyValue<'py>, PyErr> for PyExtensions<'_, 'py> {
    fn normalised(&mut self, result: &PyValue<'py>) -> PyResult<Option<u64>> {
        let Some(rules) = self.rules.filter(|r| !r.normalisers.is_empty()) else {
            return Ok(None);
        };
        let tool = &self.call.tool;
        let Some(normaliser) = tool.to_str().ok().and_then(|name| rules.normalisers.get(name)) else {
            return Ok(None);
        };
        let value = normaliser
            .bind(tool.py())
            .call1((&result.0, params_or_none(self.call)))?;
        Ok(Some(fingerprint(&value)))
    }

    fn send_like(&mut self) -> PyResult<bool> {
        match self.rules.and_then(|r| r.send_like.as_ref()) {
            Some(predicate) => predicate
                .bind(self.call.tool.py())
                .call1((&self.call.tool, params_or_none(self.call)))?
                .is_truthy(),
            None => Ok(false),
        }
    }

    fn details_digest(&mut self, details: &PyValue<'py>) -> u64 {
        let Some(memo) = self.memo else {
            return details.digest();
        };
        let py = details.0.py();
        // Taken out of the memo: refreshing it runs no Python code, but the fallback's
        // fingerprint may, and the memo is never held while it can.
        let mut snapshot = lock(py, memo).details.take().unwrap_or_else(DictSnapshot::empty);
        if snapshot.refresh(&details.0, DETAILS_LONGEST_STR) {
            let digest = snapshot.digest();
            lock(py, memo).details = Some(snapshot);
            digest
        } else {
            details.digest()
        }
    }
}

pub(crate) fn params_or_none<'py>(call: &Call<'py>) -> Bound<'py, PyAny> {
    call.params
        .clone()
        .unwrap_or_else(|| call.tool.py().None().into_bound(call.tool.py()))
}

/// A Python object as the engine's rules read it.
pub(crate) struct PyValue<'py>(Bound<'py, PyAny>);

static FIELD_NAMES: [PyOnceLock<Py<PyString>>; Field::ALL.len()] = [const { PyOnceLock::new() }; Field::ALL.len()];

impl<'py> PyValue<'py> {
    fn of(value: &Bound<'py, PyAny>) -> Self {
        PyValue(value.clone())
    }
}

impl<'py> ResultValue for PyValue<'py> {
    fn field(&self, field: Field) -> Option<Self> {
        let py = self.0.py();
        // Interned names: a dict lookup then needs no new string and no hashing.
        let name = FIELD_NAMES
            .get(field as usize)?
            .get_or_init(py, || PyString::intern(py, field.name()).unbind())
            .bind(py);
        let value = match self.0.cast::<PyDict>() {
            Ok(dict) => dict.get_item(name).ok().flatten(),
            // A params mapping that is not a dict; a failing lookup counts as absent.
            Err(_) => self.0.get_item(name).ok(),
        };
        value.map(PyValue)
    }

    fn is_mapping(&self) -> bool {
        self.0.is_instance_of::<PyDict>()
    }

    fn is_str(&self) -> bool {
        self.0.is_instance_of::<PyString>()
    }

    fn as_str(&self) -> Option<&str> {
        self.0.cast::<PyString>().ok()?.to_str().ok()
    }

    fn text_bytes(&self) -> Option<Cow<'_, [u8]>> {
        self.0.cast::<PyString>().ok().map(text_bytes)
    }

    fn for_each_item(&self, each: &mut dyn FnMut(Self)) {
        if let Ok(list) = self.0.cast::<PyList>() {
            list.iter().for_each(|item| each(PyValue(item)));
        } else if let Ok(tuple) = self.0.cast::<PyTuple>() {
            tuple.iter().for_each(|item| each(PyValue(item)));
        }
    }

    fn digest(&self) -> u64 {
        fingerprint(&self.0)
    }

    fn digest_skipping(&self, skip: &dyn Fn(&str) -> bool) -> u64 {
        fingerprint_skipping(&self.0, Some(&str_keys(skip)))
    }

    fn digest_masked(&self, skip: &dyn Fn(&str) -> bool) -> u64 {
        fingerprint_masked(&self.0, &str_keys(skip))
    }
}

/// A filter of dict keys: the str keys `skip` accepts (a key of any other type is kept).
fn str_keys(skip: &dyn Fn(&str) -> bool) -> impl Fn(&Bound<'_, PyAny>) -> bool + '_ {
    move |key| {
        key.cast::<PyString>()
            .ok()
            .and_then(|key| key.to_str().ok())
            .is_some_and(skip)
    }
}
