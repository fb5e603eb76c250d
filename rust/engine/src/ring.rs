//! A fixed-capacity ring buffer: the newest `capacity` items, indexed back from the newest.

#[derive(Clone, Debug)]
pub struct Ring<T> {
    items: Vec<T>,
    capacity: usize,
    /// Index in `items` where the next push goes once the buffer is full.
    next: usize,
}

impl<T> Ring<T> {
    /// A ring holding at most `capacity` items (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Ring {
            // Grown on demand: a large configured capacity costs nothing until it is used.
            items: Vec::with_capacity(capacity.min(64)),
            capacity,
            next: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Append, overwriting the oldest item when full.
    pub fn push(&mut self, item: T) {
        if self.items.len() < self.capacity {
            let len = self.items.len();
            if len == self.items.capacity() {
                // Double as `Vec` would, but never past `capacity`: left to `Vec`, a ring of
                // 100 grew a buffer of 128 (one of 10,000, 16,384), more than the `capacity`
                // items its owners report as its heap (`ToolLoopSession::heap_bytes`).
                self.items.reserve_exact(len.max(4).min(self.capacity - len));
            }
            self.items.push(item);
        } else {
            self.items[self.next] = item;
        }
        // `next < capacity`: a comparison, not a division, on every push.
        self.next += 1;
        if self.next == self.capacity {
            self.next = 0;
        }
    }

    /// Index in `items` of the item `back` places before the newest (`back < len()`): the
    /// newest is just before `next`, the rest wrap around to the end once the buffer is full.
    #[inline]
    fn index_back(&self, back: usize) -> usize {
        if back < self.next {
            self.next - 1 - back
        } else {
            self.next + self.capacity - 1 - back
        }
    }

    /// The item `back` places before the newest (`back(0)` is the newest).
    pub fn back(&self, back: usize) -> Option<&T> {
        if back >= self.items.len() {
            return None;
        }
        self.items.get(self.index_back(back))
    }

    /// Mutable access to the item `back` places before the newest.
    pub fn back_mut(&mut self, back: usize) -> Option<&mut T> {
        if back >= self.items.len() {
            return None;
        }
        let index = self.index_back(back);
        self.items.get_mut(index)
    }

    /// Items from newest to oldest.
    pub fn iter_newest_first(&self) -> impl Iterator<Item = &T> + '_ {
        let [newer, older] = self.halves();
        newer.iter().rev().chain(older.iter().rev())
    }

    /// The items as two slices, each oldest to newest, the newer half first: walking both in
    /// reverse visits newest to oldest with no per-item modulo or chain step (for hot scans).
    pub fn halves(&self) -> [&[T]; 2] {
        // Before `next` are the newest items, from `next` on the oldest (that part is empty
        // until the buffer has wrapped).
        let split = if self.items.len() < self.capacity {
            self.items.len()
        } else {
            self.next
        };
        let (newer, older) = self.items.split_at(split.min(self.items.len()));
        [newer, older]
    }

    pub fn clear(&mut self) {
        self.items.clear();
        self.next = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn keeps_the_newest_items() {
        let mut ring = Ring::new(3);
        assert!(ring.is_empty());
        assert_eq!(ring.back(0), None);
        for i in 0..5 {
            ring.push(i);
        }
        assert_eq!(ring.len(), 3);
        assert_eq!(ring.iter_newest_first().copied().collect::<Vec<_>>(), vec![4, 3, 2]);
        assert_eq!(ring.back(2), Some(&2));
        assert_eq!(ring.back(3), None);
        *ring.back_mut(0).unwrap() = 40;
        assert_eq!(ring.back(0), Some(&40));
        ring.clear();
        assert!(ring.is_empty());
        ring.push(7);
        assert_eq!(ring.back(0), Some(&7));
    }

    #[test]
    fn iteration_agrees_with_back_at_every_fill_level() {
        let mut ring = Ring::new(4);
        for i in 0..11 {
            let by_back: Vec<_> = (0..ring.len()).filter_map(|b| ring.back(b).copied()).collect();
            assert_eq!(ring.iter_newest_first().copied().collect::<Vec<_>>(), by_back);
            let [newer, older] = ring.halves();
            let by_halves: Vec<_> = newer.iter().rev().chain(older.iter().rev()).copied().collect();
            assert_eq!(by_halves, by_back);
            ring.push(i);
        }
    }

    #[test]
    fn the_buffer_never_outgrows_the_capacity() {
        for capacity in [1, 3, 5, 64, 65, 67, 100, 1000] {
            let mut ring = Ring::new(capacity);
            for i in 0..2 * capacity {
                ring.push(i);
                assert!(
                    ring.items.capacity() <= capacity,
                    "{capacity}: {}",
                    ring.items.capacity()
                );
            }
            assert_eq!(ring.len(), capacity);
            assert_eq!(ring.back(0), Some(&(2 * capacity - 1)));
        }
    }

    #[test]
    fn zero_capacity_is_one() {
        let mut ring = Ring::new(0);
        ring.push(1);
        ring.push(2);
        assert_eq!(ring.capacity(), 1);
        assert_eq!(ring.iter_newest_first().copied().collect::<Vec<_>>(), vec![2]);
    }
}
