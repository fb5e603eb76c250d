//! Raw CPython access, in one module (as orjson keeps its `ffi/`): every other module reads
//! Python objects through these helpers or PyO3's safe API, and no `unsafe` lives elsewhere.
//! Each helper reads the object itself (its length, flags, entries, exact type), never a
//! method a subclass could override, so hostile subclasses cannot lie to the hashers and
//! scanners. Also here: [`lock`], the interpreter-aware mutex lock every pyclass uses.

use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::{MutexExt, PyOnceLock};
use pyo3::types::{PyByteArray, PyBytes, PyFloat, PyInt, PyString};

/// Lock `mutex`, waiting (if another thread holds it) with the interpreter released: a thread
/// holding the interpreter while it waits would stall every Python thread for as long as the
/// holder scans, and deadlock with a holder that needs the interpreter to go on.
#[inline]
pub(crate) fn lock<'m, T>(py: Python<'_>, mutex: &'m Mutex<T>) -> MutexGuard<'m, T> {
    // No code path panics while holding a lock; recover the data if one ever did.
    match mutex.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => wait_for(py, mutex),
    }
}

#[cold]
#[inline(never)]
fn wait_for<'m, T>(py: Python<'_>, mutex: &'m Mutex<T>) -> MutexGuard<'m, T> {
    mutex
        .lock_py_attached(py)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The name of `value`'s type, for error messages.
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "object".to_string(), |n| n.to_string())
}

/// An object sorted by its exact built-in type, read from its type pointer (no failed casts
/// on the common path); a subclass of these, or anything else, is `Other`.
pub(crate) enum Exact<'a, 'py> {
    Str(&'a Bound<'py, PyString>),
    Int(&'a Bound<'py, PyInt>),
    Float(&'a Bound<'py, PyFloat>),
    Other,
}

#[inline]
pub(crate) fn exact<'a, 'py>(item: &'a Bound<'py, PyAny>) -> Exact<'a, 'py> {
    // SAFETY: `item` is a live object, so its type pointer is valid to read; each unchecked
    // cast follows an exact match of that pointer with the built-in type it casts to.
    unsafe {
        let ty = ffi::Py_TYPE(item.as_ptr());
        if ty == &raw mut ffi::PyUnicode_Type {
            Exact::Str(item.cast_unchecked::<PyString>())
        } else if ty == &raw mut ffi::PyLong_Type {
            Exact::Int(item.cast_unchecked::<PyInt>())
        } else if ty == &raw mut ffi::PyFloat_Type {
            Exact::Float(item.cast_unchecked::<PyFloat>())
        } else {
            Exact::Other
        }
    }
}

/// The str's length in code points, read from the object (a subclass's `__len__` is not
/// asked).
#[inline]
pub(crate) fn str_length(string: &Bound<'_, PyString>) -> PyResult<usize> {
    // SAFETY: `string` is a live str (checked by the cast); PyUnicode_GetLength only reads it
    // and returns -1 with an exception set on failure.
    let length = unsafe { ffi::PyUnicode_GetLength(string.as_ptr()) };
    usize::try_from(length).map_err(|_| PyErr::fetch(string.py()))
}

static STR_ISASCII: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `str.isascii(string)`: reads a flag of the str object, whatever a subclass overrides (the
/// flag itself is not in the stable ABI).
pub(crate) fn is_ascii(string: &Bound<'_, PyString>) -> PyResult<bool> {
    let py = string.py();
    let isascii = STR_ISASCII.get_or_try_init(py, || {
        py.get_type::<PyString>()
            .getattr(intern!(py, "isascii"))
            .map(Bound::unbind)
    })?;
    isascii.bind(py).call1((string,))?.is_truthy()
}

/// Code points `start..end` of a str (within its length), as a new str.
pub(crate) fn substring<'py>(
    string: &Bound<'py, PyString>,
    start: usize,
    end: usize,
) -> PyResult<Bound<'py, PyString>> {
    let (Ok(from), Ok(to)) = (isize::try_from(start), isize::try_from(end)) else {
        return Err(PyValueError::new_err("text is too long"));
    };
    // SAFETY: `string` is a live str and `from..to` lies within its length; the call returns a
    // new reference (a str of exactly `to - from` code points) or NULL with an exception set.
    let piece =
        unsafe { Bound::from_owned_ptr_or_err(string.py(), ffi::PyUnicode_Substring(string.as_ptr(), from, to))? };
    Ok(piece.cast_into::<PyString>()?)
}

/// Copy every code point of `string`, lone surrogates included, into `target`, which holds
/// exactly as many.
pub(crate) fn copy_code_points(string: &Bound<'_, PyString>, target: &mut [u32]) -> PyResult<()> {
    if str_length(string)? != target.len() {
        return Err(PyValueError::new_err("text piece and its buffer differ in length"));
    }
    let size = isize::try_from(target.len()).map_err(|_| PyValueError::new_err("text is too long"))?;
    // SAFETY: `string` is a str of `size` code points (checked above) and `target` holds
    // `size`; CPython writes at most that many (no terminator with copy_null = 0) and returns
    // NULL, with an exception set, on failure.
    let written = unsafe { ffi::PyUnicode_AsUCS4(string.as_ptr(), target.as_mut_ptr(), size, 0) };
    if written.is_null() {
        return Err(PyErr::fetch(string.py()));
    }
    Ok(())
}

/// The str's UTF-8 encoding with lone surrogates encoded as such (`surrogatepass`), as a new
/// bytes object (never cached on the str).
pub(crate) fn surrogatepass<'py>(string: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyBytes>> {
    // SAFETY: `string` is a live str and both names are NUL-terminated literals; the call
    // returns a new reference to a bytes object or NULL with an exception set.
    let encoded = unsafe {
        Bound::from_owned_ptr_or_err(
            string.py(),
            ffi::PyUnicode_AsEncodedString(string.as_ptr(), c"utf-8".as_ptr(), c"surrogatepass".as_ptr()),
        )?
    };
    Ok(encoded.cast_into::<PyBytes>()?)
}

/// Whether an int too large for 64 bits is negative, read from the object (a subclass's
/// comparisons are not asked).
pub(crate) fn is_huge_negative(int: &Bound<'_, PyInt>) -> bool {
    let mut overflow: std::ffi::c_int = 0;
    // SAFETY: `int` is a live int; the call only reads it and sets `overflow` to -1 or +1
    // when the value does not fit in 64 bits (returning -1 then, with no exception set).
    unsafe { ffi::PyLong_AsLongLongAndOverflow(int.as_ptr(), &mut overflow) };
    overflow < 0
}

/// `operator.index(item)`: an int, or the error its `__index__` raised.
pub(crate) fn number_index<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyInt>> {
    // SAFETY: `item` is a live object; PyNumber_Index returns a new reference to an int or
    // NULL with an exception set.
    let int = unsafe { Bound::from_owned_ptr_or_err(item.py(), ffi::PyNumber_Index(item.as_ptr())) }?;
    Ok(int.cast_into::<PyInt>()?)
}

/// `object.__getattribute__(item, name)`: the attribute by the standard lookup (data
/// descriptors, the instance dict, the type), bypassing a `__getattribute__` or `__getattr__`
/// the type defines. Reading SDK objects' data this way skips pydantic's `__getattr__` hook,
/// which makes every lookup on a model several times dearer.
pub(crate) fn generic_getattr<'py>(
    item: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `item` and `name` are live objects, `name` a str; PyObject_GenericGetAttr returns
    // a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(item.py(), ffi::PyObject_GenericGetAttr(item.as_ptr(), name.as_ptr())) }
}

/// `float(item)`: a float, or the error its conversion raised.
pub(crate) fn number_float<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyFloat>> {
    // SAFETY: `item` is a live object; PyNumber_Float returns a new reference to a float or
    // NULL with an exception set.
    let float = unsafe { Bound::from_owned_ptr_or_err(item.py(), ffi::PyNumber_Float(item.as_ptr())) }?;
    Ok(float.cast_into::<PyFloat>()?)
}

/// `hash` of a bytearray's bytes, read in place (no copy of a large one).
pub(crate) fn hash_bytearray(array: &Bound<'_, PyByteArray>, hash: fn(&[u8]) -> u64) -> u64 {
    // SAFETY: the interpreter is held and `hash`, a plain Rust function given no interpreter
    // token, runs no Python code while it reads, so nothing can resize or free the
    // bytearray's buffer meanwhile.
    hash(unsafe { array.as_bytes() })
}

/// Whether the module `name` is imported (in `sys.modules`, and not as `None`): found without
/// importing it.
pub(crate) fn is_imported(py: Python<'_>, name: &Bound<'_, PyString>) -> bool {
    // SAFETY: `name` is a live str; PyImport_GetModule returns a new reference to what
    // `sys.modules` holds under it, or NULL (with an exception set only on an error).
    let module = unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyImport_GetModule(name.as_ptr())) };
    match module {
        Some(module) => !module.is_none(),
        None => {
            // An error reading sys.modules is the same answer: not imported.
            drop(PyErr::take(py));
            false
        }
    }
}

/// `len(dict)` of an object known to be a dict.
#[inline]
pub(crate) fn dict_len(dict: &Bound<'_, PyAny>) -> usize {
    // SAFETY: callers pass a dict (checked exact); PyDict_Size only reads it.
    usize::try_from(unsafe { ffi::PyDict_Size(dict.as_ptr()) }).unwrap_or(0)
}

/// A position in a dict's entries, read in place with `PyDict_Next` (a subclass's `items` is
/// not asked). A dict mutated between two reads (by Python code the caller runs) only makes
/// the reading skip or repeat entries: never unsafe.
#[derive(Default)]
pub(crate) struct DictPosition(ffi::Py_ssize_t);

/// A key or value [`DictPosition::next_unless`] hands over: `None` for the object already held.
pub(crate) type Refreshed<'py> = Option<Bound<'py, PyAny>>;

impl DictPosition {
    /// The next (key, value) of `dict` as borrowed pointers, both non-null; for comparing
    /// with objects held elsewhere, without touching reference counts.
    #[inline]
    pub(crate) fn next_pointers(
        &mut self,
        dict: &Bound<'_, PyAny>,
    ) -> Option<(*mut ffi::PyObject, *mut ffi::PyObject)> {
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        // SAFETY: callers pass a live dict; PyDict_Next only reads it and hands out borrowed
        // references (never dereferenced here).
        let more = unsafe { ffi::PyDict_Next(dict.as_ptr(), &mut self.0, &mut key, &mut value) };
        (more != 0 && !key.is_null() && !value.is_null()).then_some((key, value))
    }

    /// The next (key, value) of `dict`, each as an owned reference unless it is the object
    /// `held` names for it (`held.0` the key, `held.1` the value; null names none), which is
    /// then `None`, its reference count untouched: for refreshing a copy of a dict's entries.
    #[inline]
    pub(crate) fn next_unless<'py>(
        &mut self,
        dict: &Bound<'py, PyAny>,
        held: (*mut ffi::PyObject, *mut ffi::PyObject),
    ) -> Option<(Refreshed<'py>, Refreshed<'py>)> {
        let (key, value) = self.next_pointers(dict)?;
        let py = dict.py();
        let owned = |item: *mut ffi::PyObject, same: *mut ffi::PyObject| {
            // SAFETY: as in `next`: `item` is non-null and borrowed from the live `dict`, and
            // it is turned into an owned reference at once.
            (item != same).then(|| unsafe { Bound::from_borrowed_ptr(py, item) })
        };
        Some((owned(key, held.0), owned(value, held.1)))
    }

    /// The next (key, value) of `dict`, as owned references.
    #[inline]
    pub(crate) fn next<'py>(&mut self, dict: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let (key, value) = self.next_pointers(dict)?;
        let py = dict.py();
        // SAFETY: both pointers are non-null and borrowed from the live `dict`; they are turned
        // into owned references at once (what the caller does next may run Python code that
        // mutates the dict and drops them from it).
        Some(unsafe { (Bound::from_borrowed_ptr(py, key), Bound::from_borrowed_ptr(py, value)) })
    }
}
