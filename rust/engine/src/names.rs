//! Names by digest: the strings a detector keeps only to describe what it found (the paired
//! tool of a ping-pong, an unknown tool, the recent action types). The rules compare digests;
//! each distinct name is stored once, however many records refer to it, and a name no record
//! refers to any more is forgotten, so the table stays bounded by the history's size.

use std::hash::Hasher;

use compact_str::CompactString;

use crate::ring::Ring;

/// The keys are xxh3 digests already: hashing them again would only cost time.
#[derive(Default)]
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the keys are u64); fold anything else in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A session names few distinct tools or action types: a plain list in order of first use is
/// searched as fast as a hash map and holds no empty slots (a gateway holds many sessions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameTable {
    names: Vec<(u64, CompactString)>,
}

impl NameTable {
    /// Remember `name` under `digest` (a no-op when it is known). Past `limit` names, every
    /// name whose digest `live` does not yield is forgotten first; callers pass a limit of at
    /// least twice the number of live digests, so that sweep runs at most once per `limit / 2`
    /// new names.
    pub fn remember<I: IntoIterator<Item = u64>>(
        &mut self,
        digest: u64,
        name: &str,
        limit: usize,
        live: impl FnOnce() -> I,
    ) {
        self.remember_with(digest, || name, limit, live);
    }

    /// [`NameTable::remember`] with the name made by `name` only when it is not known yet
    /// (a caller that would have to convert it first pays only for new names).
    pub fn remember_with<I: IntoIterator<Item = u64>, S: AsRef<str>>(
        &mut self,
        digest: u64,
        name: impl FnOnce() -> S,
        limit: usize,
        live: impl FnOnce() -> I,
    ) {
        if self.names.iter().any(|&(known, _)| known == digest) {
            return;
        }
        if self.names.len() >= limit {
            let live: Vec<u64> = live().into_iter().collect();
            self.names.retain(|(known, _)| live.contains(known));
            self.names.shrink_to_fit();
        }
        // Grown one name at a time: new names are rare after the first calls.
        self.names.reserve_exact(1);
        self.names.push((digest, CompactString::new(name().as_ref())));
    }

    pub fn get(&self, digest: u64) -> Option<&str> {
        self.names
            .iter()
            .find(|&&(known, _)| known == digest)
            .map(|(_, name)| name.as_str())
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn clear(&mut self) {
        self.names.clear();
    }

    /// Every (digest, name), in order of first use.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        self.names.iter().map(|(digest, name)| (*digest, name.as_str()))
    }

    /// Bytes held on the heap: the table and names too long to be held inline.
    pub fn heap_bytes(&self) -> usize {
        let slots = self.names.capacity() * std::mem::size_of::<(u64, CompactString)>();
        slots
            + self
                .names
                .iter()
                .map(|(_, name)| name)
                .filter(|name| name.is_heap_allocated())
                .map(CompactString::capacity)
                .sum::<usize>()
    }
}

/// The names of the last `capacity` items (by digest), oldest first: the recent action types
/// of a session detector's events.
#[derive(Clone, Debug)]
pub struct RecentNames {
    digests: Ring<u64>,
    names: NameTable,
}

impl RecentNames {
    pub fn new(capacity: usize) -> Self {
        RecentNames {
            digests: Ring::new(capacity),
            names: NameTable::default(),
        }
    }

    pub fn push(&mut self, digest: u64, name: &str) {
        self.push_with(digest, || name);
    }

    /// [`RecentNames::push`] with the name made by `name` only when it is not known yet.
    pub fn push_with<S: AsRef<str>>(&mut self, digest: u64, name: impl FnOnce() -> S) {
        if self.digests.back(0) == Some(&digest) {
            // The newest item's name is known (live names are never forgotten).
            self.digests.push(digest);
            return;
        }
        let limit = 2 * self.digests.capacity() + 4;
        let digests = &self.digests;
        self.names
            .remember_with(digest, name, limit, || digests.iter_newest_first().copied());
        self.digests.push(digest);
    }

    /// The names, oldest first.
    pub fn oldest_first(&self) -> Vec<&str> {
        self.oldest_first_with_digests()
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    }

    /// The (digest, name) of each item, oldest first.
    pub fn oldest_first_with_digests(&self) -> Vec<(u64, &str)> {
        let mut items: Vec<(u64, &str)> = self
            .digests
            .iter_newest_first()
            .filter_map(|&d| Some((d, self.names.get(d)?)))
            .collect();
        items.reverse();
        items
    }

    pub fn heap_bytes(&self) -> usize {
        self.digests.capacity() * std::mem::size_of::<u64>() + self.names.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_no_record_refers_to_are_forgotten_past_the_limit() {
        let mut table = NameTable::default();
        for digest in 0..4 {
            table.remember(digest, &format!("tool{digest}"), 4, Vec::new);
        }
        assert_eq!(table.len(), 4);
        table.remember(2, "tool2", 4, || -> Vec<u64> { panic!("a known name needs no sweep") });
        // Full: only the live names survive the sweep, then the new one is added.
        table.remember(9, "tool9", 4, || vec![1, 3, 77]);
        let mut kept: Vec<_> = table.iter().collect();
        kept.sort_unstable();
        assert_eq!(kept, [(1, "tool1"), (3, "tool3"), (9, "tool9")]);
        assert_eq!(table.get(0), None);
    }

    #[test]
    fn recent_names_keep_the_last_ones_in_order() {
        let mut recent = RecentNames::new(3);
        for (digest, name) in [(1, "read"), (2, "write"), (1, "read"), (3, "bash"), (4, "grep")] {
            recent.push(digest, name);
        }
        assert_eq!(recent.oldest_first(), ["read", "bash", "grep"]);
        assert!(recent.names.len() <= 2 * 3 + 4);
    }

    #[test]
    fn long_names_count_as_heap() {
        let mut table = NameTable::default();
        table.remember(1, "short", 8, Vec::new);
        let small = table.heap_bytes();
        table.remember(2, &"x".repeat(100), 8, Vec::new);
        assert!(table.heap_bytes() >= small + 100);
    }
}
