//! The scan's reader of doomloop's own event format (`doomloop.traces.events`) hands each
//! line here first: a `tool_call` line the engine reads without a problem
//! (`doomloop_engine::trace_event`) becomes the fields of its `Step` directly, without a Python
//! object for every JSON value the reader would only check and drop. Any other line is left to
//! the Python reader.

use std::fmt;
use std::sync::{Mutex, MutexGuard};

use doomloop_engine::trace_event::{self, Text, Time, ToolCall};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyList, PyString, PyTuple};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use xxhash_rust::xxh3::xxh3_64;

/// How many object keys [`Keys`] remembers, and the longest it remembers.
const KEY_SLOTS: usize = 1024;
const KEY_MAX_BYTES: usize = 64;

/// The Python strings made for object keys, by their text: agents build each call's arguments
/// from one literal, and a detector's arguments snapshot recognises a key that is the very
/// string it holds, so a key read again is the string made before (as orjson's key cache does).
/// Fixed size: a slot keeps the last key that hashed to it.
struct Keys {
    slots: Vec<Option<(Box<str>, Py<PyString>)>>,
}

impl Keys {
    fn get<'py>(&mut self, py: Python<'py>, key: &str) -> Bound<'py, PyString> {
        if key.len() > KEY_MAX_BYTES {
            return PyString::new(py, key);
        }
        // KEY_SLOTS is a power of two: the low bits of the digest pick the slot.
        let index = (xxh3_64(key.as_bytes()) as usize) & (KEY_SLOTS - 1);
        let Some(slot) = self.slots.get_mut(index) else {
            return PyString::new(py, key);
        };
        if let Some((text, string)) = slot {
            if **text == *key {
                return string.bind(py).clone();
            }
        }
        let string = PyString::new(py, key);
        *slot = Some((key.into(), string.clone().unbind()));
        string
    }
}

/// Reads the `tool_call` lines of doomloop's event format (see the module's documentation).
#[pyclass(module = "doomloop._core", frozen)]
pub struct EventDecoder {
    keys: Mutex<Keys>,
    /// A `Step`'s fields with the values most calls leave as they are: each call's fields
    /// are a copy of it (a dict built key by key grows its table twice on the way to 15).
    fields: Py<PyDict>,
}

#[pymethods]
impl EventDecoder {
    #[new]
    fn new(py: Python<'_>) -> PyResult<Self> {
        // Interned names, as the attribute names of Python code are: a lookup by a name that
        // is not the very key object compares the strings.
        let fields = PyDict::new(py);
        for name in STEP_FIELDS {
            fields.set_item(PyString::intern(py, name), py.None())?;
        }
        fields.set_item(intern!(py, "is_error"), false)?;
        fields.set_item(intern!(py, "kind"), intern!(py, "tool"))?;
        Ok(EventDecoder {
            keys: Mutex::new(Keys {
                slots: (0..KEY_SLOTS).map(|_| None).collect(),
            }),
            fields: fields.unbind(),
        })
    }

    /// `(session, run, fields, pending, times)` of a `tool_call` line the event reader's rules
    /// read without a problem: the session key, the run id (None unless a string), the fields
    /// of its `Step` (a dict in the order of `Step`'s fields, `line` among them), whether the
    /// call awaits a `tool_result` (no outcome, and an id), and None, or, when a time is text
    /// (which the Python reader converts), `(ts, ended, has_outcome)` as the event gives them,
    /// `started` and `ended` left None in `fields`. None for any other line.
    #[pyo3(signature = (raw, line, /))]
    fn tool_call<'py>(
        &self,
        py: Python<'py>,
        raw: &Bound<'py, PyBytes>,
        line: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Some(call) = trace_event::read(raw.as_bytes()) else {
            return Ok(None);
        };
        // A decoder in use on this thread (a finalizer run by an allocation below that reads
        // a trace) or on another one: its keys are made anew rather than waited for.
        let mut keys = self.keys.try_lock().ok();
        let arguments = match call.arguments {
            None => py.None().into_bound(py),
            Some(text) => {
                let mut failed = None;
                let seed = PyValue {
                    py,
                    keys: &mut keys,
                    failed: &mut failed,
                };
                let mut parser = serde_json::Deserializer::from_str(text.get());
                match seed.deserialize(&mut parser) {
                    Ok(value) => value,
                    Err(_) => match failed {
                        Some(error) => return Err(error),
                        // Nesting past the parser's limit: the Python decoder reads it.
                        None => return Ok(None),
                    },
                }
            }
        };
        let fields = self.fields.bind(py).copy()?;
        step_fields(py, &fields, &call, arguments, line)?;
        let pending = call.outcome.is_none() && call.call_id.is_some();
        let session = call.session.as_deref().into_pyobject(py)?.into_any();
        let run = call.run.as_deref().into_pyobject(py)?.into_any();
        let pending = pending.into_pyobject(py)?.to_owned().into_any();
        let times = match call.seconds() {
            Some((started, ended)) => {
                if let Some(started) = started {
                    fields.set_item(intern!(py, "started"), started)?;
                }
                if let Some(ended) = ended {
                    fields.set_item(intern!(py, "ended"), ended)?;
                }
                py.None().into_bound(py)
            }
            None => {
                let ended = call.outcome.as_ref().and_then(|outcome| outcome.ended.as_ref());
                let has_outcome = call.outcome.is_some().into_pyobject(py)?.to_owned().into_any();
                PyTuple::new(py, [time(py, call.started.as_ref())?, time(py, ended)?, has_outcome])?.into_any()
            }
        };
        Ok(Some(PyTuple::new(
            py,
            [session, run, fields.into_any(), pending, times],
        )?))
    }
}

/// The fields of `doomloop.traces.Step`, in its order.
const STEP_FIELDS: [&str; 15] = [
    "tool",
    "arguments",
    "call_id",
    "thought",
    "result_text",
    "returncode",
    "is_error",
    "kind",
    "text",
    "error",
    "input_tokens",
    "output_tokens",
    "started",
    "ended",
    "line",
];

/// Set in `fields` (a copy of the template) what `call` has.
fn step_fields<'py>(
    py: Python<'py>,
    fields: &Bound<'py, PyDict>,
    call: &ToolCall<'_>,
    arguments: Bound<'py, PyAny>,
    line: &Bound<'py, PyAny>,
) -> PyResult<()> {
    fields.set_item(intern!(py, "tool"), &*call.tool)?;
    if !arguments.is_none() {
        fields.set_item(intern!(py, "arguments"), arguments)?;
    }
    if let Some(call_id) = call.call_id.as_deref() {
        fields.set_item(intern!(py, "call_id"), call_id)?;
    }
    if let Some(thought) = call.thought.as_deref() {
        fields.set_item(intern!(py, "thought"), thought)?;
    }
    if let Some(outcome) = call.outcome.as_ref() {
        if let Some(result) = outcome.result.as_deref() {
            fields.set_item(intern!(py, "result_text"), result)?;
        }
        if let Some(returncode) = outcome.returncode {
            fields.set_item(intern!(py, "returncode"), returncode)?;
        }
        if outcome.is_error {
            fields.set_item(intern!(py, "is_error"), true)?;
        }
        if let Some(error) = outcome.error.as_deref() {
            fields.set_item(intern!(py, "error"), error)?;
        }
    }
    if let Some(tokens) = call.input_tokens {
        fields.set_item(intern!(py, "input_tokens"), tokens)?;
    }
    if let Some(tokens) = call.output_tokens {
        fields.set_item(intern!(py, "output_tokens"), tokens)?;
    }
    fields.set_item(intern!(py, "line"), line)
}

/// A time as the event gives it: a float, a str or None.
fn time<'py>(py: Python<'py>, time: Option<&Time<'_>>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match time {
        None => py.None().into_bound(py),
        Some(Time::Seconds(seconds)) => PyFloat::new(py, *seconds).into_any(),
        Some(Time::Text(text)) => PyString::new(py, text).into_any(),
    })
}

/// Builds the Python value of JSON text as the Python decoders give it, as it is parsed:
/// objects as dicts (keys in the order of the text, a key given twice at its first place with
/// its last value), arrays as lists, integers as ints, other numbers as floats. The parser
/// bounds the nesting (128), and so this recursion. A Python error (out of memory) is kept in
/// `failed` and ends the parse.
struct PyValue<'a, 'g, 'py> {
    py: Python<'py>,
    keys: &'a mut Option<MutexGuard<'g, Keys>>,
    failed: &'a mut Option<PyErr>,
}

impl<'a, 'g, 'py> PyValue<'a, 'g, 'py> {
    fn again(&mut self) -> PyValue<'_, 'g, 'py> {
        PyValue {
            py: self.py,
            keys: self.keys,
            failed: self.failed,
        }
    }

    fn kept<T, E: de::Error>(&mut self, result: PyResult<T>) -> Result<T, E> {
        result.map_err(|error| {
            *self.failed = Some(error);
            E::custom("a Python error")
        })
    }
}

impl<'de, 'py> DeserializeSeed<'de> for PyValue<'_, '_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for PyValue<'_, '_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.py.None().into_bound(self.py))
    }

    fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Self::Value, E> {
        Ok(flag
            .into_pyobject(self.py)
            .map(|flag| flag.to_owned().into_any())
            .unwrap_or_else(|never| match never {}))
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Self::Value, E> {
        Ok(number
            .into_pyobject(self.py)
            .map(Bound::into_any)
            .unwrap_or_else(|never| match never {}))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Self::Value, E> {
        Ok(number
            .into_pyobject(self.py)
            .map(Bound::into_any)
            .unwrap_or_else(|never| match never {}))
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Self::Value, E> {
        Ok(PyFloat::new(self.py, number).into_any())
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.py, text).into_any())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut items: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.py);
        while let Some(item) = items.next_element_seed(self.again())? {
            let appended = list.append(item);
            self.kept(appended)?;
        }
        Ok(list.into_any())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut entries: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.py);
        while let Some(Text(key)) = entries.next_key::<Text<'de>>()? {
            // The string [`Keys`] holds for the key, made once.
            let key = match self.keys.as_deref_mut() {
                Some(keys) => keys.get(self.py, &key),
                None => PyString::new(self.py, &key),
            };
            let item = entries.next_value_seed(self.again())?;
            let set = dict.set_item(key, item);
            self.kept(set)?;
        }
        Ok(dict.into_any())
    }
}
