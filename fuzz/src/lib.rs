//! Helpers shared by the fuzz targets: a counting allocator (so targets can check real heap
//! use, not only what the engine reports), a key mixer, and a brute-force model of the chant
//! rule with the checks the chant targets make on every event.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use doomloop_engine::chant::ChantConfig;

/// The system allocator, counting the bytes currently allocated.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged (so the
// `GlobalAlloc` contract is `System`'s) and only adds bookkeeping on an atomic counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is; `ptr` was allocated by this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes currently allocated through the global allocator (the fuzzer runs one thread).
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// splitmix64: a well-mixed value for any seed, so hash keys drawn from fuzz input are never
/// degenerate (a base of 1 makes the window hash a plain sum; see the chant tests).
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A chant detector's memory after a run: the `held` bytes are exactly its `heap` bytes
/// (`heap_bytes()`: ring, table and the event's window) plus the event's window of
/// `event_window` symbols held again by the caller as 8-byte keys, and `heap` is at most the
/// history and a batch of `symbol_bytes` a symbol (fewer while they fit fewer), a table of at
/// most 64 buckets or one per two positions, of 4 16-byte entries, and a window.
pub fn check_chant_heap(held: usize, heap: usize, event_window: usize, config: &ChantConfig, symbol_bytes: usize) {
    assert_eq!(
        held,
        heap + 8 * event_window,
        "heap_bytes {heap} is not the {held} bytes held"
    );
    let ring_bound = symbol_bytes * (config.history() as usize + 256);
    let table_bound = 16 * 4 * 64usize.max((config.max_distance() as usize + 1).next_power_of_two() / 2);
    let window_bound = symbol_bytes * config.window as usize;
    assert!(heap <= ring_bound + table_bound + window_bound, "{heap}");
}

pub mod chant_model;
