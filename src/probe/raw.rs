//! The NVML calls nvml-wrapper does not wrap (GPU/compute instances, profile info, fabric info),
//! made through its raw bindings, and keeping the library loaded. One of the crate's few `unsafe`
//! modules (with `raw_topology.rs`, `cuda.rs` and `health/reading/raw_events.rs`; `strategy.rs` has one
//! `dlopen`): each call passes handles that NVML itself returned and out-pointers to zeroed
//! structs of the bindings' own (nvml.h) layout. Every block says why it is sound
//! (`clippy::undocumented_unsafe_blocks` is denied).
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::*;
use std::mem::zeroed;

/// A GPU instance handle, valid while NVML stays initialised.
#[derive(Clone, Copy)]
pub struct GpuInstance(nvmlGpuInstance_t);

/// What the fabric query reports.
pub struct FabricInfo {
    /// The 16 cluster-UUID bytes.
    pub cluster_uuid: [u8; 16],
    /// Clique id.
    pub clique_id: u32,
    /// `nvmlGpuFabricState_t`.
    pub state: u8,
    /// Registration status (`nvmlReturn_t`).
    pub status: u32,
}

fn lib(nvml: &Nvml) -> &NvmlLib {
    nvml.lib()
}

/// `nvmlDeviceGetGpuInstanceId` of a MIG device.
pub fn gpu_instance_id(nvml: &Nvml, mig: &Device) -> Result<u32, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlDeviceGetGpuInstanceId.as_ref())?;
    let mut id = 0;
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(mig.handle(), &mut id))? };
    Ok(id)
}

/// `nvmlDeviceGetComputeInstanceId` of a MIG device.
pub fn compute_instance_id(nvml: &Nvml, mig: &Device) -> Result<u32, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlDeviceGetComputeInstanceId.as_ref())?;
    let mut id = 0;
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(mig.handle(), &mut id))? };
    Ok(id)
}

/// `nvmlDeviceGetGpuInstanceById` on the parent GPU.
pub fn gpu_instance_by_id(nvml: &Nvml, gpu: &Device, id: u32) -> Result<GpuInstance, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlDeviceGetGpuInstanceById.as_ref())?;
    let mut gi: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(gpu.handle(), id, &mut gi))? };
    Ok(GpuInstance(gi))
}

/// The profile id from `nvmlGpuInstanceGetInfo`.
pub fn gpu_instance_profile_id(nvml: &Nvml, gi: GpuInstance) -> Result<u32, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlGpuInstanceGetInfo.as_ref())?;
    // SAFETY: an nvml.h info struct of integers and arrays, for which all zeroes is a valid value.
    let mut info: nvmlGpuInstanceInfo_t = unsafe { zeroed() };
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(gi.0, &mut info))? };
    Ok(info.profileId)
}

/// A compute instance handle, valid while NVML stays initialised.
#[derive(Clone, Copy)]
pub struct ComputeInstance(nvmlComputeInstance_t);

/// `nvmlGpuInstanceGetComputeInstanceById`: compute instance `id` of `gi`.
pub fn compute_instance_by_id(nvml: &Nvml, gi: GpuInstance, id: u32) -> Result<ComputeInstance, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlGpuInstanceGetComputeInstanceById.as_ref())?;
    let mut ci: nvmlComputeInstance_t = std::ptr::null_mut();
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(gi.0, id, &mut ci))? };
    Ok(ComputeInstance(ci))
}

/// The profile id from `nvmlComputeInstanceGetInfo_v2`.
pub fn compute_instance_profile_id(nvml: &Nvml, ci: ComputeInstance) -> Result<u32, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlComputeInstanceGetInfo_v2.as_ref())?;
    // SAFETY: an nvml.h info struct of integers and arrays, for which all zeroes is a valid value.
    let mut info: nvmlComputeInstanceInfo_t = unsafe { zeroed() };
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(ci.0, &mut info))? };
    Ok(info.profileId)
}

/// The `id` field of `nvmlDeviceGetGpuInstanceProfileInfo(profile)`.
pub fn gpu_instance_profile_info_id(nvml: &Nvml, gpu: &Device, profile: u32) -> Result<u32, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlDeviceGetGpuInstanceProfileInfo.as_ref())?;
    // SAFETY: an nvml.h info struct of integers and arrays, for which all zeroes is a valid value.
    let mut info: nvmlGpuInstanceProfileInfo_t = unsafe { zeroed() };
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(gpu.handle(), profile, &mut info))? };
    Ok(info.id)
}

/// The `id` field of `nvmlGpuInstanceGetComputeInstanceProfileInfo(profile, SHARED)`.
pub fn compute_instance_profile_info_id(
    nvml: &Nvml,
    gi: GpuInstance,
    profile: u32,
) -> Result<u32, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlGpuInstanceGetComputeInstanceProfileInfo.as_ref())?;
    // SAFETY: an nvml.h info struct of integers and arrays, for which all zeroes is a valid value.
    let mut info: nvmlComputeInstanceProfileInfo_t = unsafe { zeroed() };
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(gi.0, profile, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &mut info))? };
    Ok(info.id)
}

/// Fabric info: `nvmlDeviceGetGpuFabricInfo` where the driver has it, else the versioned call
/// (v2, as go-nvlib does). `Ok(None)` means NOT_SUPPORTED.
pub fn fabric_info(nvml: &Nvml, gpu: &Device) -> Result<Option<FabricInfo>, NvmlError> {
    let result = if let Ok(sym) = lib(nvml).nvmlDeviceGetGpuFabricInfo.as_ref() {
        // SAFETY: an nvml.h info struct of integers and arrays, for which all zeroes is a valid value.
        let mut info: nvmlGpuFabricInfo_t = unsafe { zeroed() };
        // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
        // the pass); the out-pointer is to a local of the type nvml.h declares for it.
        unsafe { nvml_try(sym(gpu.handle(), &mut info)) }.map(|()| FabricInfo {
            cluster_uuid: info.clusterUuid,
            clique_id: info.cliqueId,
            state: info.state,
            status: info.status,
        })
    } else {
        let sym = nvml_sym(lib(nvml).nvmlDeviceGetGpuFabricInfoV.as_ref())?;
        // SAFETY: an nvml.h info struct of integers and arrays, for which all zeroes is a valid value.
        let mut info: nvmlGpuFabricInfo_v2_t = unsafe { zeroed() };
        info.version = std::mem::size_of::<nvmlGpuFabricInfo_v2_t>() as u32 | (2 << 24);
        // The v2 struct is a prefix of the V type the symbol is declared with.
        // SAFETY: a GPU handle NVML returned; `info` is a versioned v2 struct, a prefix of the
        // declared type, whose version word tells NVML how much it may write.
        unsafe { nvml_try(sym(gpu.handle(), (&mut info as *mut nvmlGpuFabricInfo_v2_t).cast())) }.map(|()| {
            FabricInfo {
                cluster_uuid: info.clusterUuid,
                clique_id: info.cliqueId,
                state: info.state,
                status: info.status,
            }
        })
    };
    match result {
        Ok(info) => Ok(Some(info)),
        Err(NvmlError::NotSupported) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Why the GPU's clocks are held down now (nvml.h's clock event reason bits), through
/// `nvmlDeviceGetCurrentClocksEventReasons`; a driver older than that name (before R535) answers
/// through its earlier one, `nvmlDeviceGetCurrentClocksThrottleReasons` (same bits).
pub fn clocks_event_reasons(nvml: &Nvml, gpu: &Device) -> Result<u64, NvmlError> {
    let sym = nvml_sym(lib(nvml).nvmlDeviceGetCurrentClocksEventReasons.as_ref())
        .or_else(|_| nvml_sym(lib(nvml).nvmlDeviceGetCurrentClocksThrottleReasons.as_ref()))?;
    let mut reasons = 0;
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the reading); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(gpu.handle(), &mut reasons))? };
    Ok(reasons)
}

/// Libraries kept loaded for the life of the process, by path.
static KEPT: std::sync::Mutex<Vec<(std::path::PathBuf, libloading::Library)>> =
    std::sync::Mutex::new(Vec::new());

/// nvml-wrapper loads and unloads the library on every pass; one reference held for the life of
/// the process makes that a reference-count change instead of a full unload and reload each time
/// (which left a little memory behind per cycle in the daemon benchmark).
pub fn keep_loaded(path: &std::path::Path) {
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    if kept.iter().any(|(p, _)| p == path) {
        return;
    }
    // SAFETY: loading runs the library's initialisers, as nvml-wrapper's own load does just before.
    if let Ok(lib) = unsafe { libloading::Library::new(path) } {
        kept.push((path.to_path_buf(), lib));
    }
}
