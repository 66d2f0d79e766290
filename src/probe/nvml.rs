//! The NVML source: every fact is read once per pass, through the session's open NVML.

use super::calls::driver as mark;
use super::nvml_error::describe;
use super::{
    profile, raw, sysfs, topology, DeviceSource, NvmlSourceError, ProbeError, ProbeOptions, Session,
};
use crate::snapshot::{Fabric, Gpu, Issue, Mig, MigDevice, Snapshot, Source};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::collections::HashMap;

/// go-nvlib skips these (a DGX Station's display GPU), and so do we.
const DISPLAY_DEVICES: [&str; 2] = ["DGX Display", "NVIDIA DGX Display"];
/// GPU-instance profile indices go-nvlib searches.
const GI_PROFILE_INDICES: u32 = 18;
/// Compute-instance profile indices go-nvlib searches.
const CI_PROFILE_INDICES: u32 = 9;

/// A failed call: the function and its error.
struct Failure(&'static str, NvmlError);

fn fail(function: &'static str) -> impl Fn(NvmlError) -> Failure {
    move |e| Failure(function, e)
}

/// The NVML call `function` of GPU `index`, marked for the watchdog; its failure names it.
fn call<T>(
    function: &'static str,
    index: u32,
    f: impl FnOnce() -> Result<T, NvmlError>,
) -> Result<T, Failure> {
    mark(function, Some(index), f).map_err(fail(function))
}

/// The NVML source; `wsl` under WSL, whose GPUs have no PCI function in sysfs.
pub(super) struct NvmlSource {
    pub(super) wsl: bool,
}

impl DeviceSource for NvmlSource {
    fn source(&self) -> Source {
        Source::Nvml
    }

    fn collect(&self, session: &Session, opts: &ProbeOptions, snap: &mut Snapshot) -> Result<(), ProbeError> {
        let nvml = mark("nvmlInit_v2", None, || session.nvml(opts))?;
        collect(&nvml, session, opts, self.wsl, snap)
    }
}

/// Fills the NVML parts of `snap` from `session`'s open `nvml`.
fn collect(
    nvml: &Nvml,
    session: &Session,
    opts: &ProbeOptions,
    wsl: bool,
    snap: &mut Snapshot,
) -> Result<(), ProbeError> {
    let mut issues = Vec::new();
    snap.driver_version = match mark("nvmlSystemGetDriverVersion", None, || nvml.sys_driver_version()) {
        Ok(v) => Some(v),
        Err(e) => {
            issues.push(node_issue("nvmlSystemGetDriverVersion", &e, "driver version labels omitted"));
            None
        }
    };
    snap.cuda_driver_version = match mark("nvmlSystemGetCudaDriverVersion_v2", None, || {
        nvml.sys_cuda_driver_version()
    }) {
        Ok(v) => Some(v),
        Err(e) => {
            issues.push(node_issue("nvmlSystemGetCudaDriverVersion_v2", &e, "CUDA version labels omitted"));
            None
        }
    };
    let count = mark("nvmlDeviceGetCount_v2", None, || nvml.device_count()).map_err(|e| {
        session.check(&e);
        ProbeError::from(NvmlSourceError::DeviceCount(e))
    })?;
    if opts.topology {
        let conf = || topology::conf_compute(nvml, &mut issues);
        snap.confidential_compute = mark("nvmlSystemGetConfComputeState and its neighbours", None, conf);
    }
    for index in 0..count {
        match probe_gpu(nvml, session, index, opts, wsl, &mut issues) {
            Ok(Some(gpu)) => snap.gpus.push(gpu),
            Ok(None) => {}
            Err(Failure(function, e)) => {
                issues.push(Issue {
                    device: Some(index.to_string()),
                    function: function.into(),
                    error: describe(&e),
                    effect: "GPU excluded from this pass".into(),
                    source: Some(Source::Nvml),
                });
            }
        }
    }
    snap.issues.append(&mut issues);
    Ok(())
}

fn node_issue(function: &str, e: &NvmlError, effect: &str) -> Issue {
    let source = Some(Source::Nvml);
    Issue { device: None, function: function.into(), error: describe(e), effect: effect.into(), source }
}

/// A tolerated failure: recorded, and the fact it feeds is left unknown.
fn soft<T>(
    r: Result<T, NvmlError>,
    device: String,
    function: &str,
    effect: &str,
    issues: &mut Vec<Issue>,
) -> Option<T> {
    r.map_err(|e| {
        issues.push(Issue {
            device: Some(device),
            function: function.into(),
            error: describe(&e),
            effect: effect.into(),
            source: Some(Source::Nvml),
        });
    })
    .ok()
}

fn probe_gpu(
    nvml: &Nvml,
    session: &Session,
    index: u32,
    opts: &ProbeOptions,
    wsl: bool,
    issues: &mut Vec<Issue>,
) -> Result<Option<Gpu>, Failure> {
    let dev = call("nvmlDeviceGetHandleByIndex_v2", index, || nvml.device_by_index(index))?;
    let name = call("nvmlDeviceGetName", index, || dev.name())?;
    if DISPLAY_DEVICES.contains(&name.as_str()) {
        tracing::debug!(device = index, %name, "skipping display device");
        return Ok(None);
    }
    let id = index.to_string();
    let uuid = soft(
        mark("nvmlDeviceGetUUID", Some(index), || dev.uuid()),
        id.clone(),
        "nvmlDeviceGetUUID",
        "UUID unknown",
        issues,
    );
    let pci_info = mark("nvmlDeviceGetPciInfo_v3", Some(index), || dev.pci_info());
    let pci = soft(pci_info, id.clone(), "nvmlDeviceGetPciInfo_v3", "gpu.mode is unknown", issues);
    // NVML packs the device id above the vendor id; 0 means it does not know.
    let pci_device_id = pci.as_ref().map(|p| (p.pci_device_id >> 16) as u16).filter(|d| *d != 0);
    let pci_bus_id = pci.map(|p| p.bus_id);
    // A GPU whose NVML does not report memory (unified memory: DGX Spark's GB10) has none to
    // label, and is labelled without it, as GFD does. Any other failure excludes the device, not
    // tolerated as GFD does: a GPU without memory would make the node lose gpu.memory whenever it
    // happens to be the model's representative.
    let memory_bytes = match call("nvmlDeviceGetMemoryInfo_v2", index, || dev.memory_info()) {
        Ok(info) => Some(info.total),
        Err(Failure(function, e @ NvmlError::NotSupported)) => {
            issues.push(Issue {
                device: Some(id.clone()),
                function: function.into(),
                error: describe(&e),
                effect: "gpu.memory omitted (NVML reports no memory: unified memory)".into(),
                source: Some(Source::Nvml),
            });
            None
        }
        Err(failure) => return Err(failure),
    };
    let cc = call("nvmlDeviceGetCudaComputeCapability", index, || dev.cuda_compute_capability())?;
    let mig = match mark("nvmlDeviceGetMigMode", Some(index), || dev.mig_mode()) {
        Ok(mode) => {
            let enabled = mode.current == nvml_wrapper_sys::bindings::NVML_DEVICE_MIG_ENABLE;
            let migs = || probe_migs(nvml, &dev, index, memory_bytes, issues);
            let devices = if enabled { mark("the MIG device reads", Some(index), migs)? } else { Vec::new() };
            Some(Mig { enabled, devices })
        }
        // go-nvlib: no symbol or NOT_SUPPORTED both mean "not MIG capable".
        Err(NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_)) => None,
        Err(e) => return Err(Failure("nvmlDeviceGetMigMode", e)),
    };
    let fabric =
        call("nvmlDeviceGetGpuFabricInfo", index, || raw::fabric_info(nvml, &dev))?.map(|f| Fabric {
            cluster_uuid: format_uuid(&f.cluster_uuid),
            clique_id: f.clique_id,
            state: f.state,
            status: f.status,
        });
    // The class was read with the bus; the file again only when that read could not tell.
    let cached = |bus: &str| session.pci_class(&opts.sysfs_root, bus).ok_or(());
    let pci_class = pci_bus_id.as_deref().and_then(|bus| {
        match cached(bus).or_else(|()| sysfs::pci_class(&opts.sysfs_root, bus)) {
            Ok(class) => Some(class),
            // WSL shows Linux no PCI function for its GPUs: the class is absent, not a fault.
            Err(error) if wsl => {
                tracing::debug!(device = index, %error, "WSL: no PCI function, gpu.mode is unknown");
                None
            }
            Err(error) => {
                issues.push(Issue {
                    device: Some(id.clone()),
                    function: "sysfs PCI class".into(),
                    error,
                    effect: "gpu.mode is unknown".into(),
                    source: None,
                });
                None
            }
        }
    });
    let topology = || topology::gpu(nvml, &dev, index, issues);
    let topo =
        if opts.topology { mark("the topology reads", Some(index), topology) } else { Default::default() };
    Ok(Some(Gpu {
        index,
        name,
        uuid,
        pci_bus_id,
        pci_device_id,
        pci_class,
        memory_bytes,
        compute_capability: [cc.major, cc.minor],
        mig,
        fabric,
        nvlink: topo.nvlink,
        pcie_max_generation: topo.pcie_max_generation,
        pcie_max_width: topo.pcie_max_width,
        numa_node: topo.numa_node,
    }))
}

/// Canonical lower-case 8-4-4-4-12.
fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Per-GPU caches so each GPU instance and profile is looked up once per pass.
#[derive(Default)]
struct MigCache {
    gpu_instances: HashMap<u32, (raw::GpuInstance, u32)>,
    gi_profile_index: HashMap<u32, u32>,
    ci_profile_index: HashMap<u32, u32>,
}

fn probe_migs(
    nvml: &Nvml,
    gpu: &Device,
    index: u32,
    parent_bytes: Option<u64>,
    issues: &mut Vec<Issue>,
) -> Result<Vec<MigDevice>, Failure> {
    let max = gpu.mig_device_count().map_err(fail("nvmlDeviceGetMaxMigDeviceCount"))?;
    let mut cache = MigCache::default();
    let mut devices = Vec::new();
    for m in 0..max {
        let mig = match gpu.mig_device_by_index(m) {
            Ok(mig) => mig,
            Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
            Err(e) => return Err(Failure("nvmlDeviceGetMigDeviceHandleByIndex", e)),
        };
        match probe_mig(nvml, gpu, &mig, m, parent_bytes, &mut cache) {
            Ok(dev) => devices.push(dev),
            Err((function, error)) => {
                let device = format!("{index}:{m}");
                issues.push(Issue {
                    device: Some(device),
                    function: function.into(),
                    error,
                    effect: "MIG device skipped".into(),
                    source: Some(Source::Nvml),
                });
            }
        }
    }
    Ok(devices)
}

fn probe_mig(
    nvml: &Nvml,
    gpu: &Device,
    mig: &Device,
    index: u32,
    parent_bytes: Option<u64>,
    cache: &mut MigCache,
) -> Result<MigDevice, (&'static str, String)> {
    let err = |f: &'static str| move |e: NvmlError| (f, describe(&e));
    let uuid = mig.uuid().ok();
    let attrs = mig.attributes().map_err(err("nvmlDeviceGetAttributes_v2"))?;
    let gi_id = raw::gpu_instance_id(nvml, mig).map_err(err("nvmlDeviceGetGpuInstanceId"))?;
    let ci_id = raw::compute_instance_id(nvml, mig).map_err(err("nvmlDeviceGetComputeInstanceId"))?;
    let (gi, gi_profile_id) = match cache.gpu_instances.get(&gi_id) {
        Some(&found) => found,
        None => {
            let gi =
                raw::gpu_instance_by_id(nvml, gpu, gi_id).map_err(err("nvmlDeviceGetGpuInstanceById"))?;
            let profile = raw::gpu_instance_profile_id(nvml, gi).map_err(err("nvmlGpuInstanceGetInfo"))?;
            *cache.gpu_instances.entry(gi_id).or_insert((gi, profile))
        }
    };
    let ci =
        raw::compute_instance_by_id(nvml, gi, ci_id).map_err(err("nvmlGpuInstanceGetComputeInstanceById"))?;
    let ci_profile_id =
        raw::compute_instance_profile_id(nvml, ci).map_err(err("nvmlComputeInstanceGetInfo_v2"))?;
    let gi_index = cached(&mut cache.gi_profile_index, gi_profile_id, || {
        profile_index(gi_profile_id, GI_PROFILE_INDICES, |p| raw::gpu_instance_profile_info_id(nvml, gpu, p))
            .map_err(err("nvmlDeviceGetGpuInstanceProfileInfo"))
    })?;
    let ci_index = cached(&mut cache.ci_profile_index, ci_profile_id, || {
        profile_index(ci_profile_id, CI_PROFILE_INDICES, |p| {
            raw::compute_instance_profile_info_id(nvml, gi, p)
        })
        .map_err(err("nvmlGpuInstanceGetComputeInstanceProfileInfo"))
    })?;
    let profile = profile::profile_name(gi_index, ci_index, attrs.memory_size_mb, parent_bytes.unwrap_or(0))
        .map_err(|e| ("MIG profile name", e.to_string()))?;
    Ok(MigDevice {
        index,
        uuid,
        profile,
        gi_id,
        ci_id,
        gi_profile_id,
        ci_profile_id,
        memory_mib: attrs.memory_size_mb,
        multiprocessors: attrs.multiprocessor_count,
        gpu_instance_slices: attrs.gpu_instance_slice_count,
        compute_instance_slices: attrs.compute_instance_slice_count,
        copy_engines: attrs.shared_copy_engine_count,
        decoders: attrs.shared_decoder_count,
        encoders: attrs.shared_encoder_count,
        jpeg_decoders: attrs.shared_jpeg_count,
        ofa: attrs.shared_ofa_count,
    })
}

/// The cached value for `key`, computing and remembering it on a miss.
fn cached<E>(
    map: &mut HashMap<u32, u32>,
    key: u32,
    compute: impl FnOnce() -> Result<u32, E>,
) -> Result<u32, E> {
    if let Some(&v) = map.get(&key) {
        return Ok(v);
    }
    let v = compute()?;
    map.insert(key, v);
    Ok(v)
}

/// The profile index whose info carries `id`. NVML's ids equal their indices, so the first
/// lookup almost always answers; otherwise search the indices as go-nvlib does.
fn profile_index(
    id: u32,
    indices: u32,
    info_id: impl Fn(u32) -> Result<u32, NvmlError>,
) -> Result<u32, NvmlError> {
    match info_id(id) {
        Ok(found) if found == id => return Ok(id),
        Ok(_) | Err(NvmlError::NotSupported | NvmlError::InvalidArg) => {}
        Err(e) => return Err(e),
    }
    for i in (0..indices).filter(|&i| i != id) {
        match info_id(i) {
            Ok(found) if found == id => return Ok(i),
            Ok(_) | Err(NvmlError::NotSupported | NvmlError::InvalidArg) => {}
            Err(e) => return Err(e),
        }
    }
    Err(NvmlError::NotFound)
}
