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
    Fields::of(value)?.get(name)
}

/// Where one object's fields are read: looked up once per object, as a chunk's parts are each
/// read for two or three fields.
enum Fields<'py> {
    /// A dict (exactly): its items.
    Dict(Bound<'py, PyDict>),
    /// A pydantic model: its `__dict__`, then its extra fields (None when it allows none; a
    /// lookup that misses on the model itself costs microseconds in pydantic's `__getattr__`).
    Model(Option<Bound<'py, PyDict>>, Option<Bound<'py, PyDict>>),
    /// Anything else: its `__dict__`, then its attributes.
    Object(Option<Bound<'py, PyDict>>, Bound<'py, PyAny>),
}

impl<'py> Fields<'py> {
    fn of(value: &Bound<'py, PyAny>) -> PyResult<Self> {
        let py = value.py();
        if let Ok(dict) = value.cast_exact::<PyDict>() {
            return Ok(Fields::Dict(dict.clone()));
        }
        let own = absent_if_no_attribute(py, generic_getattr(value, intern!(py, "__dict__")))?
            .and_then(|own| own.cast_into::<PyDict>().ok());
        Ok(
            match absent_if_no_attribute(py, generic_getattr(value, intern!(py, "__pydantic_extra__")))? {
                Some(extra) => Fields::Model(own, extra.cast_into::<PyDict>().ok()),
                None => Fields::Object(own, value.clone()),
            },
        )
    }

    fn get(&self, name: &Bound<'py, PyString>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let own = match self {
            Fields::Dict(dict) => return dict.get_item(name),
            Fields::Model(own, _) | Fields::Object(own, _) => own,
        };
        if let Some(item) = own.as_ref().map(|own| own.get_item(name)).transpose()?.flatten() {
            return Ok(Some(item));
        }
        match self {
            Fields::Model(_, Some(extra)) => extra.get_item(name),
            Fields::Object(_, value) => absent_if_no_attribute(name.py(), value.getattr(name)),
            _ => Ok(None),
        }
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
        let choice = Fields::of(&choice)?;
        let Some(delta) = choice.get(intern!(py, "delta"))?.filter(|delta| !delta.is_none()) else {
            continue;
        };
        let index = match choice.get(intern!(py, "index"))? {
            Some(index) if index.is_instance_of::<PyInt>() => index,
            _ => position.into_pyobject(py)?.into_any(),
        };
        let delta = Fields::of(&delta)?;
        if let Some(content) = text(delta.get(intern!(py, "content"))?) {
            let stream = PyTuple::new(py, [index.clone(), intern!(py, "text").clone().into_any()])?;
            found.append(PyTuple::new(py, [stream.into_any(), content.into_any()])?)?;
        }
        let Some(calls) = delta.get(intern!(py, "tool_calls"))? else {
            continue;
        };
        for (order, call) in items(&calls).enumerate() {
            let call = Fields::of(&call)?;
            let arguments = match call.get(intern!(py, "function"))? {
                Some(function) if !function.is_none() => text(field(&function, intern!(py, "arguments"))?),
                _ => None,
            };
            let Some(arguments) = arguments else {
                continue;
            };
            let call_index = match call.get(intern!(py, "index"))? {
                Some(call_index) if call_index.is_instance_of::<PyInt>() => call_index,
                _ => order.into_pyobject(py)?.into_any(),
            };
            let stream = PyTuple::new(py, [index.clone(), call_index])?;
            found.append(PyTuple::new(py, [stream.into_any(), arguments.into_any()])?)?;
        }
    }
    Ok(found)
}
