//! A map whose entries expire when idle and whose least recently used entry goes first past a
//! size bound: the session table of a gateway. The caller hashes its keys and keeps each key
//! in its value (so a key is stored once, and compared by the caller, who knows its type).
//!
//! Entries live in a slab of slots linked from the least to the most recently used; a hash
//! index maps each hash to its newest slot, and slots with the same hash chain. Every
//! operation is O(1) but the sweeps, which stop at the first entry still within its TTL.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::names::DigestHasher;

/// No slot.
const NIL: u32 = u32::MAX;

/// Where an entry lives while it stays in the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotId(u32);

#[derive(Debug)]
struct Slot<V> {
    /// `None` while the slot is free.
    value: Option<V>,
    hash: u64,
    touched: f64,
    older: u32,
    newer: u32,
    /// The next slot whose entry has the same hash.
    same_hash: u32,
}

#[derive(Debug)]
pub struct IdleMap<V> {
    slots: Vec<Slot<V>>,
    index: HashMap<u64, u32, BuildHasherDefault<DigestHasher>>,
    free: Vec<u32>,
    oldest: u32,
    newest: u32,
    len: usize,
}

impl<V> Default for IdleMap<V> {
    fn default() -> Self {
        IdleMap {
            slots: Vec::new(),
            index: HashMap::default(),
            free: Vec::new(),
            oldest: NIL,
            newest: NIL,
            len: 0,
        }
    }
}

impl<V> IdleMap<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry with this hash whose value `is_key` accepts.
    pub fn find(&self, hash: u64, mut is_key: impl FnMut(&V) -> bool) -> Option<SlotId> {
        let mut at = self.index.get(&hash).copied().unwrap_or(NIL);
        while let Some(slot) = self.slots.get(at as usize) {
            if slot.value.as_ref().is_some_and(&mut is_key) {
                return Some(SlotId(at));
            }
            at = slot.same_hash;
        }
        None
    }

    /// The entry's value and when it was last used.
    pub fn get(&self, id: SlotId) -> Option<(&V, f64)> {
        let slot = self.slots.get(id.0 as usize)?;
        Some((slot.value.as_ref()?, slot.touched))
    }

    /// Mark the entry used at `now`: it becomes the most recently used.
    pub fn touch(&mut self, id: SlotId, now: f64) {
        if self.get(id).is_none() {
            return;
        }
        self.unlink(id.0);
        self.link_newest(id.0);
        self.slots[id.0 as usize].touched = now;
    }

    /// Add an entry used at `now` (the caller has found no entry with its key).
    pub fn insert(&mut self, hash: u64, value: V, now: f64) -> SlotId {
        let same_hash = self.index.get(&hash).copied().unwrap_or(NIL);
        let slot = Slot {
            value: Some(value),
            hash,
            touched: now,
            older: NIL,
            newer: NIL,
            same_hash,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.slots[at as usize] = slot;
                at
            }
            None => {
                // More than u32::MAX - 1 entries would not fit in memory anyway.
                let at = u32::try_from(self.slots.len()).unwrap_or(NIL - 1);
                self.slots.push(slot);
                at
            }
        };
        self.index.insert(hash, at);
        self.link_newest(at);
        self.len += 1;
        SlotId(at)
    }

    /// Take the entry out of the map.
    pub fn remove(&mut self, id: SlotId) -> Option<V> {
        let at = id.0;
        let slot = self.slots.get_mut(at as usize)?;
        let value = slot.value.take()?;
        let (hash, next) = (slot.hash, slot.same_hash);
        // Unchain it from the entries with its hash.
        if self.index.get(&hash) == Some(&at) {
            if next == NIL {
                self.index.remove(&hash);
            } else {
                self.index.insert(hash, next);
            }
        } else {
            let mut prev = self.index.get(&hash).copied().unwrap_or(NIL);
            while let Some(slot) = self.slots.get_mut(prev as usize) {
                if slot.same_hash == at {
                    slot.same_hash = next;
                    break;
                }
                prev = slot.same_hash;
            }
        }
        self.unlink(at);
        self.free.push(at);
        self.len -= 1;
        if self.len == 0 {
            // An emptied map gives its memory back.
            *self = IdleMap::default();
        }
        Some(value)
    }

    /// Remove the entries idle for longer than `ttl` at `now` (least recently used first)
    /// into `out`; returns how many.
    pub fn expire(&mut self, now: f64, ttl: f64, out: &mut Vec<V>) -> u64 {
        let mut removed = 0;
        while let Some(oldest) = self.slots.get(self.oldest as usize) {
            if now - oldest.touched <= ttl {
                break;
            }
            let Some(value) = self.remove(SlotId(self.oldest)) else {
                break;
            };
            out.push(value);
            removed += 1;
        }
        removed
    }

    /// Remove the least recently used entries until at most `max` are left, into `out`;
    /// returns how many.
    pub fn evict_over(&mut self, max: usize, out: &mut Vec<V>) -> u64 {
        let mut removed = 0;
        while self.len > max {
            let Some(value) = self.remove(SlotId(self.oldest)) else {
                break;
            };
            out.push(value);
            removed += 1;
        }
        removed
    }

    /// The values from the least to the most recently used.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        let mut at = self.oldest;
        std::iter::from_fn(move || {
            let slot = self.slots.get(at as usize)?;
            at = slot.newer;
            slot.value.as_ref()
        })
    }

    /// Take every entry out.
    pub fn drain(&mut self) -> Vec<V> {
        let values = self.slots.drain(..).filter_map(|slot| slot.value).collect();
        *self = IdleMap::default();
        values
    }

    fn unlink(&mut self, at: u32) {
        let (older, newer) = match self.slots.get(at as usize) {
            Some(slot) => (slot.older, slot.newer),
            None => return,
        };
        match self.slots.get_mut(older as usize) {
            Some(slot) => slot.newer = newer,
            None => self.oldest = newer,
        }
        match self.slots.get_mut(newer as usize) {
            Some(slot) => slot.older = older,
            None => self.newest = older,
        }
    }

    fn link_newest(&mut self, at: u32) {
        let newest = self.newest;
        if let Some(slot) = self.slots.get_mut(at as usize) {
            slot.older = newest;
            slot.newer = NIL;
        }
        match self.slots.get_mut(newest as usize) {
            Some(slot) => slot.newer = at,
            None => self.oldest = at,
        }
        self.newest = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(map: &IdleMap<(u64, &'static str)>, hash: u64, key: &str) -> Option<SlotId> {
        map.find(hash, |v| v.1 == key)
    }

    fn keys(map: &IdleMap<(u64, &'static str)>) -> Vec<&'static str> {
        map.values().map(|v| v.1).collect()
    }

    #[test]
    fn entries_are_found_touched_and_kept_in_order_of_use() {
        let mut map = IdleMap::default();
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            map.insert(i as u64, (i as u64, key), i as f64);
        }
        assert_eq!(keys(&map), ["a", "b", "c"]);
        let a = find(&map, 0, "a").unwrap();
        map.touch(a, 10.0);
        assert_eq!(keys(&map), ["b", "c", "a"]);
        assert_eq!(map.get(a).map(|(v, t)| (v.1, t)), Some(("a", 10.0)));
        assert_eq!(find(&map, 0, "b"), None);
        let mut out = Vec::new();
        assert_eq!(map.evict_over(2, &mut out), 1);
        assert_eq!(out, [(1, "b")]);
        assert_eq!(keys(&map), ["c", "a"]);
    }

    #[test]
    fn entries_with_one_hash_chain_and_unchain_in_any_order() {
        let mut map = IdleMap::default();
        let ids: Vec<_> = ["x", "y", "z"]
            .into_iter()
            .map(|key| map.insert(7, (7, key), 0.0))
            .collect();
        for key in ["x", "y", "z"] {
            assert!(find(&map, 7, key).is_some());
        }
        assert_eq!(map.remove(ids[1]), Some((7, "y")));
        assert_eq!(find(&map, 7, "y"), None);
        assert!(find(&map, 7, "x").is_some() && find(&map, 7, "z").is_some());
        assert_eq!(map.remove(ids[2]), Some((7, "z")));
        assert!(find(&map, 7, "x").is_some());
        assert_eq!(map.remove(ids[1]), None);
        assert_eq!(map.remove(ids[0]), Some((7, "x")));
        assert!(map.is_empty() && map.slots.is_empty() && map.index.is_empty());
    }

    #[test]
    fn idle_entries_expire_oldest_first_and_stop_at_a_live_one() {
        let mut map = IdleMap::default();
        for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
            map.insert(i as u64, (i as u64, key), i as f64 * 10.0);
        }
        let b = find(&map, 1, "b").unwrap();
        map.touch(b, 35.0);
        let mut out = Vec::new();
        // In order of use: a (0), c (20), d (30), b (35). At 25 with a TTL of 10 only a is
        // idle; at 45 with a TTL of 20, c is, and the sweep stops at d.
        assert_eq!(map.expire(25.0, 10.0, &mut out), 1);
        assert_eq!(out, [(0, "a")]);
        assert_eq!(map.expire(45.0, 20.0, &mut out), 1);
        assert_eq!(keys(&map), ["d", "b"]);
        // Freed slots are reused.
        let e = map.insert(9, (9, "e"), 50.0);
        assert!(e.0 < 4);
        assert_eq!(keys(&map), ["d", "b", "e"]);
        assert_eq!(map.drain().len(), 3);
        assert!(map.is_empty());
    }
}
