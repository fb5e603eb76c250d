//! The engine's errors mapped, once, to Python exceptions: a refused setting is a `TypeError`
//! (wrong type) or `doomloop.errors.ConfigError`, an unreadable snapshot a
//! `doomloop.errors.SnapshotError` (both `ValueError`s and `DoomLoopError`s).
//!
//! Those two classes are Python's: `doomloop.errors` hands them to the extension when it is
//! imported (`_bind_errors`), so the extension never imports a `doomloop` module itself.

use std::sync::Mutex;

use doomloop_engine::settings::SettingError;
use doomloop_engine::snapshot::SnapshotError;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

use crate::ffi::lock;

/// The exception classes of `doomloop.errors`.
struct Classes {
    config_error: Py<PyType>,
    snapshot_error: Py<PyType>,
}

/// Set by `_bind_errors`, which `doomloop.errors` calls at its import (`doomloop` imports it
/// before anything can reach the engine); a reloaded module binds its new classes.
static CLASSES: Mutex<Option<Classes>> = Mutex::new(None);

/// Hand the extension the exception classes it raises for a refused setting and an unreadable
/// snapshot (called by `doomloop.errors` when it is imported). Both must be `ValueError`s.
#[pyfunction]
#[pyo3(signature = (*, config_error, snapshot_error))]
pub fn _bind_errors(config_error: &Bound<'_, PyType>, snapshot_error: &Bound<'_, PyType>) -> PyResult<()> {
    let py = config_error.py();
    let value_error = py.get_type::<PyValueError>();
    for (name, class) in [("config_error", config_error), ("snapshot_error", snapshot_error)] {
        if !class.is_subclass(&value_error)? {
            return Err(PyTypeError::new_err(format!(
                "{name} must be a ValueError subclass, got {}",
                class.name()?
            )));
        }
    }
    let classes = Classes {
        config_error: config_error.clone().unbind(),
        snapshot_error: snapshot_error.clone().unbind(),
    };
    let old = lock(py, &CLASSES).replace(classes);
    // Released with the lock free (dropping a class may run Python code).
    drop(old);
    Ok(())
}

/// An instance of the bound class `pick` chooses, built from `args` (the constructor's own
/// error if it raises); a plain `ValueError` of the same text before any class is bound.
fn raise(py: Python<'_>, pick: fn(&Classes) -> &Py<PyType>, args: &[&str]) -> PyErr {
    let class = lock(py, &CLASSES).as_ref().map(|classes| pick(classes).clone_ref(py));
    let Some(class) = class else {
        return PyValueError::new_err(args.join(": "));
    };
    match PyTuple::new(py, args).and_then(|args| class.bind(py).call1(args)) {
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
        SettingError::OutOfRange { path, problem } => raise(py, |c| &c.config_error, &[path, problem]),
    }
}

/// The Python exception for an unreadable snapshot.
pub fn snapshot_error(py: Python<'_>, error: SnapshotError) -> PyErr {
    snapshot_refused(py, &error.to_string())
}

/// A `SnapshotError` saying `why` (a snapshot that cannot be read, or taken).
pub fn snapshot_refused(py: Python<'_>, why: &str) -> PyErr {
    raise(py, |c| &c.snapshot_error, &[why])
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

/// The state a snapshot holds, for a detector's `_restore`: `read` builds it from the
/// snapshot's bytes, and `same_settings` says whether it was made under the detector's own
/// settings. Nothing is replaced here, so on any error the detector is left as it was.
pub fn restored_state<T>(
    data: &[u8],
    read: impl FnOnce(&[u8]) -> PyResult<T>,
    same_settings: impl FnOnce(&T) -> bool,
) -> PyResult<T> {
    let restored = read(data)?;
    if !same_settings(&restored) {
        return Err(PyValueError::new_err("the snapshot's settings are not this detector's"));
    }
    Ok(restored)
}
