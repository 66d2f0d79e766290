//! The exported `cu*` functions, all listed in [`SYMBOLS`]. Each one counts itself, takes the
//! global lock (`call.rs`; `cuInit` lets it go while a `hang` line holds it) and never unwinds
//! into its caller. No other file of the library uses this one (the unit tests take `SYMBOLS`).

use crate::call::{export, out, out_name, out_text};
use crate::codes::{self, CUresult, SUCCESS};
use std::ffi::{c_char, c_int, c_uint};

/// `CUdevice`: the device ordinal itself, as the real driver hands it out.
pub type CUdevice = c_int;

/// `CUuuid`: a device UUID's 16 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CUuuid {
    /// The bytes, most significant first.
    pub bytes: [u8; 16],
}

/// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
const MULTIPROCESSOR_COUNT: c_int = 16;
/// `CU_DEVICE_ATTRIBUTE_INTEGRATED`.
const INTEGRATED: c_int = 18;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
const COMPUTE_CAPABILITY_MINOR: c_int = 76;

export! {
    fn cuInit(flags: c_uint) |c| {
        // Counted first, then held by a `- hang cuInit <s>` line of the event file (`hang.rs`).
        let mut c = c.hang();
        match c.g.init(flags, SYMBOLS) {
            SUCCESS => Ok(()),
            e => Err(e),
        }
    }
    fn cuDriverGetVersion(version: *mut c_int) |c| {
        let v = c.cuda()?.driver_version;
        out(version, v)
    }
    fn cuDeviceGetCount(count: *mut c_int) |c| {
        let n = c.cuda()?.devices.len();
        out(count, c_int::try_from(n).unwrap_or(c_int::MAX))
    }
    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) |c| {
        c.device(ordinal)?;
        out(device, ordinal)
    }
    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) |c| {
        let d = c.device(dev)?;
        out_name(name, len, &d.name)
    }
    // The legacy 32-bit form, which the real driver clamps rather than fails for large memory.
    fn cuDeviceTotalMem(bytes: *mut c_uint, dev: CUdevice) |c| {
        let total = c.device(dev)?.total_memory_bytes;
        out(bytes, c_uint::try_from(total).unwrap_or(c_uint::MAX))
    }
    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) |c| {
        let total = c.device(dev)?.total_memory_bytes;
        out(bytes, usize::try_from(total).unwrap_or(usize::MAX))
    }
    fn cuDeviceGetAttribute(value: *mut c_int, attribute: c_int, dev: CUdevice) |c| {
        let d = c.device(dev)?;
        let v = match attribute {
            COMPUTE_CAPABILITY_MAJOR => d.compute_capability[0],
            COMPUTE_CAPABILITY_MINOR => d.compute_capability[1],
            MULTIPROCESSOR_COUNT => d.multiprocessors,
            // Every device this fake serves is an integrated GPU (Jetson, IGX, Thor).
            INTEGRATED => 1,
            _ => return Err(codes::INVALID_VALUE),
        };
        out(value, v)
    }
    fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) |c| {
        let bytes = c.device(dev)?.uuid_bytes;
        out(uuid, CUuuid { bytes })
    }
    fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) |c| {
        let bytes = c.device(dev)?.uuid_bytes;
        out(uuid, CUuuid { bytes })
    }
    fn cuGetErrorName(error: CUresult, text: *mut *const c_char) |c| {
        c.any_time()?;
        out_text(text, codes::name(error))
    }
    fn cuGetErrorString(error: CUresult, text: *mut *const c_char) |c| {
        c.any_time()?;
        out_text(text, codes::text(error))
    }
}
