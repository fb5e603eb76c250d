//! Walks a Python value and feeds the engine's canonical fingerprint.
//!
//! The walk is iterative (an explicit frame stack, never Rust recursion on user data), stops
//! descending at `MAX_DEPTH` and marks cycles, so any value — self-referencing, 100,000 levels
//! deep, or mutated by a `model_dump()` it triggers — hashes without crashing. A container met
//! again in the same walk reuses the digest it got (its encoding does not depend on where it
//! stands), so a value of shared sub-objects costs its distinct objects, not its paths. It
//! never raises: an object whose state cannot be read falls back to its type name (documented
//! in docs/fingerprint.md). Lengths and data are read from the objects themselves, never through
//! methods a subclass could override.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use doomloop_engine::fingerprint::{self as fp, Canon, Sketch, TextFeatures};
use doomloop_engine::volatile;

use crate::ffi::{
    dict_len, exact, hash_bytearray, is_ascii, is_huge_negative, number_float, number_index, str_length, substring,
    surrogatepass, DictPosition, Exact,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyIterator, PyList, PySet, PyString, PyTuple,
    PyType,
};

/// Containers nested deeper than this hash as a "too deep" marker instead of being walked.
pub const MAX_DEPTH: usize = 512;

/// Strings and bytes at least this long are hashed with the interpreter released.
pub const HASH_DETACH_THRESHOLD: usize = 1 << 20;

/// Walks of a container met again whose digest cannot be reused (something below it is a
/// cycle, or was cut off by the depth cap, so its encoding may depend on the path) allowed in
/// one walk; past this, such a container hashes as the too-deep marker instead of being walked
/// again. A tree never meets a container twice, so its encoding is unchanged.
pub const MAX_REWALKS: usize = 100_000;

/// Non-ASCII strs at least this long (in code points) are encoded and hashed a piece of this
/// size at a time: CPython's own UTF-8 view would keep a whole UTF-8 copy on the str.
const STR_PIECE: usize = 1 << 16;

/// A walk's scratch space: the digest stack and the digests of the containers finished so far.
#[derive(Default)]
struct Walker {
    canon: Canon,
    seen: HashMap<usize, Seen, BuildHasherDefault<AddressHasher>>,
}

thread_local! {
    // One walker per thread, reused so the common case allocates nothing.
    static WALKER: RefCell<Walker> = RefCell::new(Walker::default());
}

/// What a walk knows of a container it finished (keyed by address).
struct Seen {
    /// Held so the address cannot be reused by another object during the walk.
    _object: Py<PyAny>,
    /// The digest and the levels of containers below it, when it holds wherever the
    /// container stands (at depths where those levels stay under `MAX_DEPTH`): nothing below
    /// it was a cycle or cut off. Then what it reaches is acyclic, so no ancestor of a later
    /// place can lie below it, and its subtree there is the same. `None` otherwise.
    reusable: Option<(u64, usize)>,
}

/// Hashes an object address (already unique; mixing spreads the aligned low bits).
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, address: usize) {
        self.0 = (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

/// Decides which dict keys a walk leaves out (at every depth).
pub type KeyFilter<'a> = &'a dyn Fn(&Bound<'_, PyAny>) -> bool;

/// What a walk leaves out and what it masks, at every depth.
#[derive(Clone, Copy, Default)]
struct Rules<'a> {
    /// The dict entries left out, by key.
    skip: Option<KeyFilter<'a>>,
    /// Whether volatile parts are masked: each str as [`volatile::mask`] masks it, and a
    /// number or str under a key that [`volatile::is_volatile_quantity`] names as the text
    /// [`volatile::MASK`] (the engine's `ResultValue::digest_masked`).
    masked: bool,
}

/// The canonical fingerprint of `value`.
pub fn fingerprint(value: &Bound<'_, PyAny>) -> u64 {
    fingerprint_with(value, Rules::default())
}

/// The canonical fingerprint of `value` with every dict entry whose key `skip` accepts left
/// out, at every depth (used to ignore volatile ids such as message ids).
pub fn fingerprint_skipping(value: &Bound<'_, PyAny>, skip: Option<KeyFilter<'_>>) -> u64 {
    fingerprint_with(value, Rules { skip, masked: false })
}

/// [`fingerprint_skipping`] with volatile parts masked at every depth (see [`Rules::masked`]):
/// how the keyword configuration compares plain results. A value with nothing to mask keeps
/// its [`fingerprint`].
pub fn fingerprint_masked(value: &Bound<'_, PyAny>, skip: KeyFilter<'_>) -> u64 {
    fingerprint_with(
        value,
        Rules {
            skip: Some(skip),
            masked: true,
        },
    )
}

fn fingerprint_with(value: &Bound<'_, PyAny>, rules: Rules<'_>) -> u64 {
    if rules.skip.is_none() {
        if let Some(digest) = flat_dict_digest(value) {
            return digest;
        }
    }
    // A scalar (many results and plan states) needs no walk.
    if let Some(digest) = rules.masked.then(|| masked_str_digest(value)).flatten() {
        return digest;
    }
    if let Some(digest) = scalar_digest(value) {
        return digest;
    }
    WALKER
        .try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut walker) => walk(value, &mut walker, rules),
            // Re-entered from a `model_dump()` or `__reduce_ex__` called by an outer walk.
            Err(_) => walk(value, &mut Walker::default(), rules),
        })
        .unwrap_or_else(|_| walk(value, &mut Walker::default(), rules))
}

/// A str's UTF-8 bytes, borrowed from the str; text with lone surrogates as its
/// `surrogatepass` encoding (a copy), so that no two texts read alike.
pub(crate) fn text_bytes<'a>(text: &'a Bound<'_, PyString>) -> Cow<'a, [u8]> {
    match text.to_str() {
        Ok(utf8) => Cow::Borrowed(utf8.as_bytes()),
        Err(_) => Cow::Owned(surrogatepass(text).map_or_else(|_| Vec::new(), |b| b.as_bytes().to_vec())),
    }
}

/// The digest of a str with its volatile tokens masked; `None` for a str with none (its
/// digest is its own), a str too long to be masked, or anything that is not a str.
fn masked_str_digest(item: &Bound<'_, PyAny>) -> Option<u64> {
    let string = item.cast::<PyString>().ok()?;
    // A code point is at least a byte: a longer str is past the mask's limit, unread.
    if str_length(string).ok()? > volatile::MASK_LIMIT {
        return None;
    }
    volatile::mask(&text_bytes(string)).map(|masked| fp::hash_str(&masked))
}

/// Whether a dict entry's value is masked whole: a number or a str under a key naming a
/// volatile quantity (a pid, an elapsed time, a point in time).
fn masks_whole(key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> bool {
    let scalar = (value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>())
        || value.is_instance_of::<PyFloat>()
        || value.is_instance_of::<PyString>();
    // The key's bytes as a text result's are read (lone surrogates as surrogatepass).
    scalar
        && key
            .cast::<PyString>()
            .is_ok_and(|key| volatile::is_volatile_quantity(&text_bytes(key)))
}

/// Fast path for the most common value, a small dict of scalars (tool params, result
/// details): hashed straight from the dict with no walk, no allocation and no generic child
/// source; the digest is the one the walk gives. `None` when the value is anything else.
fn flat_dict_digest(value: &Bound<'_, PyAny>) -> Option<u64> {
    let dict = value.cast::<PyDict>().ok()?;
    if dict.len() > fp::SMALL_MAP_ENTRIES {
        return None;
    }
    let mut pairs = [0u64; fp::SMALL_MAP_ENTRIES];
    let mut used = 0;
    let mut position = DictPosition::default();
    // A scalar's digest may run a subclass's Python code (the entries are owned meanwhile).
    while let Some((key, value)) = position.next(dict.as_any()) {
        let slot = pairs.get_mut(used)?;
        *slot = fp::hash_pair(scalar_digest(&key)?, scalar_digest(&value)?);
        used += 1;
    }
    fp::hash_map_pairs(pairs.get_mut(..used)?)
}

/// A small dict of exact built-in scalars as it was when hashed: its entries, held by strong
/// reference, their digests and the dict's. Lets a caller that is handed the same dict again
/// (one params dict passed to both hooks of a call) reuse the digest without hashing, and one
/// handed a fresh dict that shares objects with it (the same keys, a constant value: agents
/// build a dict per call from the same literal) refresh it in place, reusing those objects'
/// digests (see [`DictSnapshot::refresh`]).
///
/// The digests are computed from the snapshot's own objects, so they are the digests of exactly
/// the content held, whatever happens to the dict meanwhile. The entries are of exact immutable
/// built-in types (str, int, float, bool, None) and are kept alive, so an object that is one of
/// them (by identity: a held object's address cannot be reused) has that content and that
/// digest; a dict that yields, in order, the very same objects has the snapshot's digest.
pub struct DictSnapshot {
    entries: Vec<Held>,
    digest: u64,
}

/// One entry of a [`DictSnapshot`], the digests of its key and value, and of the two as a pair.
struct Held {
    key: Py<PyAny>,
    value: Py<PyAny>,
    key_digest: u64,
    value_digest: u64,
    pair_digest: u64,
}

impl DictSnapshot {
    /// The snapshot of `{}`.
    pub const fn empty() -> DictSnapshot {
        DictSnapshot {
            entries: Vec::new(),
            digest: fp::EMPTY_MAP,
        }
    }

    /// Become the snapshot of `value`, in place; false, leaving the snapshot of `{}`, unless
    /// it is an exact dict of at most [`fp::SMALL_MAP_ENTRIES`] entries whose keys and values
    /// are all exact built-in scalars (strs of at most `longest_str` code points: a snapshot
    /// keeps them alive). The digest is the one [`fingerprint`] gives for the same content. A
    /// key or value that is the very object held at the same place keeps its digest, and the
    /// entries keep their allocation (agents build a dict per call from one literal: the same
    /// keys, often constant values).
    pub fn refresh(&mut self, value: &Bound<'_, PyAny>, longest_str: usize) -> bool {
        let before = self.entries.len();
        let fresh = self.held(value, longest_str);
        // Hashed from the entries held, after the walk: hashing a long str releases the GIL,
        // and the dict may change then. The very objects held before, as many: the digest
        // stands (a result's details built from one literal again and again).
        let digest = match fresh {
            Some(0) if self.entries.len() == before => Some(self.digest),
            _ => fresh.and_then(|fresh| self.hash_fresh(value.py(), fresh)),
        };
        match digest {
            Some(digest) => self.digest = digest,
            // The snapshot of `{}`, keeping the entries' allocation.
            None => {
                self.entries.clear();
                self.digest = fp::EMPTY_MAP;
            }
        }
        digest.is_some()
    }

    /// Hold `value`'s entries in place; which keys (low byte) and values (high byte) are not
    /// the objects held before, by position. None when it cannot have a snapshot.
    fn held(&mut self, value: &Bound<'_, PyAny>, longest_str: usize) -> Option<u16> {
        if !value.is_exact_instance_of::<PyDict>() || dict_len(value) > fp::SMALL_MAP_ENTRIES {
            return None;
        }
        // With nothing held, arguments that can have no snapshot (a list in them: common) are
        // turned away before anything is allocated or held.
        if self.entries.is_empty() {
            let mut position = DictPosition::default();
            while let Some((k, v)) = position.next(value) {
                if !is_immutable_scalar(&k, longest_str) || !is_immutable_scalar(&v, longest_str) {
                    return None;
                }
            }
        }
        let py = value.py();
        let mut fresh = 0u16;
        let mut len = 0;
        let mut position = DictPosition::default();
        // An object held is one already checked; one replaced is dropped as a `Bound`, which
        // decrements its count without asking whether the GIL is held.
        let replace = |slot: &mut Py<PyAny>, item: Bound<'_, PyAny>| {
            if !is_immutable_scalar(&item, longest_str) {
                return false;
            }
            drop(std::mem::replace(slot, item.unbind()).into_bound(py));
            true
        };
        let none = std::ptr::null_mut();
        loop {
            let same = self
                .entries
                .get(len)
                .map_or((none, none), |h| (h.key.as_ptr(), h.value.as_ptr()));
            let Some((k, v)) = position.next_unless(value, same) else {
                break;
            };
            if len >= fp::SMALL_MAP_ENTRIES {
                return None;
            }
            match self.entries.get_mut(len) {
                Some(held) => {
                    if let Some(k) = k {
                        if !replace(&mut held.key, k) {
                            return None;
                        }
                        fresh |= 1 << len;
                    }
                    if let Some(v) = v {
                        if !replace(&mut held.value, v) {
                            return None;
                        }
                        fresh |= 1 << (len + 8);
                    }
                }
                None => {
                    // Nothing held here: both are owned (a dict's entries are never null).
                    let (Some(k), Some(v)) = (k, v) else {
                        return None;
                    };
                    if !is_immutable_scalar(&k, longest_str) || !is_immutable_scalar(&v, longest_str) {
                        return None;
                    }
                    self.entries.push(Held {
                        key: k.unbind(),
                        value: v.unbind(),
                        key_digest: 0,
                        value_digest: 0,
                        pair_digest: 0,
                    });
                    fresh |= 0x101 << len;
                }
            }
            len += 1;
        }
        self.entries.truncate(len);
        Some(fresh)
    }

    /// Hash the entries `fresh` names and return the dict's digest.
    fn hash_fresh(&mut self, py: Python<'_>, fresh: u16) -> Option<u64> {
        let mut pairs = [0u64; fp::SMALL_MAP_ENTRIES];
        let used = pairs.get_mut(..self.entries.len())?;
        for (at, (slot, held)) in used.iter_mut().zip(&mut self.entries).enumerate() {
            if fresh & (0x101 << at) != 0 {
                if fresh & (1 << at) != 0 {
                    held.key_digest = scalar_digest(held.key.bind(py))?;
                }
                if fresh & (1 << (at + 8)) != 0 {
                    held.value_digest = scalar_digest(held.value.bind(py))?;
                }
                held.pair_digest = fp::hash_pair(held.key_digest, held.value_digest);
            }
            *slot = held.pair_digest;
        }
        fp::hash_map_pairs(used)
    }

    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Whether `value` is a dict yielding, in order, exactly the snapshot's objects. Runs no
    /// Python code (safe under a lock).
    pub fn matches(&self, value: &Bound<'_, PyAny>) -> bool {
        if !value.is_exact_instance_of::<PyDict>() || dict_len(value) != self.entries.len() {
            return false;
        }
        let mut position = DictPosition::default();
        self.entries.iter().all(|held| {
            position
                .next_pointers(value)
                .is_some_and(|(k, v)| k == held.key.as_ptr() && v == held.value.as_ptr())
        })
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Held>()
    }
}

/// Whether `item` is of an exact immutable built-in scalar type (a str of at most
/// `longest_str` code points): the same object then always has the same digest.
pub fn is_immutable_scalar(item: &Bound<'_, PyAny>, longest_str: usize) -> bool {
    if let Exact::Str(string) = exact(item) {
        return longest_str == usize::MAX || str_length(string).is_ok_and(|length| length <= longest_str);
    }
    item.is_none()
        || item.is_exact_instance_of::<PyInt>()
        || item.is_exact_instance_of::<PyFloat>()
        || item.is_exact_instance_of::<PyBool>()
}

/// The digest of None, a bool, an int, a float or a str; `None` for anything else.
fn scalar_digest(item: &Bound<'_, PyAny>) -> Option<u64> {
    // Exact built-in types first: no failed casts on the common path.
    match exact(item) {
        Exact::Str(string) => return Some(str_digest(string)),
        Exact::Int(int) => return Some(int_digest(int)),
        Exact::Float(float) => return Some(fp::hash_f64(float.value())),
        Exact::Other => {}
    }
    if item.is_none() {
        return Some(fp::hash_none());
    }
    if let Ok(boolean) = item.cast::<PyBool>() {
        return Some(fp::hash_bool(boolean.is_true()));
    }
    if let Ok(int) = item.cast::<PyInt>() {
        return Some(int_digest(int));
    }
    if let Ok(float) = item.cast::<PyFloat>() {
        return Some(fp::hash_f64(float.value()));
    }
    if let Ok(string) = item.cast::<PyString>() {
        return Some(str_digest(string));
    }
    None
}

/// Fingerprint of a string (fast path for action types and tool names).
pub fn fingerprint_str(value: &Bound<'_, PyString>) -> u64 {
    str_digest(value)
}

/// Fingerprint of a string already read as UTF-8: the same digest as [`fingerprint_str`].
pub fn fingerprint_utf8(py: Python<'_>, text: &str) -> u64 {
    bytes_digest_with(py, text.as_bytes(), fp::hash_str)
}

#[derive(Clone, Copy)]
enum Kind {
    Seq,
    Map,
    Set,
    Object,
}

enum Source<'py> {
    List(Bound<'py, PyList>, usize),
    Tuple(Bound<'py, PyTuple>, usize),
    Dict {
        dict: Bound<'py, PyDict>,
        position: DictPosition,
        value: Option<Child<'py>>,
    },
    Iter(Bound<'py, PyIterator>),
    /// A typed object: its type name, then its state.
    Pair(Option<Bound<'py, PyAny>>, Option<Bound<'py, PyAny>>),
}

struct Frame<'py> {
    source: Source<'py>,
    kind: Kind,
    start: usize,
    /// Address of the container (or object) this frame walks, for cycle detection.
    id: usize,
    /// The object whose digest this frame computes (the original of a converted mapping).
    object: Bound<'py, PyAny>,
    /// Levels of containers below this one.
    height: usize,
    /// Whether a cycle marker, the depth cap or the re-walk cap stood below this frame (its
    /// digest may then depend on where it stands).
    path_dependent: bool,
}

enum Step<'py> {
    Digest(u64),
    Open(Frame<'py>),
    /// Walk this value in place of the original (a mapping converted to a dict), whose digest
    /// it is.
    Replace(Bound<'py, PyAny>, Bound<'py, PyAny>),
}

/// What the child a frame just received says of the frame's own digest.
enum Below {
    Nothing,
    /// A cycle marker, or a marker for what the walk did not descend into.
    PathDependent,
    /// A reused digest with this many levels of containers below it.
    Reused(usize),
}

fn walk(value: &Bound<'_, PyAny>, walker: &mut Walker, rules: Rules<'_>) -> u64 {
    walker.canon.clear();
    let digest = walk_with(value, walker, rules);
    // Release the objects held for the walk (their addresses may be reused from now on).
    walker.seen.clear();
    digest
}

fn walk_with(value: &Bound<'_, PyAny>, walker: &mut Walker, rules: Rules<'_>) -> u64 {
    let mut frames: Vec<Frame<'_>> = Vec::new();
    let mut pending = Some((value.clone(), None));
    let mut rewalks = 0;
    loop {
        if let Some((item, original)) = pending.take() {
            let (step, below) = classify(&item, original, &frames, walker, &mut rewalks, rules.masked);
            if let Some(parent) = frames.last_mut() {
                match below {
                    Below::Nothing => {}
                    Below::PathDependent => parent.path_dependent = true,
                    Below::Reused(height) => parent.height = parent.height.max(height + 1),
                }
            }
            match step {
                Step::Digest(digest) => walker.canon.push(digest),
                Step::Open(frame) => frames.push(frame),
                Step::Replace(substitute, original) => {
                    pending = Some((substitute, Some(original)));
                    continue;
                }
            }
        }
        let Some(top) = frames.last_mut() else {
            break;
        };
        match next_child(&mut top.source, rules) {
            Some(Child::Object(child)) => pending = Some((child, None)),
            Some(Child::Masked) => walker.canon.push(fp::hash_str(&[volatile::MASK])),
            None => {
                let Some(frame) = frames.pop() else {
                    break;
                };
                let canon = &mut walker.canon;
                let digest = match frame.kind {
                    Kind::Seq => canon.finish_seq(frame.start),
                    Kind::Map => canon.finish_map(frame.start),
                    Kind::Set => canon.finish_set(frame.start),
                    Kind::Object => canon.finish_object(frame.start),
                };
                canon.push(digest);
                if let Some(parent) = frames.last_mut() {
                    parent.height = parent.height.max(frame.height + 1);
                    parent.path_dependent |= frame.path_dependent;
                }
                remember(walker, frame, digest);
            }
        }
    }
    // Exactly one digest is left: the root's.
    walker.canon.pop_root()
}

/// Record a finished container, and its digest if it can be reused anywhere.
fn remember(walker: &mut Walker, frame: Frame<'_>, digest: u64) {
    let reusable = (!frame.path_dependent).then_some((digest, frame.height));
    walker
        .seen
        .entry(frame.object.as_ptr() as usize)
        .and_modify(|seen| seen.reusable = seen.reusable.or(reusable))
        .or_insert_with(|| Seen {
            _object: frame.object.clone().unbind(),
            reusable,
        });
}

/// The digest a container met again has at `depth` (with the levels below it): `Err(true)`
/// when it was walked before but its digest cannot be reused here, `Err(false)` when it is
/// new to this walk.
fn reuse(walker: &Walker, id: usize, depth: usize) -> Result<(u64, usize), bool> {
    match walker.seen.get(&id) {
        None => Err(false),
        Some(Seen {
            reusable: Some((digest, height)),
            ..
        }) if depth + height < MAX_DEPTH => Ok((*digest, *height)),
        Some(_) => Err(true),
    }
}

/// What a container yields next: an object to walk, or a value masked whole.
enum Child<'py> {
    Object(Bound<'py, PyAny>),
    Masked,
}

fn next_child<'py>(source: &mut Source<'py>, rules: Rules<'_>) -> Option<Child<'py>> {
    let item = match source {
        // Bounds are checked first: an out-of-range `get_item` builds an IndexError.
        Source::List(list, index) => {
            if *index >= list.len() {
                return None;
            }
            let item = list.get_item(*index).ok()?;
            *index += 1;
            item
        }
        Source::Tuple(tuple, index) => {
            if *index >= tuple.len() {
                return None;
            }
            let item = tuple.get_item(*index).ok()?;
            *index += 1;
            item
        }
        Source::Dict { dict, position, value } => {
            if let Some(pending_value) = value.take() {
                return Some(pending_value);
            }
            // A dict mutated meanwhile (by code a nested walk runs) is read as it is then.
            loop {
                let (key, val) = position.next(dict.as_any())?;
                if rules.skip.is_some_and(|skip| skip(&key)) {
                    continue;
                }
                *value = Some(if rules.masked && masks_whole(&key, &val) {
                    Child::Masked
                } else {
                    Child::Object(val)
                });
                break key;
            }
        }
        // A set changed during iteration raises; the walk ends that set there.
        Source::Iter(iter) => iter.next().and_then(Result::ok)?,
        Source::Pair(first, second) => first.take().or_else(|| second.take())?,
    };
    Some(Child::Object(item))
}

fn classify<'py>(
    item: &Bound<'py, PyAny>,
    original: Option<Bound<'py, PyAny>>,
    frames: &[Frame<'py>],
    walker: &Walker,
    rewalks: &mut usize,
    masked: bool,
) -> (Step<'py>, Below) {
    let digest = |digest| (Step::Digest(digest), Below::Nothing);
    if let Some(value) = masked.then(|| masked_str_digest(item)).flatten() {
        return digest(value);
    }
    if let Some(value) = scalar_digest(item) {
        return digest(value);
    }
    if let Ok(bytes) = item.cast::<PyBytes>() {
        return digest(bytes_digest(item.py(), bytes.as_bytes()));
    }
    if let Ok(array) = item.cast::<PyByteArray>() {
        return digest(hash_bytearray(array, fp::hash_bytes));
    }
    let depth = frames.len();
    let id = item.as_ptr() as usize;
    // The open frames are the current path (at most MAX_DEPTH of them): a linear scan is
    // cheaper than maintaining a hash set for the usual shallow values.
    if let Some(distance) = frames.iter().rev().position(|f| f.id == id) {
        return (Step::Digest(fp::hash_cycle(distance as u64)), Below::PathDependent);
    }
    let container = item.is_instance_of::<PyDict>()
        || item.is_instance_of::<PyList>()
        || item.is_instance_of::<PyTuple>()
        || item.is_instance_of::<PySet>()
        || item.is_instance_of::<PyFrozenSet>();
    // No numpy scalar is a container: a container skips the look at its type's module (an
    // attribute read, about 200 instructions).
    if !container {
        if let Some(value) = numpy_scalar_digest(item) {
            return digest(value);
        }
    }
    let object = original.unwrap_or_else(|| item.clone());
    match reuse(walker, object.as_ptr() as usize, depth) {
        Ok((value, height)) => return (Step::Digest(value), Below::Reused(height)),
        Err(true) => {
            *rewalks += 1;
            if *rewalks > MAX_REWALKS {
                return (Step::Digest(fp::hash_too_deep()), Below::PathDependent);
            }
        }
        Err(false) => {}
    }
    if depth >= MAX_DEPTH {
        return (Step::Digest(fp::hash_too_deep()), Below::PathDependent);
    }
    let start = walker.canon.mark();
    let frame = |source, kind, object| {
        (
            Step::Open(Frame {
                source,
                kind,
                start,
                id,
                object,
                height: 0,
                path_dependent: false,
            }),
            Below::Nothing,
        )
    };
    if container {
        if let Ok(dict) = item.cast::<PyDict>() {
            return frame(
                Source::Dict {
                    dict: dict.clone(),
                    position: DictPosition::default(),
                    value: None,
                },
                Kind::Map,
                object,
            );
        }
        if let Ok(list) = item.cast::<PyList>() {
            return frame(Source::List(list.clone(), 0), Kind::Seq, object);
        }
        if let Ok(tuple) = item.cast::<PyTuple>() {
            return frame(Source::Tuple(tuple.clone(), 0), Kind::Seq, object);
        }
        return match set_entries(item) {
            Ok(iter) => frame(Source::Iter(iter), Kind::Set, object),
            Err(_) => digest(opaque_digest(item)),
        };
    }
    match object_state(item) {
        ObjectState::Mapping(dict) => (Step::Replace(dict, object), Below::Nothing),
        ObjectState::Typed(type_name, state) => frame(Source::Pair(Some(type_name), Some(state)), Kind::Object, object),
        ObjectState::Opaque => digest(opaque_digest(item)),
    }
}

static SET_ITERS: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// An iterator over the entries a set or frozenset (or a subclass) holds: `set.__iter__`
/// (or `frozenset.__iter__`) itself, since a subclass's `__iter__` could yield anything, or
/// never end.
fn set_entries<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyIterator>> {
    let py = item.py();
    let (set_iter, frozenset_iter) = SET_ITERS.get_or_try_init(py, || -> PyResult<_> {
        Ok((
            py.get_type::<PySet>().getattr("__iter__")?.unbind(),
            py.get_type::<PyFrozenSet>().getattr("__iter__")?.unbind(),
        ))
    })?;
    let iter = if item.is_instance_of::<PySet>() {
        set_iter
    } else {
        frozenset_iter
    };
    Ok(iter.bind(py).call1((item,))?.cast_into::<PyIterator>()?)
}

static NUMPY_SCALARS: PyOnceLock<(Py<PyType>, Py<PyType>, Py<PyType>)> = PyOnceLock::new();

/// A numpy integer, bool or floating scalar hashes as the Python int, bool or float it
/// equals (`np.int64(5)` as `5`). numpy is only looked at once the caller has imported it.
fn numpy_scalar_digest(item: &Bound<'_, PyAny>) -> Option<u64> {
    let py = item.py();
    let module = item.get_type().module().ok()?;
    if !module.to_str().ok()?.starts_with("numpy") {
        return None;
    }
    let (integer, boolean, floating) = NUMPY_SCALARS
        .get_or_try_init(py, || -> PyResult<_> {
            let numpy = py.import("numpy")?;
            let ty = |name: &str| -> PyResult<Py<PyType>> { Ok(numpy.getattr(name)?.cast_into::<PyType>()?.unbind()) };
            Ok((ty("integer")?, ty("bool_")?, ty("floating")?))
        })
        .ok()?;
    if item.is_instance(boolean.bind(py)).ok()? {
        return Some(fp::hash_bool(item.is_truthy().ok()?));
    }
    if item.is_instance(integer.bind(py)).ok()? {
        return Some(int_digest(&number_index(item).ok()?));
    }
    if item.is_instance(floating.bind(py)).ok()? {
        return Some(fp::hash_f64(number_float(item).ok()?.value()));
    }
    None
}

enum ObjectState<'py> {
    Mapping(Bound<'py, PyAny>),
    Typed(Bound<'py, PyAny>, Bound<'py, PyAny>),
    Opaque,
}

static DATACLASS_FIELDS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static MAPPING_ABC: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The state an object hashes by (see the fallback order in docs/fingerprint.md). Errors raised by user
/// code here are swallowed on purpose: hashing must never raise.
fn object_state<'py>(item: &Bound<'py, PyAny>) -> ObjectState<'py> {
    let py = item.py();
    if item.is_instance_of::<PyType>() {
        return ObjectState::Opaque;
    }
    let type_name = || item.get_type().fully_qualified_name().map(Bound::into_any);
    let typed = |state: PyResult<Bound<'py, PyAny>>| match (type_name(), state) {
        (Ok(name), Ok(state)) => ObjectState::Typed(name, state),
        _ => ObjectState::Opaque,
    };
    if item.get_type().hasattr("__dataclass_fields__").unwrap_or(false) {
        return typed(dataclass_state(item));
    }
    if let Ok(dump) = item.getattr("model_dump") {
        if dump.is_callable() {
            return typed(dump.call0());
        }
    }
    if let Ok(mapping) = MAPPING_ABC.import(py, "collections.abc", "Mapping") {
        if item.is_instance(mapping).unwrap_or(false) {
            return dict_of(item).map_or(ObjectState::Opaque, ObjectState::Mapping);
        }
    }
    typed(reduce_state(item))
}

fn dict_of<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(item.py());
    dict.call_method1("update", (item,))?;
    Ok(dict.into_any())
}

/// `{field name: value}` for the dataclass's fields.
fn dataclass_state<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = item.py();
    let fields = DATACLASS_FIELDS.import(py, "dataclasses", "fields")?.call1((item,))?;
    let state = PyDict::new(py);
    for field in fields.try_iter()? {
        let name = field?.getattr("name")?;
        state.set_item(&name, item.getattr(name.cast::<PyString>()?)?)?;
    }
    Ok(state.into_any())
}

/// What pickling would keep: `__reduce_ex__(4)`'s arguments and state, or its global name.
fn reduce_state<'py>(item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let reduced = item.call_method1("__reduce_ex__", (4,))?;
    if reduced.is_instance_of::<PyString>() {
        return Ok(reduced);
    }
    let parts = reduced.cast::<PyTuple>()?;
    let args = parts.get_item(1)?;
    let state = parts
        .get_item(2)
        .unwrap_or_else(|_| item.py().None().into_bound(item.py()));
    Ok(PyTuple::new(item.py(), [args, state])?.into_any())
}

fn opaque_digest(item: &Bound<'_, PyAny>) -> u64 {
    let name = if let Ok(ty) = item.cast::<PyType>() {
        ty.fully_qualified_name()
    } else {
        item.get_type().fully_qualified_name()
    };
    match name {
        Ok(name) => fp::hash_opaque(name.to_string().as_bytes()),
        Err(_) => fp::hash_opaque(b""),
    }
}

static INT_METHODS: PyOnceLock<(Py<PyAny>, Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn int_digest(int: &Bound<'_, PyInt>) -> u64 {
    if let Ok(small) = int.extract::<i64>() {
        return fp::hash_i64(small);
    }
    // Beyond 64 bits: sign and magnitude bytes from `int`'s own methods (a subclass's
    // overrides are not asked).
    let py = int.py();
    let magnitude = INT_METHODS
        .get_or_try_init(py, || -> PyResult<_> {
            let ty = py.get_type::<PyInt>();
            Ok((
                ty.getattr("__abs__")?.unbind(),
                ty.getattr("bit_length")?.unbind(),
                ty.getattr("to_bytes")?.unbind(),
            ))
        })
        .and_then(|(abs, bit_length, to_bytes)| {
            let abs = abs.bind(py).call1((int,))?;
            let bits: usize = bit_length.bind(py).call1((&abs,))?.extract()?;
            to_bytes
                .bind(py)
                .call1((&abs, bits.div_ceil(8).max(1), "little"))?
                .extract::<Vec<u8>>()
        });
    match magnitude {
        Ok(bytes) => fp::hash_int_magnitude(is_huge_negative(int), &bytes),
        Err(_) => fp::hash_opaque(b"builtins.int"),
    }
}

fn str_digest(string: &Bound<'_, PyString>) -> u64 {
    str_digest_of_length(string, str_length(string).unwrap_or(0))
}

/// [`fingerprint`] of `value`, and whether it is an immutable scalar a memo may keep
/// ([`is_immutable_scalar`] with `longest_str`): a str (the usual result) has its length read
/// once for both.
pub fn fingerprint_memoizable(value: &Bound<'_, PyAny>, longest_str: usize) -> (u64, bool) {
    match value.cast_exact::<PyString>() {
        Ok(text) => {
            let length = str_length(text).ok();
            let memoizable = length.is_some_and(|length| length <= longest_str);
            (str_digest_of_length(text, length.unwrap_or(0)), memoizable)
        }
        Err(_) => (fingerprint(value), is_immutable_scalar(value, longest_str)),
    }
}

/// [`str_digest`] of a str whose length (in code points) the caller has read already.
fn str_digest_of_length(string: &Bound<'_, PyString>, length: usize) -> u64 {
    let py = string.py();
    if length >= STR_PIECE && !is_ascii(string).unwrap_or(true) {
        return long_str_digest(string, length).unwrap_or_else(|_| fp::hash_opaque(b"builtins.str"));
    }
    match string.to_str() {
        Ok(text) => fingerprint_utf8(py, text),
        // Lone surrogates: hash the surrogatepass encoding (identical to UTF-8 elsewhere).
        Err(_) => match surrogatepass(string) {
            Ok(bytes) => fp::hash_str(bytes.as_bytes()),
            Err(_) => fp::hash_opaque(b"builtins.str"),
        },
    }
}

/// A long non-ASCII str hashed from its UTF-8 (surrogatepass) encoding, one `STR_PIECE` of
/// code points at a time: the peak is one piece's bytes, and no UTF-8 copy stays on the str.
fn long_str_digest(string: &Bound<'_, PyString>, length: usize) -> PyResult<u64> {
    let py = string.py();
    let mut hasher = fp::TaggedHasher::new(fp::tag::STR);
    let mut start = 0;
    while start < length {
        let end = length.min(start + STR_PIECE);
        let encoded = surrogatepass(&substring(string, start, end)?)?;
        let bytes = encoded.as_bytes();
        // Between pieces other threads may run (the bytes object is immutable and held).
        py.detach(|| hasher.update(bytes));
        start = end;
    }
    Ok(hasher.digest())
}

fn bytes_digest(py: Python<'_>, data: &[u8]) -> u64 {
    bytes_digest_with(py, data, fp::hash_bytes)
}

fn bytes_digest_with(py: Python<'_>, data: &[u8], hash: fn(&[u8]) -> u64) -> u64 {
    if data.len() >= HASH_DETACH_THRESHOLD {
        py.detach(|| hash(data))
    } else {
        hash(data)
    }
}

/// Containers deeper than this are sketched as one feature, their fingerprint.
pub const SKETCH_DEPTH: usize = 8;

/// Values one sketch walk visits at most (containers and leaves); the rest are left out, so a
/// container holding itself many times costs a bounded walk.
pub const SKETCH_ITEMS: usize = 4096;

/// [`fingerprint`] of an action's arguments and their [`sketch_arguments`], in one pass over
/// the common value, a small dict of scalars (each key and value is read once); anything else
/// gets the two apart. Returns the digest and the first string argument.
pub fn fingerprint_and_sketch<'py>(
    value: &Bound<'py, PyAny>,
    sketch: &mut Sketch,
) -> (u64, Option<Bound<'py, PyString>>) {
    if let Some(found) = flat_dict_digest_and_sketch(value, sketch) {
        return found;
    }
    *sketch = Sketch::EMPTY;
    let digest = fingerprint(value);
    (digest, sketch_arguments(value, sketch))
}

/// [`flat_dict_digest`] that also sketches the entries; `None` (the sketch partly fed) when
/// the value is not a small dict of scalars.
fn flat_dict_digest_and_sketch<'py>(
    value: &Bound<'py, PyAny>,
    sketch: &mut Sketch,
) -> Option<(u64, Option<Bound<'py, PyString>>)> {
    let dict = value.cast::<PyDict>().ok()?;
    if dict.len() > fp::SMALL_MAP_ENTRIES {
        return None;
    }
    let mut pairs = [0u64; fp::SMALL_MAP_ENTRIES];
    let mut used = 0;
    let mut first_string = None;
    let mut position = DictPosition::default();
    while let Some((key, value)) = position.next(dict.as_any()) {
        let slot = pairs.get_mut(used)?;
        let key_digest = scalar_digest(&key)?;
        let (value_digest, string) = scalar_digest_and_sketch(&value, key_digest, sketch)?;
        *slot = fp::hash_pair(key_digest, value_digest);
        used += 1;
        if let Some(string) = string {
            first_string.get_or_insert(string);
        }
    }
    Some((fp::hash_map_pairs(pairs.get_mut(..used)?)?, first_string))
}

/// [`scalar_digest`] and [`sketch_scalar`] of one value, reading an exact str or number once;
/// `None` (nothing sketched) for a value that is no scalar.
fn scalar_digest_and_sketch<'py>(
    item: &Bound<'py, PyAny>,
    context: u64,
    sketch: &mut Sketch,
) -> Option<(u64, Option<Bound<'py, PyString>>)> {
    match exact(item) {
        Exact::Str(string) => {
            // Short or ASCII text is read once for both (as `str_digest` reads it).
            if str_length(string).is_ok_and(|length| length < STR_PIECE) {
                if let Ok(text) = string.to_str() {
                    fp::feed_text(context, text.as_bytes(), sketch);
                    return Some((fingerprint_utf8(item.py(), text), Some(string.clone())));
                }
            }
        }
        Exact::Int(int) => {
            sketch.add(context, fp::NUMBER_FEATURE);
            return Some((int_digest(int), None));
        }
        Exact::Float(float) => {
            sketch.add(context, fp::NUMBER_FEATURE);
            return Some((fp::hash_f64(float.value()), None));
        }
        Exact::Other => {}
    }
    let digest = scalar_digest(item)?;
    Some((digest, sketch_scalar(item, context, digest, sketch)))
}

/// Sketch a scalar whose fingerprint is `digest` (see [`sketch_arguments`]); returns it when
/// it is a str.
fn sketch_scalar<'py>(
    item: &Bound<'py, PyAny>,
    context: u64,
    digest: u64,
    sketch: &mut Sketch,
) -> Option<Bound<'py, PyString>> {
    // Exact built-in types first, as `scalar_digest` does.
    let string = match exact(item) {
        Exact::Int(_) | Exact::Float(_) => {
            sketch.add(context, fp::NUMBER_FEATURE);
            return None;
        }
        Exact::Str(string) => Some(string.clone()),
        Exact::Other => item.cast::<PyString>().ok().cloned(),
    };
    match string {
        Some(string) => {
            sketch_str(&string, context, sketch);
            Some(string)
        }
        None if !item.is_instance_of::<PyBool>()
            && (item.is_instance_of::<PyInt>() || item.is_instance_of::<PyFloat>()) =>
        {
            sketch.add(context, fp::NUMBER_FEATURE);
            None
        }
        None => {
            sketch.add(context, digest);
            None
        }
    }
}

/// The [`Sketch`] of an action's arguments (their features are in docs/session.md): a string
/// gives the features of its text, a number one feature whatever its value, any other leaf
/// its fingerprint, each under the digest of the mapping key it sits under (sequence items
/// take their sequence's). Returns the first string argument (at the top level, in order),
/// to name the action in descriptions. Never raises; runs Python code only where the
/// fingerprint of a key or a leaf does.
pub fn sketch_arguments<'py>(value: &Bound<'py, PyAny>, sketch: &mut Sketch) -> Option<Bound<'py, PyString>> {
    let mut walk = SketchWalk {
        sketch,
        nested: Vec::new(),
        budget: SKETCH_ITEMS,
        first_string: None,
    };
    walk.visit(value, fp::SKETCH_ROOT, 0);
    while let Some((item, context, depth)) = walk.nested.pop() {
        walk.visit(&item, context, depth);
    }
    walk.first_string
}

struct SketchWalk<'s, 'py> {
    sketch: &'s mut Sketch,
    /// Containers met below the top level, still to visit (never allocated for flat values).
    nested: Vec<(Bound<'py, PyAny>, u64, usize)>,
    budget: usize,
    first_string: Option<Bound<'py, PyString>>,
}

impl<'py> SketchWalk<'_, 'py> {
    fn visit(&mut self, item: &Bound<'py, PyAny>, context: u64, depth: usize) {
        if self.leaf(item, context) {
            return;
        }
        if depth >= SKETCH_DEPTH {
            self.sketch.add(context, fingerprint(item));
            return;
        }
        if let Ok(dict) = item.cast::<PyDict>() {
            let mut position = DictPosition::default();
            // A key's fingerprint may run Python code that mutates the dict.
            while let Some((key, value)) = position.next(dict.as_any()) {
                if !self.spend() {
                    return;
                }
                let key_context = fingerprint(&key);
                if !self.leaf(&value, key_context) {
                    self.nested.push((value, key_context, depth + 1));
                }
            }
        } else if let Ok(list) = item.cast::<PyList>() {
            let mut index = 0;
            // Bounds first: the list may change while its items are visited.
            while index < list.len() && self.spend() {
                if let Ok(child) = list.get_item(index) {
                    if !self.leaf(&child, context) {
                        self.nested.push((child, context, depth + 1));
                    }
                }
                index += 1;
            }
        } else if let Ok(tuple) = item.cast::<PyTuple>() {
            for child in tuple.iter() {
                if !self.spend() {
                    return;
                }
                if !self.leaf(&child, context) {
                    self.nested.push((child, context, depth + 1));
                }
            }
        } else {
            self.sketch.add(context, fingerprint(item));
        }
    }

    /// Sketch `item` if it is no dict, list or tuple; false when it is one.
    fn leaf(&mut self, item: &Bound<'py, PyAny>, context: u64) -> bool {
        if let Some(digest) = scalar_digest(item) {
            if let Some(string) = sketch_scalar(item, context, digest, self.sketch) {
                self.first_string.get_or_insert(string);
            }
            return true;
        }
        if item.is_instance_of::<PyDict>() || item.is_instance_of::<PyList>() || item.is_instance_of::<PyTuple>() {
            return false;
        }
        self.sketch.add(context, fingerprint(item));
        true
    }

    fn spend(&mut self) -> bool {
        self.budget = self.budget.saturating_sub(1);
        self.budget > 0
    }
}

/// Feed a str's text features: its UTF-8 encoding (lone surrogates as `surrogatepass`
/// encodes them), read a `STR_PIECE` of code points at a time when it is long and not ASCII.
fn sketch_str(string: &Bound<'_, PyString>, context: u64, sketch: &mut Sketch) {
    let length = str_length(string).unwrap_or(0);
    if length >= STR_PIECE && !is_ascii(string).unwrap_or(true) {
        let mut features = TextFeatures::new(context);
        let mut start = 0;
        while start < length {
            let end = length.min(start + STR_PIECE);
            if let Ok(encoded) = substring(string, start, end).and_then(|piece| surrogatepass(&piece)) {
                features.feed(encoded.as_bytes(), sketch);
            }
            start = end;
        }
        features.finish(sketch);
    } else if let Ok(text) = string.to_str() {
        fp::feed_text(context, text.as_bytes(), sketch);
    } else if let Ok(encoded) = surrogatepass(string) {
        fp::feed_text(context, encoded.as_bytes(), sketch);
    }
}

/// Code points of a long non-ASCII str [`str_preview`] reads.
const PREVIEW_CODE_POINTS: usize = 64;

/// The beginning of a str, to name what it holds: its own UTF-8 (no copy for ASCII, and the
/// one the fingerprint already made for a short str), or the UTF-8 of its first code points
/// when it is long and not ASCII (no UTF-8 copy of the whole is kept on the str). Empty when
/// it cannot be encoded (lone surrogates).
pub fn str_preview<'a>(string: &'a Bound<'_, PyString>) -> Cow<'a, str> {
    let length = str_length(string).unwrap_or(0);
    if length >= STR_PIECE && !is_ascii(string).unwrap_or(true) {
        return substring(string, 0, PREVIEW_CODE_POINTS)
            .ok()
            .and_then(|piece| piece.to_str().ok().map(str::to_owned))
            .map_or(Cow::Borrowed(""), Cow::Owned);
    }
    string.to_str().map_or(Cow::Borrowed(""), Cow::Borrowed)
}
