//! The engine's errors mapped, once, to Python exceptions: a refused setting is a `TypeError`
//! (wrong type) or `doomloop.errors.ConfigError`, an unreadable snapshot a
//! `doomloop.errors.SnapshotError` (both `ValueError`s and `DoomLoopError`s).

use doomloop_engine::settings::SettingError;
use doomloop_engine::snapshot::SnapshotError;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static CONFIG_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static SNAPSHOT_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// An instance of `class(*args)` as the error to raise (the constructor's own error if the
/// class cannot be imported or built).
fn raise(py: Python<'_>, class: &'static PyOnceLock<Py<PyType>>, name: &str, args: &[&str]) -> PyErr {
    let built =
        pyo3::types::PyTuple::new(py, args).and_then(|args| class.import(py, "doomloop.errors", name)?.call1(args));
    match built {
        Ok(instance) => PyErr::from_value(instance),
        Err(err) => err,
    }
}

/// The Python exception for a refused setting.
pub fn setting_error(py: Python<'_>, error: SettingError) -> PyErr {
    match &error {
        SettingError::TypeMismatch { .. } | SettingError::UnknownSetting { .. } => {
            PyTypeError::new_err(error.to_string())
        }
        SettingError::OutOfRange { path, problem } => raise(py, &CONFIG_ERROR, "ConfigError", &[path, problem]),
    }
}

/// The Python exception for an unreadable snapshot.
pub fn snapshot_error(py: Python<'_>, error: SnapshotError) -> PyErr {
    raise(py, &SNAPSHOT_ERROR, "SnapshotError", &[&error.to_string()])
}

/// The bytes of a snapshot argument: `bytes`, `bytearray` or `memoryview` of bytes, read
/// through the buffer protocol of the built-in types only (a subclass's methods are not asked).
pub fn snapshot_bytes(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(bytes) = data.cast::<pyo3::types::PyBytes>() {
        return Ok(bytes.as_bytes().to_vec());
    }
    if let Ok(array) = data.cast::<pyo3::types::PyByteArray>() {
        return Ok(array.to_vec());
    }
    if data.is_exact_instance_of::<pyo3::types::PyMemoryView>() {
        // `bytes(view)` copies through the buffer protocol (memoryview cannot be subclassed).
        let copy = data.py().get_type::<pyo3::types::PyBytes>().call1((data,))?;
        return Ok(copy.cast::<pyo3::types::PyBytes>()?.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!(
        "a snapshot must be bytes, bytearray or memoryview, got {}",
        crate::ffi::type_name(data)
    )))
}

/// The state a snapshot argument holds, for a detector's `_restore`: `read` builds it from the
/// snapshot's bytes, and `same_settings` says whether it was made under the detector's own
/// settings. Nothing is replaced here, so on any error the detector is left as it was.
pub fn restored_state<T>(
    data: &Bound<'_, PyAny>,
    read: impl FnOnce(&[u8]) -> PyResult<T>,
    same_settings: impl FnOnce(&T) -> bool,
) -> PyResult<T> {
    let data = snapshot_bytes(data)?;
    let restored = read(&data)?;
    if !same_settings(&restored) {
        return Err(PyValueError::new_err("the snapshot's settings are not this detector's"));
    }
    Ok(restored)
}
