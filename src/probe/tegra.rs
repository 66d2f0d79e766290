//! Integrated GPUs (Jetson, IGX, Thor) through the CUDA driver API: the calls GFD makes, except
//! that memory is `cuDeviceTotalMem_v2` (GFD's legacy call stops at 4 GiB) and the driver's
//! version comes from NVML where NVML answers (JetPack 6 and later, Thor).

use super::calls::nvml as mark;
use super::cuda::{Cuda, CudaError};
use super::ProbeError;
use crate::snapshot::{Gpu, Issue, Snapshot, Source};
use nvml_wrapper::Nvml;

/// Fills `snap` from CUDA, and the driver version from `nvml` when there is one.
pub(super) fn collect(cuda: &Cuda, nvml: Option<&Nvml>, snap: &mut Snapshot) -> Result<(), ProbeError> {
    snap.source = Source::Cuda;
    if let Some(nvml) = nvml {
        match mark("nvmlSystemGetDriverVersion", None, || nvml.sys_driver_version()) {
            Ok(v) => snap.driver_version = Some(v),
            Err(e) => snap.issues.push(Issue {
                device: None,
                function: "nvmlSystemGetDriverVersion".into(),
                error: super::nvml_error::describe(&e),
                effect: "driver version labels read unknown".into(),
            }),
        }
    }
    match mark("cuDriverGetVersion", None, || cuda.driver_version()) {
        Ok(v) => snap.cuda_driver_version = Some(v),
        Err(e) => snap.issues.push(issue(None, e, "CUDA version labels omitted")),
    }
    let count = mark("cuDeviceGetCount", None, || cuda.device_count()).map_err(ProbeError::CudaCount)?;
    for ordinal in 0..count {
        match gpu(cuda, ordinal, &mut snap.issues) {
            Ok(g) => snap.gpus.push(g),
            Err(e) => snap.issues.push(issue(Some(ordinal), e, "GPU excluded from this pass")),
        }
    }
    Ok(())
}

fn issue(ordinal: Option<u32>, e: CudaError, effect: &str) -> Issue {
    Issue {
        device: ordinal.map(|o| o.to_string()),
        function: e.function.into(),
        error: format!("{} ({}): {}", e.name, e.code, e.text),
        effect: effect.into(),
    }
}

fn gpu(cuda: &Cuda, ordinal: u32, issues: &mut Vec<Issue>) -> Result<Gpu, CudaError> {
    let at = Some(ordinal);
    let dev = mark("cuDeviceGet", at, || cuda.device(ordinal))?;
    let name = mark("cuDeviceGetName", at, || cuda.name(dev))?;
    let memory = mark("cuDeviceTotalMem_v2", at, || cuda.total_memory(dev))?;
    let compute_capability = mark("cuDeviceGetAttribute", at, || cuda.compute_capability(dev))?;
    let uuid = match mark("cuDeviceGetUuid", at, || cuda.uuid(dev)) {
        Some(Ok(u)) => Some(u),
        Some(Err(e)) => {
            issues.push(issue(at, e, "UUID unknown"));
            None
        }
        None => None,
    };
    // An integrated GPU has no PCI function, MIG or fabric.
    Ok(Gpu { uuid, memory_bytes: Some(memory), ..Gpu::new(ordinal, name, compute_capability) })
}
