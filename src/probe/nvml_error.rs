//! How an NVML error reads in the snapshot's issues and the logs; below the walk (`nvml.rs`), the
//! topology reads (`topology.rs`) and the CUDA source's NVML driver version (`tegra.rs`), which
//! each report with it.

use nvml_wrapper::error::NvmlError;

/// The error's name and text, as the snapshot's issues and the logs show it.
pub(super) fn describe(e: &NvmlError) -> String {
    match e {
        // nvml-wrapper's text misspells "inaccessible".
        NvmlError::GpuLost => "GpuLost: the GPU fell off the bus or has otherwise become inaccessible".into(),
        // The variant's name alone: its fields (a symbol, a loader error) are in the text, and
        // their Debug form is no part of a log line.
        e => {
            let debug = format!("{e:?}");
            format!("{}: {e}", debug.split(['(', ' ', '{']).next().unwrap_or_default())
        }
    }
}
