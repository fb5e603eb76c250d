//! Call identity and result normalisation for the tool-loop detector: the Python-facing
//! half of OpenClaw's result hashing (exec, process poll/log, send-like tools with volatile
//! ids stripped, the generic `{details, text}` rule, error texts), reading the Python dicts
//! in place so the hot path builds no intermediate objects.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use doomloop_engine::fingerprint::{self as fp, hash_action, hash_none};
use doomloop_engine::tool_loop::{CallKey, Outcome};
use doomloop_engine::unknown_tool::{trim_js_space, trim_js_space_bytes, unknown_tool_name};
use pyo3::exceptions::{PyBaseException, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::canonical::{
    fingerprint, fingerprint_skipping, fingerprint_str, fingerprint_utf8, surrogatepass, DictSnapshot,
};
use crate::chant::lock;

/// Ids that change on every send and must not make two identical sends look different.
pub(crate) const VOLATILE_KEYS: [&str; 18] = [
    "messageId",
    "message_id",
    "messageIds",
    "platformMessageId",
    "platformMessageIds",
    "fileId",
    "file_id",
    "fileKey",
    "pollId",
    "poll_id",
    "receipt",
    "runId",
    "idempotencyKey",
    "ts",
    "timestamp",
    "sentAt",
    "deliveredAt",
    "createdAt",
];

pub(crate) const SEND_ACTIONS: [&str; 9] = [
    "send",
    "broadcast",
    "reply",
    "thread-reply",
    "sendWithEffect",
    "sendAttachment",
    "upload-file",
    "sticker",
    "poll",
];

/// Optional extension points; `None` on the engine when none is used (keeps sessions small).
#[derive(Default)]
pub(crate) struct Rules {
    pub(crate) aliases: HashMap<String, Py<PyString>>,
    pub(crate) known_polls: HashSet<String>,
    pub(crate) volatile_keys: HashSet<String>,
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
                rules.aliases.insert(plain_str(k, "tool_aliases")?, v.clone().unbind());
            }
        }
        rules.known_polls = str_set(known_polls, "known_poll_tools")?;
        rules.volatile_keys = str_set(volatile_keys, "volatile_keys")?;
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
        let unused = rules.aliases.is_empty()
            && rules.known_polls.is_empty()
            && rules.volatile_keys.is_empty()
            && rules.normalisers.is_empty()
            && rules.send_like.is_none();
        Ok((!unused).then(|| Box::new(rules)))
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        let strings = |set: &HashSet<String>| set.iter().map(|s| s.capacity() + 24).sum::<usize>();
        std::mem::size_of::<Rules>()
            + strings(&self.known_polls)
            + strings(&self.volatile_keys)
            + self.aliases.keys().map(|k| k.capacity() + 32).sum::<usize>()
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

/// The tool names the built-in rules single out, recognised once per call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolKind {
    Exec,
    Process,
    CommandStatus,
    SessionsSend,
    Message,
    Other,
}

impl ToolKind {
    fn of(name: &str) -> ToolKind {
        match name {
            "exec" => ToolKind::Exec,
            "process" => ToolKind::Process,
            "command_status" => ToolKind::CommandStatus,
            "sessions_send" => ToolKind::SessionsSend,
            "message" => ToolKind::Message,
            _ => ToolKind::Other,
        }
    }
}

/// A call's identity, parsed and checked.
pub(crate) struct Call<'py> {
    pub(crate) tool: Bound<'py, PyString>,
    pub(crate) kind: ToolKind,
    pub(crate) params: Option<Bound<'py, PyAny>>,
    pub(crate) key: CallKey,
    pub(crate) call_id: Option<u64>,
}

pub(crate) static MAPPING_ABC: PyOnceLock<Py<pyo3::types::PyType>> = PyOnceLock::new();

pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "object".to_string(), |n| n.to_string())
}

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
}

impl CallMemo {
    pub(crate) fn heap_bytes(&self) -> usize {
        self.params.as_ref().map_or(0, DictSnapshot::heap_bytes)
    }
}

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
    if let Some(rules) = rules.filter(|r| !r.aliases.is_empty()) {
        if let Some(target) = tool.to_str().ok().and_then(|name| rules.aliases.get(name)) {
            tool = target.bind(py).clone();
        }
    }
    let params = if params.is_none() {
        None
    } else if params.is_instance_of::<PyDict>()
        || params.is_instance(MAPPING_ABC.import(py, "collections.abc", "Mapping")?)?
    {
        Some(params.clone())
    } else {
        return Err(PyTypeError::new_err(format!(
            "params must be a mapping (dict) or None, got {}",
            type_name(params)
        )));
    };
    // The memo is only read and written here, never while Python code can run.
    let (known_tool, known_run, known_params) = match memo {
        Some(memo) => {
            let m = lock(py, memo);
            (
                m.tool.as_ref().and_then(|t| t.recall(tool.as_any())),
                run_id.and_then(|r| m.run.as_ref()?.recall(r)),
                params
                    .as_ref()
                    .and_then(|p| m.params.as_ref().filter(|s| s.matches(p)))
                    .map(DictSnapshot::digest),
            )
        }
        None => (None, None, None),
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
    let (params_digest, snapshot) = match (&params, known_params) {
        (_, Some(digest)) => (digest, None),
        (Some(params), None) => match DictSnapshot::take(params) {
            Some(snapshot) => (snapshot.digest(), Some(snapshot)),
            None => (fingerprint(params), None),
        },
        (None, None) => (hash_fields(&[]), None),
    };
    let known_poll = match kind {
        ToolKind::CommandStatus => true,
        ToolKind::Process => matches!(
            as_str(&str_field(params.as_ref(), intern!(py, "action"))),
            Some("poll" | "log")
        ),
        _ => match rules {
            Some(rules) if !rules.known_polls.is_empty() => {
                tool.to_str().is_ok_and(|name| rules.known_polls.contains(name))
            }
            _ => false,
        },
    };
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
        if tool.is_some() || run.is_some() || snapshot.is_some() {
            let mut m = lock(py, memo);
            // The replaced entries are dropped after the lock is released.
            let _replaced = (
                tool.map(|t| std::mem::replace(&mut m.tool, t)),
                run.map(|r| std::mem::replace(&mut m.run, r)),
                snapshot.map(|s| m.params.replace(s)),
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
        },
        call_id,
        tool,
        params,
    })
}

/// A small map's digest from (key digest, value digest) entries (callers pass at most 8).
pub(crate) fn hash_fields(entries: &[(u64, u64)]) -> u64 {
    fp::hash_map_entries(entries).unwrap_or_else(hash_none)
}

/// `mapping[key]` if present (a failing lookup counts as absent). Keys are interned strings:
/// a dict lookup then needs no new string and no hashing.
pub(crate) fn field<'py>(mapping: Option<&Bound<'py, PyAny>>, key: &Bound<'py, PyString>) -> Option<Bound<'py, PyAny>> {
    let mapping = mapping?;
    if let Ok(dict) = mapping.cast::<PyDict>() {
        return dict.get_item(key).ok().flatten();
    }
    mapping.get_item(key).ok()
}

/// `mapping[key]` when it is a str.
pub(crate) fn str_field<'py>(
    mapping: Option<&Bound<'py, PyAny>>,
    key: &Bound<'py, PyString>,
) -> Option<Bound<'py, PyString>> {
    field(mapping, key).and_then(|v| v.cast_into::<PyString>().ok())
}

pub(crate) fn as_str<'a>(value: &'a Option<Bound<'_, PyString>>) -> Option<&'a str> {
    value.as_ref().and_then(|s| s.to_str().ok())
}

/// Digest of the `text` of every content entry with string `type` and `text`, joined by
/// newlines and trimmed (JavaScript whitespace). The usual single part is hashed in place;
/// text with lone surrogates hashes by its `surrogatepass` encoding, as the fingerprint does.
pub(crate) fn content_text_digest<'py>(result: &Bound<'py, PyDict>) -> u64 {
    let py = result.py();
    let Some(content) = result.get_item(intern!(py, "content")).ok().flatten() else {
        return const { fp::hash_str_const(b"") };
    };
    let mut first: Option<Bound<'py, PyString>> = None;
    let mut joined: Option<Vec<u8>> = None;
    let mut add = |entry: Bound<'py, PyAny>| {
        let Ok(entry) = entry.cast::<PyDict>() else {
            return;
        };
        let typed = entry
            .get_item(intern!(py, "type"))
            .ok()
            .flatten()
            .is_some_and(|kind| kind.is_instance_of::<PyString>());
        let Some(part) = entry.get_item(intern!(py, "text")).ok().flatten() else {
            return;
        };
        let Ok(part) = part.cast_into::<PyString>() else {
            return;
        };
        if !typed {
            return;
        }
        match (&first, &mut joined) {
            (None, _) => first = Some(part),
            (Some(head), None) => {
                let mut text = text_bytes(head).into_owned();
                text.push(b'\n');
                text.extend_from_slice(&text_bytes(&part));
                joined = Some(text);
            }
            (Some(_), Some(text)) => {
                text.push(b'\n');
                text.extend_from_slice(&text_bytes(&part));
            }
        }
    };
    if let Ok(list) = content.cast::<PyList>() {
        list.iter().for_each(&mut add);
    } else if let Ok(tuple) = content.cast::<PyTuple>() {
        tuple.iter().for_each(&mut add);
    }
    match (joined, first) {
        (Some(text), _) => fp::hash_str(trim_js_space_bytes(&text)),
        (None, Some(part)) => match part.to_str() {
            // The usual single part: no copy, no second UTF-8 check.
            Ok(text) => fp::hash_str(trim_js_space(text).as_bytes()),
            Err(_) => fp::hash_str(trim_js_space_bytes(&text_bytes(&part))),
        },
        (None, None) => const { fp::hash_str_const(b"") },
    }
}

/// A str's UTF-8 bytes, borrowed from the str; text with lone surrogates as its
/// `surrogatepass` encoding (a copy), so that no two texts read alike.
pub(crate) fn text_bytes<'a>(text: &'a Bound<'_, PyString>) -> Cow<'a, [u8]> {
    match text.to_str() {
        Ok(utf8) => Cow::Borrowed(utf8.as_bytes()),
        Err(_) => Cow::Owned(surrogatepass(text).map_or_else(|_| Vec::new(), |b| b.as_bytes().to_vec())),
    }
}

/// A field name the result rules read: the interned name (for the lookup) and its digest,
/// computed at compile time (for the hashed entry).
macro_rules! key {
    ($py:expr, $name:literal) => {
        (intern!($py, $name), const { fp::hash_str_const($name.as_bytes()) })
    };
}

/// The digest of a field name the rules add themselves, computed at compile time.
macro_rules! key_digest {
    ($name:literal) => {
        const { fp::hash_str_const($name.as_bytes()) }
    };
}

/// (key digest, value digest) of `details[key]`; a missing key is null, as OpenClaw's `?? null`.
pub(crate) fn field_entry(
    details: Option<&Bound<'_, PyAny>>,
    (key, digest): (&Bound<'_, PyString>, u64),
) -> (u64, u64) {
    let value = field(details, key).map_or_else(hash_none, |v| fingerprint(&v));
    (digest, value)
}

pub(crate) fn str_eq(value: Option<&Bound<'_, PyAny>>, expected: &str) -> bool {
    value
        .and_then(|v| {
            v.cast::<PyString>()
                .ok()
                .and_then(|s| s.to_str().ok().map(|s| s == expected))
        })
        .unwrap_or(false)
}

pub(crate) fn is_volatile(rules: Option<&Rules>, key: &Bound<'_, PyAny>) -> bool {
    let Ok(key) = key.cast::<PyString>() else {
        return false;
    };
    let Ok(key) = key.to_str() else {
        return false;
    };
    VOLATILE_KEYS.contains(&key) || rules.is_some_and(|r| r.volatile_keys.contains(key))
}

/// The outcome of a finished call as digests (`None`: nothing to record), plus the unknown
/// tool name its error text names.
pub(crate) struct Normalised {
    pub(crate) outcome: Option<Outcome>,
    pub(crate) unknown_name: Option<Py<PyString>>,
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

pub(crate) fn normalise(
    rules: Option<&Rules>,
    call: &Call<'_>,
    result: Option<&Bound<'_, PyAny>>,
    error: Option<&Bound<'_, PyAny>>,
) -> PyResult<Normalised> {
    let py = call.tool.py();
    if let Some(error) = error.filter(|e| !e.is_none()) {
        let text = error_text(error)?;
        // The name is read from the text as displayed (a lone surrogate as U+FFFD); the
        // error hashes by its exact text.
        let name = unknown_tool_name(&text.to_string_lossy());
        let unknown = name.as_deref().map(|n| fp::hash_str(n.as_bytes()));
        return Ok(Normalised {
            outcome: Some(Outcome {
                result: fp::hash_error(&text_bytes(&text)),
                unknown,
            }),
            unknown_name: name.map(|n| PyString::new(py, &n).unbind()),
            is_error: true,
        });
    }
    let hashed = |result: Option<u64>| -> PyResult<Normalised> {
        Ok(Normalised {
            outcome: result.map(|result| Outcome { result, unknown: None }),
            unknown_name: None,
            is_error: false,
        })
    };
    let Some(result) = result.filter(|r| !r.is_none()) else {
        return hashed(None);
    };
    let Ok(dict) = result.cast::<PyDict>() else {
        return match custom_normaliser(rules, call)? {
            Some(normaliser) => hashed(Some(fingerprint(&normaliser.call1((result, params_or_none(call)))?))),
            None => hashed(Some(fingerprint(result))),
        };
    };
    let details_any = dict.get_item(intern!(py, "details")).ok().flatten();
    let details = details_any.as_ref().filter(|d| d.is_instance_of::<PyDict>());
    let status = field(details, intern!(py, "status"));
    if str_eq(status.as_ref(), "blocked") && str_eq(field(details, intern!(py, "deniedReason")).as_ref(), "tool-loop") {
        return hashed(None);
    }
    if let Some(normaliser) = custom_normaliser(rules, call)? {
        return hashed(Some(fingerprint(&normaliser.call1((result, params_or_none(call)))?)));
    }
    let f = |key| field_entry(details, key);
    // `status` was read above: its entry needs no second lookup.
    let status_entry = || {
        (
            key_digest!("status"),
            status.as_ref().map_or_else(hash_none, fingerprint),
        )
    };
    if call.kind == ToolKind::Exec {
        match status.as_ref().and_then(|s| s.cast::<PyString>().ok()?.to_str().ok()) {
            Some("running") => return hashed(Some(hash_fields(&[status_entry(), f(key!(py, "tail"))]))),
            Some("completed" | "failed") => {
                let aggregated = field(details, intern!(py, "aggregated"));
                let output = match aggregated.as_ref().and_then(|a| a.cast::<PyString>().ok()) {
                    Some(agg) if !text_bytes(agg).is_empty() => fingerprint_str(agg),
                    _ => content_text_digest(dict),
                };
                return hashed(Some(hash_fields(&[
                    status_entry(),
                    f(key!(py, "exitCode")),
                    f(key!(py, "timedOut")),
                    (key_digest!("output"), output),
                ])));
            }
            Some("approval-pending" | "approval-unavailable") => {
                return hashed(Some(hash_fields(&[
                    status_entry(),
                    f(key!(py, "reason")),
                    f(key!(py, "host")),
                    f(key!(py, "command")),
                    f(key!(py, "warningText")),
                ])));
            }
            _ => {}
        }
    }
    // Only `process` and `message` results depend on the action.
    let action = || str_field(call.params.as_ref(), intern!(py, "action"));
    if call.kind == ToolKind::Process {
        let text = || (key_digest!("text"), content_text_digest(dict));
        let action_field = |a: &str| (key_digest!("action"), fp::hash_str(a.as_bytes()));
        match as_str(&action()) {
            Some("poll") => {
                return hashed(Some(hash_fields(&[
                    action_field("poll"),
                    status_entry(),
                    f(key!(py, "exitCode")),
                    f(key!(py, "exitSignal")),
                    f(key!(py, "aggregated")),
                    text(),
                ])));
            }
            Some("log") => {
                return hashed(Some(hash_fields(&[
                    action_field("log"),
                    status_entry(),
                    f(key!(py, "totalLines")),
                    f(key!(py, "totalChars")),
                    f(key!(py, "truncated")),
                    f(key!(py, "exitCode")),
                    f(key!(py, "exitSignal")),
                    text(),
                ])));
            }
            _ => {}
        }
    }
    let send_like = match call.kind {
        ToolKind::SessionsSend => true,
        ToolKind::Message => as_str(&action()).is_some_and(|a| SEND_ACTIONS.contains(&a)),
        _ => match rules.and_then(|r| r.send_like.as_ref()) {
            Some(predicate) => predicate
                .bind(py)
                .call1((&call.tool, params_or_none(call)))?
                .is_truthy()?,
            None => false,
        },
    };
    let details_digest = |skip: bool| match details {
        None => hash_fields(&[]),
        Some(d) if skip => fingerprint_skipping(d, Some(&|k: &Bound<'_, PyAny>| is_volatile(rules, k))),
        Some(d) => fingerprint(d),
    };
    if send_like {
        return hashed(Some(details_digest(true)));
    }
    hashed(Some(hash_fields(&[
        (key_digest!("details"), details_digest(false)),
        (key_digest!("text"), content_text_digest(dict)),
    ])))
}

pub(crate) fn params_or_none<'py>(call: &Call<'py>) -> Bound<'py, PyAny> {
    call.params
        .clone()
        .unwrap_or_else(|| call.tool.py().None().into_bound(call.tool.py()))
}

pub(crate) fn custom_normaliser<'py>(rules: Option<&Rules>, call: &Call<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(rules) = rules.filter(|r| !r.normalisers.is_empty()) else {
        return Ok(None);
    };
    Ok(call
        .tool
        .to_str()
        .ok()
        .and_then(|name| rules.normalisers.get(name))
        .map(|n| n.bind(call.tool.py()).clone()))
}
