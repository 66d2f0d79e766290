//! The NVML event calls, through nvml-wrapper's raw bindings: its own wrapper drops the
//! GPU-unavailable event type and the MIG instance ids that say which MIG device an Xid hit.
//! Each call passes a handle NVML returned and out-pointers to zeroed structs of the bindings'
//! (nvml.h's) layout; every block says why it is sound.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::*;

/// The types health listens for: Xids, double-bit ECC errors, GPUs becoming unavailable.
pub const WANTED: u64 = (nvmlEventTypeXidCriticalError
    | nvmlEventTypeDoubleBitEccError
    | nvmlEventTypeGpuUnavailableError) as u64;

/// One event as NVML delivered it.
#[derive(Debug, Clone, Copy)]
pub struct RawEvent {
    /// The device handle it names.
    pub device: nvmlDevice_t,
    /// `nvmlEventType*` bits.
    pub kind: u64,
    /// The Xid, for Xid events.
    pub data: u64,
    /// GPU-instance id (`u32::MAX` when not a MIG device).
    pub gpu_instance: u32,
    /// Compute-instance id.
    pub compute_instance: u32,
}

/// The device's handle as a number, to recognise it in events.
pub fn handle_key(device: &Device) -> usize {
    // SAFETY: the handle is only read as an address, never used to call NVML or dereferenced.
    unsafe { device.handle() as usize }
}

/// An event set, freed on drop; lives no longer than the NVML session it came from.
pub struct EventSet<'a> {
    nvml: &'a Nvml,
    set: nvmlEventSet_t,
}

impl<'a> EventSet<'a> {
    /// `nvmlEventSetCreate`.
    pub fn new(nvml: &'a Nvml) -> Result<EventSet<'a>, NvmlError> {
        let sym = nvml_sym(nvml.lib().nvmlEventSetCreate.as_ref())?;
        let mut set: nvmlEventSet_t = std::ptr::null_mut();
        // SAFETY: the out-pointer is to a local of the type nvml.h declares.
        unsafe { nvml_try(sym(&mut set))? };
        Ok(EventSet { nvml, set })
    }

    /// Registers the wanted types this GPU supports; returns the types registered.
    pub fn register(&self, device: &Device) -> Result<u64, NvmlError> {
        let lib = self.nvml.lib();
        let supported = nvml_sym(lib.nvmlDeviceGetSupportedEventTypes.as_ref())?;
        let register = nvml_sym(lib.nvmlDeviceRegisterEvents.as_ref())?;
        let mut types: u64 = 0;
        // SAFETY: the handle is one NVML returned for this session; the out-pointer is a local u64.
        unsafe { nvml_try(supported(device.handle(), &mut types))? };
        let wanted = types & WANTED;
        if wanted != 0 {
            // SAFETY: the handle and the set both come from this session and are still valid.
            unsafe { nvml_try(register(device.handle(), wanted, self.set))? };
        }
        Ok(wanted)
    }

    /// `nvmlEventSetWait_v2`: the next event, or `Timeout` after `timeout_ms`. Blocks the thread.
    pub fn wait(&self, timeout_ms: u32) -> Result<RawEvent, NvmlError> {
        let sym = nvml_sym(self.nvml.lib().nvmlEventSetWait_v2.as_ref())?;
        // SAFETY: all-zero is a valid nvmlEventData_t (a null handle and integers).
        let mut data: nvmlEventData_t = unsafe { std::mem::zeroed() };
        // SAFETY: the set is valid until drop; the out-pointer is to a local of nvml.h's type.
        unsafe { nvml_try(sym(self.set, &mut data, timeout_ms))? };
        Ok(RawEvent {
            device: data.device,
            kind: data.eventType,
            data: data.eventData,
            gpu_instance: data.gpuInstanceId,
            compute_instance: data.computeInstanceId,
        })
    }

    /// The index of the GPU an event names.
    pub fn index_of(&self, device: nvmlDevice_t) -> Result<u32, NvmlError> {
        let sym = nvml_sym(self.nvml.lib().nvmlDeviceGetIndex.as_ref())?;
        let mut index = 0;
        // SAFETY: the handle is one NVML put in an event of this session; the out-pointer is a local.
        unsafe { nvml_try(sym(device, &mut index))? };
        Ok(index)
    }
}

impl Drop for EventSet<'_> {
    fn drop(&mut self) {
        if let Ok(sym) = nvml_sym(self.nvml.lib().nvmlEventSetFree.as_ref()) {
            // SAFETY: the set was created by this session and is freed exactly once, here.
            let _ = unsafe { sym(self.set) };
        }
    }
}
