//! doomloop's engine: loop-detection algorithms in plain Rust, free of Python so that
//! `cargo test`, benchmarks and fuzzing run without libpython. The PyO3 binding layer in
//! `rust/bindings` converts Python values and calls into these modules.

pub mod chant;
pub mod fingerprint;
pub mod idle_map;
pub mod names;
pub mod policy;
pub mod ring;
pub mod session;
pub mod settings;
pub mod snapshot;
pub mod tool_loop;
pub mod tool_result;
pub mod trace_event;
pub mod unknown_tool;
pub mod volatile;
