//! The exported `nvml*` functions (the topology, health and event ones in their own files, all
//! listed in [`SYMBOLS`]). Each one counts itself, takes the global lock (`call.rs`), never
//! dereferences a handle (handles are looked up by address) and never unwinds into its caller.
//! No other file of the library uses this one (only tests and the fuzz target take `SYMBOLS`).

use crate::answers::*;
use crate::call::{export, Call};
use crate::codes::{self, *};
use crate::machine::Handle;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_char, c_int, c_uint, CStr};

/// Every exported symbol, per file, for validating fixture fault names.
pub const SYMBOLS: &[&[&str]] = &[
    CORE_SYMBOLS,
    crate::topology::SYMBOLS,
    crate::health::HEALTH_SYMBOLS,
    crate::events::EVENT_SYMBOLS,
    crate::events::WAIT_SYMBOLS,
];

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
    drop(Call::begin("nvmlErrorString", &[]));
    codes::text(result).as_ptr().cast()
}

export! {
    CORE_SYMBOLS = ["nvmlErrorString"];
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
        out(pci, pci_info(&bus_id(m, g), gpu(m, g).pci_device_id))
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
