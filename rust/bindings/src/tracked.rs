//! A detector's state behind its lock, with a mark of the snapshot it was last saved to or
//! restored from. Any mutable access clears the mark, so while it stands the state is that
//! snapshot's: a store's update keeps the snapshot's bytes for the detector a hook left
//! alone instead of encoding the same state again ("only the detector that changed is
//! written").

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};

use doomloop_engine::snapshot::{resealed_with_f64, sealed_checksum};

/// Which snapshot a state is: its checksum, and the offset in it of a clock reading (the
/// session detector's elapsed time), the one field that moves while the state stands still.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    checksum: u64,
    clock_at: Option<usize>,
}

impl Mark {
    /// The mark of the sealed snapshot `data` (None: not a sealed snapshot).
    pub(crate) fn of(data: &[u8], clock_at: Option<usize>) -> Option<Mark> {
        sealed_checksum(data).map(|checksum| Mark { checksum, clock_at })
    }
}

pub(crate) struct Tracked<T> {
    value: T,
    mark: Option<Mark>,
}

impl<T> Tracked<T> {
    pub(crate) fn new(value: T) -> Self {
        Tracked { value, mark: None }
    }

    /// Note that the state is now the snapshot `mark` describes (one it was saved to or
    /// restored from).
    pub(crate) fn mark(this: &mut Self, mark: Option<Mark>) {
        this.mark = mark;
    }

    /// The state restored from a snapshot, marked with it.
    pub(crate) fn restored(this: &mut Self, value: T, mark: Option<Mark>) {
        this.value = value;
        this.mark = mark;
    }

    /// `part`, the snapshot this state is marked with, as a snapshot taken now: the same
    /// bytes, or with the clock reading `clock` gives written in and the checksum made anew.
    /// None when the state is not `part`'s (changed since, or another snapshot's): encode it.
    pub(crate) fn unchanged_snapshot<'a>(
        this: &mut Self,
        part: &'a [u8],
        clock: impl FnOnce(&T) -> f64,
    ) -> Option<Cow<'a, [u8]>> {
        let mark = this.mark?;
        if sealed_checksum(part) != Some(mark.checksum) {
            return None;
        }
        let Some(at) = mark.clock_at else {
            return Some(Cow::Borrowed(part));
        };
        let resealed = resealed_with_f64(part, at, clock(&this.value))?;
        this.mark = Mark::of(&resealed, Some(at));
        Some(Cow::Owned(resealed))
    }
}

impl<T> Deref for Tracked<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Tracked<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.mark = None;
        &mut self.value
    }
}
