//! Integrated GPUs (Jetson, IGX, Thor) through the CUDA driver API: the calls GFD makes, except
//! that memory is `cuDeviceTotalMem_v2` (GFD's legacy call stops at 4 GiB) and the driver's
//! version comes from NVML where NVML answers (JetPack 6 and later, Thor). Where NVML's library
//! does not load (JetPack 5) it is looked for once while this source is the session's. Its
//! failures are [`CudaSourceError`]s.

use super::calls::driver as mark;
use super::cuda::{self, Cuda, CudaError, CudaOpenError};
use super::{strategy, DeviceSource, NvmlSourceError, ProbeError, ProbeOptions, Session, SourceError};
use crate::exit::Classify;
use crate::snapshot::{Gpu, Issue, Snapshot, Source};
use nvml_wrapper::Nvml;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Why the CUDA source gave no snapshot.
#[derive(Debug, thiserror::Error)]
pub enum CudaSourceError {
    /// The CUDA driver (integrated GPUs) did not load or start.
    #[error("no CUDA driver found: {0}")]
    Open(#[source] CudaOpenError),
    /// CUDA could not count its GPUs.
    #[error("error getting devices: {0}")]
    Count(#[source] CudaError),
}

impl Classify for CudaSourceError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            CudaSourceError::Open(e) => e.is_bad_configuration(),
            CudaSourceError::Count(e) => e.is_bad_configuration(),
        }
    }
}

impl SourceError for CudaSourceError {
    fn device_source(&self) -> Source {
        Source::Cuda
    }

    fn is_init(&self) -> bool {
        match self {
            CudaSourceError::Open(_) => true,
            CudaSourceError::Count(_) => false,
        }
    }

    fn function(&self) -> &'static str {
        match self {
            CudaSourceError::Open(_) => "cuInit",
            CudaSourceError::Count(e) => e.function,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            // The driver is there: non-root, the GPU's device nodes are what it cannot open.
            CudaSourceError::Open(CudaOpenError::Init { source, .. }) if source.code == cuda::NO_DEVICE => Some(
                "the CUDA driver loaded but sees no GPU: on Jetson, IGX and Thor this usually means this process (its uid and groups) cannot open the GPU's device nodes (/dev/nvhost-*, /dev/nvmap, /dev/nvgpu/igpu0/*, /dev/nvidia*; usually group video, mode 0660): run it with that group among its supplemental groups, e.g. the video group; --fail-on-init-error=false labels this node without GPUs",
            ),
            CudaSourceError::Open(_) => Some(
                "on Jetson, IGX and Thor the CUDA driver comes with JetPack: give the container the host's libcuda.so.1 (the NVIDIA container runtime mounts it) or point --cuda-library at it; --fail-on-init-error=false labels this node without GPUs",
            ),
            CudaSourceError::Count(_) => None,
        }
    }
}

/// The CUDA source, for integrated GPUs.
#[derive(Default)]
pub(super) struct CudaSource {
    /// NVML's library would not load beside CUDA (JetPack 5): not looked for again each pass
    /// (a JetPack without NVML gains none without a restart; a reset chooses the source anew).
    nvml_absent: AtomicBool,
}

impl DeviceSource for CudaSource {
    fn source(&self) -> Source {
        Source::Cuda
    }

    fn collect(&self, session: &Session, opts: &ProbeOptions, snap: &mut Snapshot) -> Result<(), ProbeError> {
        let cuda = mark("cuInit", None, || session.cuda(opts)).map_err(CudaSourceError::Open)?;
        // JetPack 6 and Thor answer NVML too, and it alone knows the driver's version.
        let nvml = self.nvml_beside(session, opts);
        collect(&cuda, nvml.as_deref(), snap)
    }
}

impl CudaSource {
    /// NVML beside CUDA, `None` where it is absent. A library that does not load is not looked
    /// for again; a driver that does not start is.
    fn nvml_beside(&self, session: &Session, opts: &ProbeOptions) -> Option<Arc<Nvml>> {
        if self.nvml_absent.load(Ordering::Relaxed) {
            return None;
        }
        match session.nvml(opts) {
            Ok(nvml) => Some(nvml),
            Err(ProbeError::Nvml(NvmlSourceError::NoDriver { detail }))
                if !strategy::loadable(&opts.library) =>
            {
                tracing::debug!(%detail, "no NVML beside CUDA; the driver version labels read unknown");
                self.nvml_absent.store(true, Ordering::Relaxed);
                None
            }
            Err(_) => None,
        }
    }
}

/// Fills `snap` from CUDA, and the driver version from `nvml` when there is one.
fn collect(cuda: &Cuda, nvml: Option<&Nvml>, snap: &mut Snapshot) -> Result<(), ProbeError> {
    if let Some(nvml) = nvml {
        match mark("nvmlSystemGetDriverVersion", None, || nvml.sys_driver_version()) {
            Ok(v) => snap.driver_version = Some(v),
            Err(e) => snap.issues.push(Issue {
                device: None,
                function: "nvmlSystemGetDriverVersion".into(),
                error: super::nvml_error::describe(&e),
                effect: "driver version labels read unknown".into(),
                source: Some(Source::Nvml),
            }),
        }
    }
    match mark("cuDriverGetVersion", None, || cuda.driver_version()) {
        Ok(v) => snap.cuda_driver_version = Some(v),
        Err(e) => snap.issues.push(issue(None, e, "CUDA version labels omitted")),
    }
    let count = mark("cuDeviceGetCount", None, || cuda.device_count()).map_err(CudaSourceError::Count)?;
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
        source: Some(Source::Cuda),
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
