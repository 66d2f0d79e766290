//! The exported `nvml*` functions. Each one counts itself, takes the global lock, never
//! dereferences a handle (handles are looked up by address) and never unwinds into its caller.

use crate::codes::{self, *};
use crate::fixture::{ci_profile_slices, fabric_state, gi_profile_slices, parse_uuid, Gpu, MigDevice};
use crate::state::{lock, Global, Handle, Machine};
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::mem::size_of;
use std::sync::MutexGuard;

/// One exported call in progress: the lock, and the function name that faults are matched on.
struct Call {
    g: MutexGuard<'static, Global>,
    name: &'static str,
}

impl Call {
    fn machine(&mut self) -> Result<&mut Machine, u32> {
        self.g.machine(self.name)
    }

    fn handle<T>(&mut self, h: *mut T) -> Result<(&mut Machine, Handle), u32> {
        self.g.handle(self.name, h as usize)
    }
}

macro_rules! export {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) |$c:ident| $body:block)*) => {
        /// Every exported symbol, for validating fixture fault names.
        pub const SYMBOLS: &[&str] = &["nvmlErrorString", $(stringify!($name)),*];
        $(
            /// See `nvml.h`.
            ///
            /// # Safety
            /// Pointer arguments must be null or valid for the write `nvml.h` describes;
            /// handles are only looked up, never dereferenced.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> nvmlReturn_t {
                let run = std::panic::AssertUnwindSafe(|| -> Result<(), u32> {
                    let mut $c = Call { g: lock(), name: stringify!($name) };
                    $c.g.count(stringify!($name));
                    #[allow(unused_unsafe)]
                    unsafe { $body }
                });
                match std::panic::catch_unwind(run) {
                    Ok(Ok(())) => SUCCESS,
                    Ok(Err(code)) => code,
                    Err(_) => UNKNOWN,
                }
            }
        )*
    };
}

/// Stores `v` through a caller's out-pointer.
unsafe fn out<T>(p: *mut T, v: T) -> Result<(), u32> {
    if p.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    p.write(v);
    Ok(())
}

/// Copies `s` and its NUL into a caller's buffer of `len` bytes.
unsafe fn out_str(buf: *mut c_char, len: c_uint, s: &str) -> Result<(), u32> {
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
fn fill(dst: &mut [c_char], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes().chain(std::iter::repeat(0))) {
        *d = b as c_char;
    }
    if let Some(last) = dst.last_mut() {
        *last = 0;
    }
}

fn gpu(m: &Machine, g: u32) -> &Gpu {
    &m.fixture.gpus[g as usize]
}

fn mig_dev(m: &Machine, g: u32, i: u32) -> &MigDevice {
    &gpu(m, g).mig.as_ref().expect("MIG handle on a GPU with MIG").devices[i as usize]
}

/// The physical GPU behind a GPU or MIG handle; other handles are invalid here.
fn parent(h: Handle) -> Result<u32, u32> {
    match h {
        Handle::Gpu(g) | Handle::Mig(g, _) => Ok(g),
        _ => Err(INVALID_ARGUMENT),
    }
}

fn gpu_uuid(m: &Machine, g: u32) -> String {
    gpu(m, g).uuid.clone().unwrap_or_else(|| format!("GPU-{:08x}-fa4e-4000-8000-{:012x}", 0x6b5a_0000 + g, g))
}

fn mig_uuid(m: &Machine, g: u32, i: u32) -> String {
    mig_dev(m, g, i)
        .uuid
        .clone()
        .unwrap_or_else(|| format!("MIG-{:08x}-{:04x}-5000-8000-{:012x}", 0x3c1d_0000 + g, i, (g << 8) | i))
}

fn bus_id(m: &Machine, g: u32) -> String {
    gpu(m, g).pci_bus_id.clone().unwrap_or_else(|| format!("00000000:{:02X}:00.0", g + 1))
}

fn gi_slices(d: &MigDevice) -> u32 {
    d.gpu_instance_slices.or(gi_profile_slices(d.gi_profile)).unwrap_or(1)
}

fn ci_slices(d: &MigDevice) -> u32 {
    d.compute_instance_slices.or(ci_profile_slices(d.ci_profile)).unwrap_or(1)
}

fn mib_to_bytes(mib: u64) -> u64 {
    mib.saturating_mul(1 << 20)
}

/// `nvmlDeviceGetName` of a MIG device, in the driver's `<GPU> MIG <profile>` form.
fn mig_name(m: &Machine, g: u32, i: u32) -> String {
    let d = mig_dev(m, g, i);
    let (gs, cs) = (gi_slices(d), ci_slices(d));
    let gb = d.memory_mib.div_ceil(1024);
    let profile = if gs == cs { format!("{gs}g.{gb}gb") } else { format!("{cs}c.{gs}g.{gb}gb") };
    format!("{} MIG {profile}", gpu(m, g).name)
}

fn version_word<T>(v: u32) -> u32 {
    size_of::<T>() as u32 | (v << 24)
}

fn brand(name: &str) -> Option<nvmlBrandType_t> {
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

fn architecture(gpu: &Gpu) -> Option<nvmlDeviceArchitecture_t> {
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
fn fabric_fields(m: &Machine, h: Handle) -> Result<([u8; 16], u32, u32, u8), u32> {
    let Handle::Gpu(g) = h else {
        return Err(NOT_SUPPORTED);
    };
    let f = gpu(m, g).fabric.as_ref().ok_or(NOT_SUPPORTED)?;
    let uuid = parse_uuid(&f.cluster_uuid).ok_or(UNKNOWN)?;
    let status = codes::by_name(&f.status).ok_or(UNKNOWN)?;
    Ok((uuid, status, f.clique_id, fabric_state(&f.state).ok_or(UNKNOWN)?))
}

/// The first in-use MIG device of GPU `g` matching `pred` (profile info is served from these).
fn mig_with(m: &Machine, g: u32, pred: impl Fn(&MigDevice) -> bool) -> Option<&MigDevice> {
    gpu(m, g).mig.as_ref().filter(|mig| mig.enabled)?.devices.iter().find(|d| pred(d))
}

/// Shared body of the unversioned and `_v2` CUDA version symbols.
unsafe fn cuda_driver_version(c: &mut Call, v: *mut c_int) -> Result<(), u32> {
    let m = c.machine()?;
    out(v, m.fixture.cuda_driver_version)
}

/// Shared body of `nvmlDeviceGetCount` and `_v2`.
unsafe fn device_count(c: &mut Call, count: *mut c_uint) -> Result<(), u32> {
    let m = c.machine()?;
    out(count, m.fixture.gpus.len() as c_uint)
}

/// Shared body of `nvmlDeviceGetHandleByIndex` and `_v2`.
unsafe fn handle_by_index(c: &mut Call, index: c_uint, device: *mut nvmlDevice_t) -> Result<(), u32> {
    let m = c.g.initialised()?;
    if index as usize >= m.fixture.gpus.len() {
        return Err(INVALID_ARGUMENT);
    }
    let addr = m.address(Handle::Gpu(index));
    // Faults aimed at GPU `index` apply here too, though the caller has no handle yet; resolving
    // the address applies each matching fault exactly once.
    c.handle(addr as nvmlDevice_t)?;
    out(device, addr as nvmlDevice_t)
}

/// `nvmlErrorString`: a static text for every return code.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    lock().count("nvmlErrorString");
    codes::text(result).as_ptr().cast()
}

export! {
    fn nvmlInit() |c| { match c.g.init("nvmlInit", SYMBOLS) { SUCCESS => Ok(()), e => Err(e) } }
    fn nvmlInit_v2() |c| { match c.g.init("nvmlInit_v2", SYMBOLS) { SUCCESS => Ok(()), e => Err(e) } }
    fn nvmlInitWithFlags(_flags: c_uint) |c| {
        match c.g.init("nvmlInitWithFlags", SYMBOLS) { SUCCESS => Ok(()), e => Err(e) }
    }
    fn nvmlShutdown() |c| { match c.g.shutdown() { SUCCESS => Ok(()), e => Err(e) } }

    fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) |c| {
        let m = c.machine()?;
        out_str(version, length, &m.fixture.driver_version)
    }
    fn nvmlSystemGetCudaDriverVersion(v: *mut c_int) |c| { cuda_driver_version(&mut c, v) }
    fn nvmlSystemGetCudaDriverVersion_v2(v: *mut c_int) |c| { cuda_driver_version(&mut c, v) }

    fn nvmlDeviceGetCount(count: *mut c_uint) |c| { device_count(&mut c, count) }
    fn nvmlDeviceGetCount_v2(count: *mut c_uint) |c| { device_count(&mut c, count) }
    fn nvmlDeviceGetHandleByIndex(index: c_uint, device: *mut nvmlDevice_t) |c| {
        handle_by_index(&mut c, index, device)
    }
    fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut nvmlDevice_t) |c| {
        handle_by_index(&mut c, index, device)
    }
    fn nvmlDeviceGetHandleByUUID(uuid: *const c_char, device: *mut nvmlDevice_t) |c| {
        if uuid.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let wanted = CStr::from_ptr(uuid).to_string_lossy().into_owned();
        let m = c.machine()?;
        let mut found = None;
        for g in 0..m.fixture.gpus.len() as u32 {
            if gpu_uuid(m, g) == wanted {
                found = Some(Handle::Gpu(g));
            }
            if let Some(mig) = gpu(m, g).mig.as_ref().filter(|mig| mig.enabled) {
                for i in 0..mig.devices.len() as u32 {
                    if mig_uuid(m, g, i) == wanted {
                        found = Some(Handle::Mig(g, i));
                    }
                }
            }
        }
        let h = found.ok_or(NOT_FOUND)?;
        out(device, m.address(h) as nvmlDevice_t)
    }
    fn nvmlDeviceGetIndex(device: nvmlDevice_t, index: *mut c_uint) |c| {
        match c.handle(device)?.1 {
            Handle::Gpu(g) => out(index, g),
            Handle::Mig(..) => Err(NOT_SUPPORTED),
            _ => Err(INVALID_ARGUMENT),
        }
    }

    fn nvmlDeviceGetName(device: nvmlDevice_t, name: *mut c_char, length: c_uint) |c| {
        let (m, h) = c.handle(device)?;
        let text = match h {
            Handle::Gpu(g) => gpu(m, g).name.clone(),
            Handle::Mig(g, i) => mig_name(m, g, i),
            _ => return Err(INVALID_ARGUMENT),
        };
        out_str(name, length, &text)
    }
    fn nvmlDeviceGetUUID(device: nvmlDevice_t, uuid: *mut c_char, length: c_uint) |c| {
        let (m, h) = c.handle(device)?;
        let text = match h {
            Handle::Gpu(g) => gpu_uuid(m, g),
            Handle::Mig(g, i) => mig_uuid(m, g, i),
            _ => return Err(INVALID_ARGUMENT),
        };
        out_str(uuid, length, &text)
    }
    fn nvmlDeviceGetMemoryInfo(device: nvmlDevice_t, memory: *mut nvmlMemory_t) |c| {
        let (m, h) = c.handle(device)?;
        let total = match h {
            Handle::Gpu(g) => mib_to_bytes(gpu(m, g).memory_mib),
            Handle::Mig(g, i) => mib_to_bytes(mig_dev(m, g, i).memory_mib),
            _ => return Err(INVALID_ARGUMENT),
        };
        out(memory, nvmlMemory_t { total, free: total, used: 0 })
    }
    fn nvmlDeviceGetMemoryInfo_v2(device: nvmlDevice_t, memory: *mut nvmlMemory_v2_t) |c| {
        let (m, h) = c.handle(device)?;
        let total = match h {
            Handle::Gpu(g) => mib_to_bytes(gpu(m, g).memory_mib),
            Handle::Mig(g, i) => mib_to_bytes(mig_dev(m, g, i).memory_mib),
            _ => return Err(INVALID_ARGUMENT),
        };
        if memory.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        if (*memory).version != version_word::<nvmlMemory_v2_t>(2) {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let version = (*memory).version;
        out(memory, nvmlMemory_v2_t { version, total, reserved: 0, free: total, used: 0 })
    }
    fn nvmlDeviceGetCudaComputeCapability(device: nvmlDevice_t, major: *mut c_int, minor: *mut c_int) |c| {
        let (m, h) = c.handle(device)?;
        let [maj, min] = gpu(m, parent(h)?).compute_capability;
        if major.is_null() || minor.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        out(major, maj)?;
        out(minor, min)
    }
    fn nvmlDeviceGetPciInfo_v3(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) |c| {
        let (m, h) = c.handle(device)?;
        let g = parent(h)?;
        let id = bus_id(m, g);
        // "DDDDDDDD:BB:DD.F": the numeric fields mirror the text.
        let field = |s: Option<&str>| s.and_then(|s| u32::from_str_radix(s, 16).ok()).unwrap_or(0);
        let mut parts = id.split([':', '.']);
        let (domain, bus, dev) = (field(parts.next()), field(parts.next()), field(parts.next()));
        let mut info: nvmlPciInfo_t = std::mem::zeroed();
        fill(&mut info.busId, &id);
        fill(&mut info.busIdLegacy, &format!("{:04X}:{:02X}:{:02X}.0", domain & 0xffff, bus, dev));
        info.domain = domain;
        info.bus = bus;
        info.device = dev;
        // NVML packs the device id above NVIDIA's vendor id; 0 means the fixture does not say.
        info.pciDeviceId = gpu(m, g).pci_device_id.map_or(0, |d| (u32::from(d) << 16) | 0x10de);
        out(pci, info)
    }
    fn nvmlDeviceGetBrand(device: nvmlDevice_t, kind: *mut nvmlBrandType_t) |c| {
        let (m, h) = c.handle(device)?;
        let b = match gpu(m, parent(h)?).brand.as_deref() {
            None => 0,
            Some(name) => brand(name).ok_or(UNKNOWN)?,
        };
        out(kind, b)
    }
    fn nvmlDeviceGetArchitecture(device: nvmlDevice_t, arch: *mut nvmlDeviceArchitecture_t) |c| {
        let (m, h) = c.handle(device)?;
        let a = architecture(gpu(m, parent(h)?)).ok_or(UNKNOWN)?;
        out(arch, a)
    }
    fn nvmlDeviceGetMigMode(device: nvmlDevice_t, current: *mut c_uint, pending: *mut c_uint) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(NOT_SUPPORTED) };
        let mig = gpu(m, g).mig.as_ref().ok_or(NOT_SUPPORTED)?;
        if current.is_null() || pending.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        out(current, mig.enabled as c_uint)?;
        out(pending, mig.enabled as c_uint)
    }

    fn nvmlDeviceGetMaxMigDeviceCount(device: nvmlDevice_t, count: *mut c_uint) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(INVALID_ARGUMENT) };
        let mig = gpu(m, g).mig.as_ref().ok_or(NOT_SUPPORTED)?;
        out(count, if mig.enabled { mig.max_devices } else { 0 })
    }
    fn nvmlDeviceGetMigDeviceHandleByIndex(device: nvmlDevice_t, index: c_uint, mig_device: *mut nvmlDevice_t) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(INVALID_ARGUMENT) };
        let mig = gpu(m, g).mig.as_ref().ok_or(NOT_SUPPORTED)?;
        let max = if mig.enabled { mig.max_devices } else { 0 };
        if index >= max {
            return Err(INVALID_ARGUMENT);
        }
        if index as usize >= mig.devices.len() {
            return Err(NOT_FOUND);
        }
        out(mig_device, m.address(Handle::Mig(g, index)) as nvmlDevice_t)
    }
    fn nvmlDeviceIsMigDeviceHandle(device: nvmlDevice_t, is_mig: *mut c_uint) |c| {
        match c.handle(device)?.1 {
            Handle::Gpu(_) => out(is_mig, 0),
            Handle::Mig(..) => out(is_mig, 1),
            _ => Err(INVALID_ARGUMENT),
        }
    }
    fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig_device: nvmlDevice_t, device: *mut nvmlDevice_t) |c| {
        let (m, h) = c.handle(mig_device)?;
        let Handle::Mig(g, _) = h else { return Err(INVALID_ARGUMENT) };
        out(device, m.address(Handle::Gpu(g)) as nvmlDevice_t)
    }
    fn nvmlDeviceGetAttributes_v2(device: nvmlDevice_t, attributes: *mut nvmlDeviceAttributes_t) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Mig(g, i) = h else { return Err(NOT_SUPPORTED) };
        let d = mig_dev(m, g, i);
        out(attributes, nvmlDeviceAttributes_t {
            multiprocessorCount: d.multiprocessors,
            sharedCopyEngineCount: d.copy_engines,
            sharedDecoderCount: d.decoders,
            sharedEncoderCount: d.encoders,
            sharedJpegCount: d.jpeg_decoders,
            sharedOfaCount: d.ofa,
            gpuInstanceSliceCount: gi_slices(d),
            computeInstanceSliceCount: ci_slices(d),
            memorySizeMB: d.memory_mib,
        })
    }
    fn nvmlDeviceGetGpuInstanceId(device: nvmlDevice_t, id: *mut c_uint) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Mig(g, i) = h else { return Err(NOT_SUPPORTED) };
        out(id, mig_dev(m, g, i).gi_id(i as usize))
    }
    fn nvmlDeviceGetComputeInstanceId(device: nvmlDevice_t, id: *mut c_uint) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Mig(g, i) = h else { return Err(NOT_SUPPORTED) };
        out(id, mig_dev(m, g, i).ci_id())
    }
    fn nvmlDeviceGetGpuInstanceById(device: nvmlDevice_t, id: c_uint, gpu_instance: *mut nvmlGpuInstance_t) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(INVALID_ARGUMENT) };
        let mig = gpu(m, g).mig.as_ref().ok_or(NOT_SUPPORTED)?;
        if !mig.enabled {
            return Err(NOT_SUPPORTED);
        }
        let gi = Handle::GpuInstance(g, id);
        if !m.exists(gi) {
            return Err(NOT_FOUND);
        }
        out(gpu_instance, m.address(gi) as nvmlGpuInstance_t)
    }
    fn nvmlGpuInstanceGetInfo(gpu_instance: nvmlGpuInstance_t, info: *mut nvmlGpuInstanceInfo_t) |c| {
        let (m, h) = c.handle(gpu_instance)?;
        let Handle::GpuInstance(g, gi) = h else { return Err(INVALID_ARGUMENT) };
        let (_, d) = m.migs_in_gi(g, gi).next().ok_or(INVALID_ARGUMENT)?;
        out(info, nvmlGpuInstanceInfo_t {
            device: m.address(Handle::Gpu(g)) as nvmlDevice_t,
            id: gi,
            profileId: d.gi_profile,
            placement: nvmlGpuInstancePlacement_t { start: 0, size: gi_slices(d) },
        })
    }
    fn nvmlGpuInstanceGetComputeInstanceById(gpu_instance: nvmlGpuInstance_t, id: c_uint, compute_instance: *mut nvmlComputeInstance_t) |c| {
        let (m, h) = c.handle(gpu_instance)?;
        let Handle::GpuInstance(g, gi) = h else { return Err(INVALID_ARGUMENT) };
        let ci = Handle::ComputeInstance(g, gi, id);
        if !m.exists(ci) {
            return Err(NOT_FOUND);
        }
        out(compute_instance, m.address(ci) as nvmlComputeInstance_t)
    }
    fn nvmlComputeInstanceGetInfo_v2(compute_instance: nvmlComputeInstance_t, info: *mut nvmlComputeInstanceInfo_t) |c| {
        let (m, h) = c.handle(compute_instance)?;
        let Handle::ComputeInstance(g, gi, ci) = h else { return Err(INVALID_ARGUMENT) };
        let (_, d) = m.migs_in_gi(g, gi).find(|(_, d)| d.ci_id() == ci).ok_or(INVALID_ARGUMENT)?;
        out(info, nvmlComputeInstanceInfo_t {
            device: m.address(Handle::Gpu(g)) as nvmlDevice_t,
            gpuInstance: m.address(Handle::GpuInstance(g, gi)) as nvmlGpuInstance_t,
            id: ci,
            profileId: d.ci_profile,
            placement: nvmlComputeInstancePlacement_t { start: 0, size: ci_slices(d) },
        })
    }
    fn nvmlDeviceGetGpuInstanceProfileInfo(device: nvmlDevice_t, profile: c_uint, info: *mut nvmlGpuInstanceProfileInfo_t) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(INVALID_ARGUMENT) };
        let max = gpu(m, g).mig.as_ref().ok_or(NOT_SUPPORTED)?.max_devices;
        let d = mig_with(m, g, |d| d.gi_profile == profile).ok_or(NOT_SUPPORTED)?;
        let (gs, cs) = (gi_slices(d), ci_slices(d).max(1));
        out(info, nvmlGpuInstanceProfileInfo_t {
            id: profile,
            isP2pSupported: 0,
            sliceCount: gs,
            instanceCount: max / gs.max(1),
            // A device's SM count is its compute instance's; the GPU instance holds gs/cs of those.
            multiprocessorCount: d.multiprocessors * gs / cs,
            copyEngineCount: d.copy_engines,
            decoderCount: d.decoders,
            encoderCount: d.encoders,
            jpegCount: d.jpeg_decoders,
            ofaCount: d.ofa,
            memorySizeMB: d.memory_mib,
        })
    }
    fn nvmlGpuInstanceGetComputeInstanceProfileInfo(gpu_instance: nvmlGpuInstance_t, profile: c_uint, eng_profile: c_uint, info: *mut nvmlComputeInstanceProfileInfo_t) |c| {
        let (m, h) = c.handle(gpu_instance)?;
        let Handle::GpuInstance(g, gi) = h else { return Err(INVALID_ARGUMENT) };
        if eng_profile != 0 {
            return Err(NOT_SUPPORTED);
        }
        let gi_size = m.migs_in_gi(g, gi).next().map(|(_, d)| gi_slices(d)).ok_or(INVALID_ARGUMENT)?;
        let d = mig_with(m, g, |d| d.ci_profile == profile).ok_or(NOT_SUPPORTED)?;
        let cs = ci_slices(d);
        out(info, nvmlComputeInstanceProfileInfo_t {
            id: profile,
            sliceCount: cs,
            instanceCount: gi_size / cs.max(1),
            multiprocessorCount: d.multiprocessors,
            sharedCopyEngineCount: d.copy_engines,
            sharedDecoderCount: d.decoders,
            sharedEncoderCount: d.encoders,
            sharedJpegCount: d.jpeg_decoders,
            sharedOfaCount: d.ofa,
        })
    }

    fn nvmlDeviceGetGpuFabricInfo(device: nvmlDevice_t, info: *mut nvmlGpuFabricInfo_t) |c| {
        let (m, h) = c.handle(device)?;
        let (clusterUuid, status, cliqueId, state) = fabric_fields(m, h)?;
        out(info, nvmlGpuFabricInfo_t { clusterUuid, status, cliqueId, state })
    }
    fn nvmlDeviceGetGpuFabricInfoV(device: nvmlDevice_t, info: *mut nvmlGpuFabricInfoV_t) |c| {
        let (m, h) = c.handle(device)?;
        if info.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let version = (*info).version;
        let (clusterUuid, status, cliqueId, state) = fabric_fields(m, h)?;
        if version == version_word::<nvmlGpuFabricInfo_v2_t>(2) {
            let v2 = nvmlGpuFabricInfo_v2_t { version, clusterUuid, status, cliqueId, state, healthMask: 0 };
            out(info.cast::<nvmlGpuFabricInfo_v2_t>(), v2)
        } else if version == version_word::<nvmlGpuFabricInfo_v3_t>(3) {
            let v3 = nvmlGpuFabricInfo_v3_t { version, clusterUuid, status, cliqueId, state, healthMask: 0, healthSummary: 0 };
            out(info, v3)
        } else {
            Err(ARGUMENT_VERSION_MISMATCH)
        }
    }
}
