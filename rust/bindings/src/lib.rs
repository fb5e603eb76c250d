//! The `doomloop._core` extension module: a thin PyO3 layer over `doomloop-engine`.
//! It converts Python values, holds per-object state behind a mutex, and maps every failure
//! to a Python exception; the algorithms live in the engine crate.

mod canonical;
mod chant;
mod chunks;
mod errors;
mod ffi;
mod monitor;
mod pieces;
mod policies;
mod registry;
mod session;
mod settings;
mod tool_loop;
mod tool_results;
mod trace_events;
mod tracked;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
mod _core {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::errors::_bind_errors;

    #[pymodule_export]
    use crate::monitor::{_bind_monitor, _monitor_parts, _pack_monitor, MonitorEngine, ToolDecision};

    #[pymodule_export]
    use crate::pieces::{chat_pieces, field};

    #[pymodule_export]
    use crate::policies::ToolPolicies;

    #[pymodule_export]
    use crate::registry::RegistryEngine;

    #[pymodule_export]
    use crate::session::SessionEngine;

    #[pymodule_export]
    use crate::settings::{check_settings, settings_of, snapshot_settings};

    #[pymodule_export]
    const MAX_CYCLE_PERIOD: u64 = doomloop_engine::session::MAX_CYCLE_PERIOD;

    #[pymodule_export]
    const MAX_CYCLE_REPEATS: u64 = doomloop_engine::session::MAX_CYCLE_REPEATS;

    #[pymodule_export]
    const MAX_THRESHOLD: u64 = doomloop_engine::tool_loop::MAX_THRESHOLD;

    #[pymodule_export]
    use crate::tool_loop::{
        tool_result_hash, GuardEngine, GuardVerdict, LoopVerdict, ToolCallDecision, ToolLoopEngine, ToolOutcome,
    };

    #[pymodule_export]
    const MAX_HISTORY_SIZE: u64 = doomloop_engine::tool_loop::MAX_HISTORY_SIZE;

    #[pymodule_export]
    const MAX_GUARD_WINDOW: u64 = doomloop_engine::tool_loop::MAX_GUARD_WINDOW;

    #[pymodule_export]
    const COMPACTION_DETECTOR: &str = doomloop_engine::tool_loop::COMPACTION_DETECTOR;

    #[pymodule_export]
    use crate::trace_events::EventDecoder;

    #[pymodule_export]
    use crate::chant::{ChantEngine, TextGuard};

    #[pymodule_export]
    const CHANT_DETACH_THRESHOLD: usize = crate::chunks::CHANT_DETACH_THRESHOLD;

    #[pymodule_export]
    const MAX_DEPTH: usize = crate::canonical::MAX_DEPTH;

    #[pymodule_export]
    const HASH_DETACH_THRESHOLD: usize = crate::canonical::HASH_DETACH_THRESHOLD;

    #[pymodule_export]
    const MAX_REWALKS: usize = crate::canonical::MAX_REWALKS;

    /// The canonical fingerprint of `value`: a stable 64-bit xxh3 digest of its typed,
    /// key-order-free encoding (see docs/fingerprint.md). Never raises.
    #[pyfunction]
    #[pyo3(signature = (value, /))]
    fn fingerprint(value: &Bound<'_, PyAny>) -> u64 {
        crate::canonical::fingerprint(value)
    }

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
