//! The topology calls nvml-wrapper does not wrap, or wraps wrongly (its remote-device-type call
//! reads a temporary, so it always says "unknown"), made through its raw bindings. The same
//! soundness argument as `raw`: handles NVML returned, out-pointers to locals of nvml.h's types.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::*;

/// `nvmlDeviceGetNvLinkRemoteDeviceType`: `nvmlIntNvLinkDeviceType_t` of link `link`.
pub fn remote_device_type(nvml: &Nvml, gpu: &Device, link: u32) -> Result<u32, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetNvLinkRemoteDeviceType.as_ref())?;
    let mut kind: nvmlIntNvLinkDeviceType_t = nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    // SAFETY: the handle is one NVML returned and is still valid (NVML stays initialised for
    // the pass); the out-pointer is to a local of the type nvml.h declares for it.
    unsafe { nvml_try(sym(gpu.handle(), link, &mut kind))? };
    Ok(kind)
}

/// `nvmlSystemGetConfComputeCapabilities`: `(cpuCaps, gpusCaps)`.
pub fn conf_compute_caps(nvml: &Nvml) -> Result<(u32, u32), NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlSystemGetConfComputeCapabilities.as_ref())?;
    let mut caps = nvmlConfComputeSystemCaps_t { cpuCaps: 0, gpusCaps: 0 };
    // SAFETY: a system call with one out-pointer to a local of the struct nvml.h declares.
    unsafe { nvml_try(sym(&mut caps))? };
    Ok((caps.cpuCaps, caps.gpusCaps))
}
