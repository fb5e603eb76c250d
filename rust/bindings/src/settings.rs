//! The detectors' settings at the boundary: Python values read into the engine's `Given` and
//! checked by `doomloop_engine::settings` (refusals become Python exceptions in `errors`).

use doomloop_engine::chant::CHANT;
use doomloop_engine::session::SESSION;
use doomloop_engine::settings::{self, Given, Kind, Schema, Value};
use doomloop_engine::snapshot::{self, SnapshotKind};
use doomloop_engine::tool_loop::{GUARD, TOOL_LOOP};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

use crate::errors::{setting_error, snapshot_bytes, snapshot_error};
use crate::ffi::{is_huge_negative, type_name};

/// Size in bits of an int beyond `i128` (`int`'s own method: a subclass's is not asked).
fn bits(int: &Bound<'_, PyInt>) -> u64 {
    let py = int.py();
    py.get_type::<PyInt>()
        .getattr("bit_length")
        .and_then(|method| method.call1((int,)))
        .and_then(|bits| bits.extract::<u64>())
        .unwrap_or(u64::MAX)
}

/// A Python value as the engine's settings check reads it; `None` for a value of any other
/// type (the slow path names its type).
fn scalar(value: &Bound<'_, PyAny>) -> Option<Given<'static>> {
    if let Ok(flag) = value.cast::<PyBool>() {
        return Some(Given::Bool(flag.is_true()));
    }
    if let Ok(int) = value.cast::<PyInt>() {
        if let Ok(n) = int.extract::<i64>() {
            return Some(Given::Int(i128::from(n)));
        }
        return Some(match int.extract::<i128>() {
            Ok(n) => Given::Int(n),
            Err(_) => Given::HugeInt {
                negative: is_huge_negative(int),
                bits: bits(int),
            },
        });
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        return Some(Given::Float(float.value()));
    }
    value.is_none().then_some(Given::None)
}

pub fn to_python(py: Python<'_>, value: Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::Count(n) => n.into_pyobject(py)?.into_any().unbind(),
        Value::Number(x) => x.into_pyobject(py)?.into_any().unbind(),
        Value::Switch(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        Value::Unset => py.None(),
    })
}

/// Check `values` (one per setting, in the schema's order) into engine values.
pub fn checked(schema: &'static Schema, values: &Bound<'_, PyTuple>) -> PyResult<Vec<Value>> {
    let py = values.py();
    let mut fast = Some(Vec::with_capacity(values.len()));
    for item in values.iter() {
        match (scalar(&item), fast.as_mut()) {
            (Some(given), Some(fast)) => fast.push(given),
            _ => fast = None,
        }
    }
    let result = match fast {
        Some(given) => settings::check_all(schema, &given),
        None => {
            let names: Vec<String> = values.iter().map(|item| type_name(&item)).collect();
            let given: Vec<Given<'_>> = values
                .iter()
                .zip(&names)
                .map(|(item, name)| scalar(&item).unwrap_or(Given::Other(name)))
                .collect();
            settings::check_all(schema, &given)
        }
    };
    result.map_err(|e| setting_error(py, e))
}

/// Check one value of a one-setting schema.
pub fn checked_one(schema: &'static Schema, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    let name = type_name(value);
    let given = scalar(value).unwrap_or(Given::Other(&name));
    match schema.settings.first() {
        Some(setting) => settings::check(schema, setting, given).map_err(|e| setting_error(value.py(), e)),
        None => Err(PyTypeError::new_err(format!("{} has no settings", schema.owner))),
    }
}

pub fn schema(owner: &str) -> PyResult<&'static Schema> {
    [&SESSION, &TOOL_LOOP, &GUARD, &CHANT]
        .into_iter()
        .find(|schema| schema.owner == owner)
        .ok_or_else(|| PyTypeError::new_err(format!("no settings named {owner:?}")))
}

/// `values` checked against the settings of `owner` (a config class name): the same values,
/// ints and floats as the engine holds them. Raises TypeError for a value of the wrong type
/// and `doomloop.ConfigError` for one out of range, naming the setting and its range.
#[pyfunction]
#[pyo3(signature = (owner, values, /))]
pub fn check_settings<'py>(owner: &str, values: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyTuple>> {
    let py = values.py();
    let checked = checked(schema(owner)?, values)?;
    let objects = checked
        .into_iter()
        .map(|value| to_python(py, value))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, objects)
}

/// The settings of `owner`: `(name, default, minimum, maximum)` each, in constructor order
/// (bounds `None` for switches).
#[pyfunction]
#[pyo3(signature = (owner, /))]
pub fn settings_of<'py>(py: Python<'py>, owner: &str) -> PyResult<Bound<'py, PyTuple>> {
    let rows = schema(owner)?
        .settings
        .iter()
        .map(|setting| {
            let (minimum, maximum) = match setting.kind {
                Kind::Count { min, max } | Kind::OptionalCount { min, max } => {
                    (to_python(py, Value::Count(min))?, to_python(py, Value::Count(max))?)
                }
                Kind::Number { min, max, .. } => {
                    (to_python(py, Value::Number(min))?, to_python(py, Value::Number(max))?)
                }
                Kind::Switch | Kind::OptionalSwitch => (py.None(), py.None()),
            };
            PyTuple::new(
                py,
                [
                    setting.name.into_pyobject(py)?.into_any().unbind(),
                    to_python(py, setting.default)?,
                    minimum,
                    maximum,
                ],
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, rows)
}

/// The settings values a snapshot was made with (checked), for building its detector's config
/// before the state is restored. `owner` names the config class.
#[pyfunction]
#[pyo3(signature = (owner, data, /))]
pub fn snapshot_settings<'py>(owner: &str, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = data.py();
    let schema = schema(owner)?;
    let kind = match owner {
        "DoomLoopConfig" => SnapshotKind::Session,
        "LoopDetectionConfig" => SnapshotKind::ToolLoop,
        _ => SnapshotKind::Chant,
    };
    let data = snapshot_bytes(data)?;
    let values = snapshot::settings_of(&data, kind, schema).map_err(|e| snapshot_error(py, e))?;
    let objects = values
        .into_iter()
        .map(|value| to_python(py, value))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, objects)
}
