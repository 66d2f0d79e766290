//! A fake `libnvidia-ml.so.1`: serves the machine described by the YAML fixture named in
//! `FAKE_NVML_FIXTURE`, with `nvml.h` semantics, so any NVML client can be tested without a GPU.
//! The fixture schema and symbol list are documented in `docs/fake-nvml.md`.
#![allow(non_snake_case)]

mod answers;
mod call;
mod codes;
mod events;
pub mod exports;
/// The fixture schema and its checks (public for the fuzz target).
pub mod fixture;
mod gpu_fixture;
mod health;
mod health_fixture;
mod live;
mod machine;
mod state;
pub mod topology;
mod topology_fixture;

/// Writes `FAKE_NVML_CALLS` when the process exits (or the library is unloaded). A `.fini_array`
/// entry rather than `atexit`, because it runs exactly once for this object in both cases.
extern "C" fn write_calls_at_exit() {
    let _ = std::panic::catch_unwind(|| state::lock().write_calls());
}

#[used]
#[link_section = ".fini_array"]
static WRITE_CALLS_AT_EXIT: extern "C" fn() = write_calls_at_exit;
