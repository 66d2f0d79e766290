//! A fake `libcuda.so.1`: serves the integrated GPUs (Jetson, IGX, Thor) that the `cuda:` block
//! of the fixture named in `FAKE_NVML_FIXTURE` describes, through the few CUDA driver calls that
//! device discovery makes, with `cuda.h` semantics. The NVML fake reads the same file, so one
//! fixture describes one machine; both are documented in `docs/fake-nvml.md`.
#![allow(non_snake_case)]

mod call;
mod codes;
pub mod exports;
mod faults;
mod fixture;
mod hang;
mod state;

/// Writes `FAKE_CUDA_CALLS` when the process exits (or the library is unloaded). A `.fini_array`
/// entry rather than `atexit`, because it runs exactly once for this object in both cases.
extern "C" fn write_calls_at_exit() {
    let _ = std::panic::catch_unwind(|| state::lock().write_calls());
}

#[used]
#[link_section = ".fini_array"]
static WRITE_CALLS_AT_EXIT: extern "C" fn() = write_calls_at_exit;
