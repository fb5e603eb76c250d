//! Reading the parts of streamed chunks: SDK objects (pydantic models, whose data sits in their
//! `__dict__` or, for LiteLLM's chunks, in their extra fields) and the dicts of their JSON
//! alike. A stream hook reads every chunk of every response, and in Python these lookups cost
//! about a microsecond a chunk; here they are a few dict probes.

use pyo3::exceptions::PyAttributeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PyString, PyTuple};

use crate::ffi::generic_getattr;

/// `value[name]` of a dict, else the field (None when absent): see `doomloop.integrations._streams.field`.
#[pyfunction]
#[pyo3(signature = (value, name, /))]
pub(crate) fn field<'py>(
    value: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = value.py();
    if let Ok(dict) = value.cast_exact::<PyDict>() {
        return dict.get_item(name);
    }
    if let Some(own) = absent_if_no_attribute(py, generic_getattr(value, intern!(py, "__dict__")))? {
        if let Ok(own) = own.cast::<PyDict>() {
            if let Some(item) = own.get_item(name)? {
                return Ok(Some(item));
            }
        }
    }
    // A pydantic model keeps undeclared fields here (None when it allows none): a lookup that
    // misses on the model itself costs microseconds in pydantic's __getattr__.
    match absent_if_no_attribute(py, generic_getattr(value, intern!(py, "__pydantic_extra__")))? {
        Some(extra) => match extra.cast::<PyDict>() {
            Ok(extra) => extra.get_item(name),
            Err(_) => Ok(None),
        },
        None => absent_if_no_attribute(py, value.getattr(name)),
    }
}

/// `getattr(value, name, None)`'s rule: a missing attribute is None, any other error is raised.
fn absent_if_no_attribute<'py>(
    py: Python<'py>,
    found: PyResult<Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match found {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_instance_of::<PyAttributeError>(py) => Ok(None),
        Err(error) => Err(error),
    }
}

/// A non-empty str, exactly (a subclass is not text the stream carries).
fn text<'py>(value: Option<Bound<'py, PyAny>>) -> Option<Bound<'py, PyString>> {
    let value = value?;
    let value = value.cast_exact::<PyString>().ok()?.clone();
    // An empty str is one the SDK sends with a role or a finish reason: no text.
    match value.len() {
        Ok(0) => None,
        _ => Some(value),
    }
}

/// The items of a list or a tuple (read in place, whatever `__iter__` a subclass defines);
/// anything else holds none.
fn items<'py>(value: &Bound<'py, PyAny>) -> Box<dyn Iterator<Item = Bound<'py, PyAny>> + 'py> {
    if let Ok(list) = value.cast::<PyList>() {
        Box::new(list.clone().into_iter())
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        Box::new(tuple.clone().into_iter())
    } else {
        Box::new(std::iter::empty())
    }
}

/// The text a chat-completion chunk carries: see `doomloop.integrations.openai.chat_pieces`.
#[pyfunction]
#[pyo3(signature = (chunk, /))]
pub(crate) fn chat_pieces<'py>(chunk: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    let py = chunk.py();
    let found = PyList::empty(py);
    let Some(choices) = field(chunk, intern!(py, "choices"))? else {
        return Ok(found);
    };
    for (position, choice) in items(&choices).enumerate() {
        let Some(delta) = field(&choice, intern!(py, "delta"))?.filter(|delta| !delta.is_none()) else {
            continue;
        };
        let index = match field(&choice, intern!(py, "index"))? {
            Some(index) if index.is_instance_of::<PyInt>() => index,
            _ => position.into_pyobject(py)?.into_any(),
        };
        if let Some(content) = text(field(&delta, intern!(py, "content"))?) {
            let stream = PyTuple::new(py, [index.clone(), intern!(py, "text").clone().into_any()])?;
            found.append(PyTuple::new(py, [stream.into_any(), content.into_any()])?)?;
        }
        let Some(calls) = field(&delta, intern!(py, "tool_calls"))? else {
            continue;
        };
        for (order, call) in items(&calls).enumerate() {
            let arguments = match field(&call, intern!(py, "function"))? {
                Some(function) if !function.is_none() => text(field(&function, intern!(py, "arguments"))?),
                _ => None,
            };
            let Some(arguments) = arguments else {
                continue;
            };
            let call_index = match field(&call, intern!(py, "index"))? {
                Some(call_index) if call_index.is_instance_of::<PyInt>() => call_index,
                _ => order.into_pyobject(py)?.into_any(),
            };
            let stream = PyTuple::new(py, [index.clone(), call_index])?;
            found.append(PyTuple::new(py, [stream.into_any(), arguments.into_any()])?)?;
        }
    }
    Ok(found)
}
