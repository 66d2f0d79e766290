//! What the exported functions answer, worked out from the machine: names, UUIDs, bus ids, slice
//! counts, brand and architecture codes, fabric fields, and the out-pointer and string-buffer
//! rules of `nvml.h`. No locking and no counting here; that is the exports'.

use crate::codes::{self, *};
use crate::fixture::{ci_profile_slices, fabric_state, gi_profile_slices, parse_uuid, Gpu, MigDevice};
use crate::machine::{Handle, Machine};
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_char, c_uint};

/// Stores `v` through a caller's out-pointer.
pub(crate) unsafe fn out<T>(p: *mut T, v: T) -> Result<(), u32> {
    if p.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    p.write(v);
    Ok(())
}

/// Copies `s` and its NUL into a caller's buffer of `len` bytes.
pub(crate) unsafe fn out_str(buf: *mut c_char, len: c_uint, s: &str) -> Result<(), u32> {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    if s.len() + 1 > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
    *buf.add(s.len()) = 0;
    Ok(())
}

/// Copies `s` into a fixed C array, NUL-terminated, truncating if needed.
pub(crate) fn fill(dst: &mut [c_char], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes().chain(std::iter::repeat(0))) {
        *d = b as c_char;
    }
    if let Some(last) = dst.last_mut() {
        *last = 0;
    }
}

pub(crate) fn gpu(m: &Machine, g: u32) -> &Gpu {
    &m.fixture.gpus[g as usize]
}

pub(crate) fn mig_dev(m: &Machine, g: u32, i: u32) -> &MigDevice {
    &gpu(m, g).mig.as_ref().expect("MIG handle on a GPU with MIG").devices[i as usize]
}

/// The physical GPU behind a GPU or MIG handle; other handles are invalid here.
pub(crate) fn parent(h: Handle) -> Result<u32, u32> {
    match h {
        Handle::Gpu(g) | Handle::Mig(g, _) => Ok(g),
        _ => Err(INVALID_ARGUMENT),
    }
}

pub(crate) fn gpu_uuid(m: &Machine, g: u32) -> String {
    gpu(m, g).uuid.clone().unwrap_or_else(|| format!("GPU-{:08x}-fa4e-4000-8000-{:012x}", 0x6b5a_0000 + g, g))
}

pub(crate) fn mig_uuid(m: &Machine, g: u32, i: u32) -> String {
    mig_dev(m, g, i)
        .uuid
        .clone()
        .unwrap_or_else(|| format!("MIG-{:08x}-{:04x}-5000-8000-{:012x}", 0x3c1d_0000 + g, i, (g << 8) | i))
}

pub(crate) fn bus_id(m: &Machine, g: u32) -> String {
    gpu(m, g).pci_bus_id.clone().unwrap_or_else(|| format!("00000000:{:02X}:00.0", g + 1))
}

/// The `nvmlPciInfo_t` of a bus id (`DDDDDDDD:BB:DD.F`, the numeric fields mirroring the text).
pub(crate) fn pci_info(id: &str, device_id: Option<u16>) -> nvmlPciInfo_t {
    let field = |s: Option<&str>| s.and_then(|s| u32::from_str_radix(s, 16).ok()).unwrap_or(0);
    let mut parts = id.split([':', '.']);
    let (domain, bus, dev) = (field(parts.next()), field(parts.next()), field(parts.next()));
    // SAFETY: nvml.h's struct of integers and char arrays, for which all zeroes is valid.
    let mut info: nvmlPciInfo_t = unsafe { std::mem::zeroed() };
    fill(&mut info.busId, id);
    fill(&mut info.busIdLegacy, &format!("{:04X}:{:02X}:{:02X}.0", domain & 0xffff, bus, dev));
    info.domain = domain;
    info.bus = bus;
    info.device = dev;
    // NVML packs the device id above NVIDIA's vendor id; 0 means the fixture does not say.
    info.pciDeviceId = device_id.map_or(0, |d| (u32::from(d) << 16) | 0x10de);
    info
}

pub(crate) fn gi_slices(d: &MigDevice) -> u32 {
    d.gpu_instance_slices.or(gi_profile_slices(d.gi_profile)).unwrap_or(1)
}

pub(crate) fn ci_slices(d: &MigDevice) -> u32 {
    d.compute_instance_slices.or(ci_profile_slices(d.ci_profile)).unwrap_or(1)
}

pub(crate) fn mib_to_bytes(mib: u64) -> u64 {
    mib.saturating_mul(1 << 20)
}

/// `nvmlDeviceGetName` of a MIG device, in the driver's `<GPU> MIG <profile>` form.
pub(crate) fn mig_name(m: &Machine, g: u32, i: u32) -> String {
    let d = mig_dev(m, g, i);
    let (gs, cs) = (gi_slices(d), ci_slices(d));
    let gb = d.memory_mib.div_ceil(1024);
    let profile = if gs == cs { format!("{gs}g.{gb}gb") } else { format!("{cs}c.{gs}g.{gb}gb") };
    format!("{} MIG {profile}", gpu(m, g).name)
}

pub(crate) fn version_word<T>(v: u32) -> u32 {
    size_of::<T>() as u32 | (v << 24)
}

pub(crate) fn brand(name: &str) -> Option<nvmlBrandType_t> {
    Some(match name {
        "unknown" => 0,
        "quadro" => 1,
        "tesla" => 2,
        "nvs" => 3,
        "grid" => 4,
        "geforce" => 5,
        "titan" => 6,
        "nvidia_vapps" => 7,
        "nvidia_vpc" => 8,
        "nvidia_vcs" => 9,
        "nvidia_vws" => 10,
        "nvidia_cloud_gaming" | "nvidia_vgaming" => 11,
        "quadro_rtx" => 12,
        "nvidia_rtx" => 13,
        "nvidia" => 14,
        "geforce_rtx" => 15,
        "titan_rtx" => 16,
        _ => return None,
    })
}

pub(crate) fn architecture(gpu: &Gpu) -> Option<nvmlDeviceArchitecture_t> {
    Some(match gpu.architecture.as_deref() {
        Some("kepler") => NVML_DEVICE_ARCH_KEPLER,
        Some("maxwell") => NVML_DEVICE_ARCH_MAXWELL,
        Some("pascal") => NVML_DEVICE_ARCH_PASCAL,
        Some("volta") => NVML_DEVICE_ARCH_VOLTA,
        Some("turing") => NVML_DEVICE_ARCH_TURING,
        Some("ampere") => NVML_DEVICE_ARCH_AMPERE,
        Some("ada") => NVML_DEVICE_ARCH_ADA,
        Some("hopper") => NVML_DEVICE_ARCH_HOPPER,
        Some("blackwell") => NVML_DEVICE_ARCH_BLACKWELL,
        Some("unknown") => NVML_DEVICE_ARCH_UNKNOWN,
        Some(_) => return None,
        // Without a name, answer what the driver would for that compute capability.
        None => match gpu.compute_capability {
            [3, _] => NVML_DEVICE_ARCH_KEPLER,
            [5, _] => NVML_DEVICE_ARCH_MAXWELL,
            [6, _] => NVML_DEVICE_ARCH_PASCAL,
            [7, m] if m < 5 => NVML_DEVICE_ARCH_VOLTA,
            [7, _] => NVML_DEVICE_ARCH_TURING,
            [8, m] if m < 9 => NVML_DEVICE_ARCH_AMPERE,
            [8, _] => NVML_DEVICE_ARCH_ADA,
            [9, _] => NVML_DEVICE_ARCH_HOPPER,
            [10 | 12, _] => NVML_DEVICE_ARCH_BLACKWELL,
            _ => NVML_DEVICE_ARCH_UNKNOWN,
        },
    })
}

/// Fills the common fabric fields; the caller's struct decides which exist.
pub(crate) fn fabric_fields(m: &Machine, h: Handle) -> Result<([u8; 16], u32, u32, u8), u32> {
    let Handle::Gpu(g) = h else {
        return Err(NOT_SUPPORTED);
    };
    let f = gpu(m, g).fabric.as_ref().ok_or(NOT_SUPPORTED)?;
    let uuid = parse_uuid(&f.cluster_uuid).ok_or(UNKNOWN)?;
    let status = codes::by_name(&f.status).ok_or(UNKNOWN)?;
    Ok((uuid, status, f.clique_id, fabric_state(&f.state).ok_or(UNKNOWN)?))
}

/// The first in-use MIG device of GPU `g` matching `pred` (profile info is served from these).
pub(crate) fn mig_with(m: &Machine, g: u32, pred: impl Fn(&MigDevice) -> bool) -> Option<&MigDevice> {
    gpu(m, g).mig.as_ref().filter(|mig| mig.enabled)?.devices.iter().find(|d| pred(d))
}
