//! The post-compaction guard: after a compaction retry, the same call with the same result
//! filling its window aborts the run.

/// The post-compaction guard's detector name.
pub const COMPACTION_DETECTOR: &str = "compaction_loop_persisted";

/// The post-compaction guard's message when the same call and result filled its window.
pub fn compaction_message(tool: &str, count: u32) -> String {
    format!(
        "{COMPACTION_DETECTOR}: {tool} repeated the same call with the same result {count} times after compaction; aborting the run."
    )
}

/// The guard's answer for one observed outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardVerdict {
    /// Not armed, or armed and the window has not filled with one triple.
    Continue,
    /// The same (tool, args, result) triple filled the window: abort with this count.
    Abort(u32),
}

/// The post-compaction guard: after `arm()`, watches the next `window` outcomes and aborts
/// when one (tool, args, result) triple fills the window.
#[derive(Clone, Debug)]
pub struct CompactionGuard {
    pub(super) window_size: u32,
    pub(super) remaining: u32,
    pub(super) window: Vec<(u64, u64, u64)>,
}

impl CompactionGuard {
    pub fn new(window_size: u32) -> Self {
        CompactionGuard {
            window_size: window_size.max(1),
            remaining: 0,
            window: Vec::new(),
        }
    }

    pub fn window_size(&self) -> u32 {
        self.window_size
    }

    pub fn remaining(&self) -> u32 {
        self.remaining
    }

    /// Start watching the next `window_size` outcomes; returns that number.
    pub fn arm(&mut self) -> u32 {
        self.remaining = self.window_size;
        self.window.clear();
        self.window_size
    }

    pub fn observe(&mut self, tool: u64, args: u64, result: u64) -> GuardVerdict {
        if self.remaining == 0 {
            return GuardVerdict::Continue;
        }
        self.remaining -= 1;
        let triple = (tool, args, result);
        self.window.push(triple);
        let count = self.window.iter().filter(|&&t| t == triple).count() as u32;
        if self.remaining == 0 {
            // The window is over: free it (a gateway holds many idle guards).
            self.window = Vec::new();
        }
        if count >= self.window_size {
            GuardVerdict::Abort(count)
        } else {
            GuardVerdict::Continue
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.window.capacity() * std::mem::size_of::<(u64, u64, u64)>()
    }
}
