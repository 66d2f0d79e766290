//! The topology exports: PCIe link, NUMA node, NVLink (per link: state, version, remote type and
//! remote PCI address) and the system's confidential-computing facts, from the fixture keys of
//! `topology_fixture`. Every one answers `NOT_SUPPORTED` where its key is absent.

use crate::answers::*;
use crate::call::{export, Call};
use crate::codes::*;
use crate::machine::{Handle, Machine};
use crate::topology_fixture::{self as topo, ConfCompute, Link, Pcie, MAX_LINKS};
use nvml_wrapper_sys::bindings::*;
use std::ffi::c_uint;

/// The physical GPU behind a handle: MIG devices have no link of their own.
fn gpu_only(h: Handle) -> Result<u32, u32> {
    match h {
        Handle::Gpu(g) => Ok(g),
        Handle::Mig(..) => Err(NOT_SUPPORTED),
        _ => Err(INVALID_ARGUMENT),
    }
}

/// One field of a GPU's `pcie` key.
unsafe fn pcie(
    c: &mut Call,
    device: nvmlDevice_t,
    field: fn(&Pcie) -> Option<u32>,
    v: *mut c_uint,
) -> Result<(), u32> {
    let (m, h) = c.handle(device)?;
    let p = gpu(m, gpu_only(h)?).pcie.as_ref().ok_or(NOT_SUPPORTED)?;
    out(v, field(p).ok_or(NOT_SUPPORTED)?)
}

/// The fixture entry of link `link` of the GPU behind `device`; `NOT_SUPPORTED` beyond the list.
fn link(m: &Machine, h: Handle, link: c_uint) -> Result<(u32, &Link), u32> {
    let g = gpu_only(h)?;
    if link >= MAX_LINKS {
        return Err(INVALID_ARGUMENT);
    }
    let found = topo::expand(gpu(m, g).nvlink.as_ref()).nth(link as usize);
    Ok((g, found.ok_or(NOT_SUPPORTED)?))
}

/// The confidential-computing key, or `NOT_SUPPORTED`.
fn cc(m: &Machine) -> Result<&ConfCompute, u32> {
    m.fixture.confidential_compute.as_ref().ok_or(NOT_SUPPORTED)
}

/// A field the call reports; absent means the call is `NOT_SUPPORTED`.
fn need<T: Copy>(v: Option<T>) -> Result<T, u32> {
    v.ok_or(NOT_SUPPORTED)
}

/// The `environment` and `enabled` values of the state and settings calls.
fn cc_state(cc: &ConfCompute) -> Result<(u32, u32), u32> {
    let env = topo::environment(cc.environment.as_deref().ok_or(NOT_SUPPORTED)?).ok_or(UNKNOWN)?;
    Ok((env, u32::from(need(cc.enabled)?)))
}

export! {
    SYMBOLS = [];
    fn nvmlDeviceGetMaxPcieLinkGeneration(device: nvmlDevice_t, v: *mut c_uint) |c| {
        pcie(&mut c, device, |p| p.max_generation, v)
    }
    fn nvmlDeviceGetMaxPcieLinkWidth(device: nvmlDevice_t, v: *mut c_uint) |c| {
        pcie(&mut c, device, |p| p.max_width, v)
    }
    fn nvmlDeviceGetCurrPcieLinkGeneration(device: nvmlDevice_t, v: *mut c_uint) |c| {
        pcie(&mut c, device, |p| p.generation.or(p.max_generation), v)
    }
    fn nvmlDeviceGetCurrPcieLinkWidth(device: nvmlDevice_t, v: *mut c_uint) |c| {
        pcie(&mut c, device, |p| p.width.or(p.max_width), v)
    }
    fn nvmlDeviceGetNumaNodeId(device: nvmlDevice_t, node: *mut c_uint) |c| {
        let (m, h) = c.handle(device)?;
        out(node, gpu(m, gpu_only(h)?).numa_node.ok_or(NOT_SUPPORTED)?)
    }

    fn nvmlDeviceGetNvLinkState(device: nvmlDevice_t, l: c_uint, active: *mut nvmlEnableState_t) |c| {
        let (m, h) = c.handle(device)?;
        let (g, _) = link(m, h, l)?;
        let fixture_state = m.nvlink_active[g as usize][l as usize];
        // `set nvlink.<link>.active` in the event file overrides the fixture from then on.
        let on = c.g.live.adjust(g, crate::live::Key::NvlinkActive(l), u64::from(fixture_state)) != 0;
        out(active, if on { nvmlEnableState_enum_NVML_FEATURE_ENABLED } else { nvmlEnableState_enum_NVML_FEATURE_DISABLED })
    }
    fn nvmlDeviceGetNvLinkVersion(device: nvmlDevice_t, l: c_uint, version: *mut c_uint) |c| {
        let (m, h) = c.handle(device)?;
        let (g, _) = link(m, h, l)?;
        let name = gpu(m, g).nvlink.as_ref().and_then(|n| n.version.as_deref()).ok_or(NOT_SUPPORTED)?;
        out(version, topo::nvlink_version(name).ok_or(UNKNOWN)?)
    }
    fn nvmlDeviceGetNvLinkRemoteDeviceType(device: nvmlDevice_t, l: c_uint, kind: *mut nvmlIntNvLinkDeviceType_t) |c| {
        let (m, h) = c.handle(device)?;
        let (_, entry) = link(m, h, l)?;
        let remote = entry.remote.as_deref().ok_or(NOT_SUPPORTED)?;
        out(kind, topo::remote_type(remote).ok_or(UNKNOWN)?)
    }
    fn nvmlDeviceGetNvLinkRemotePciInfo_v2(device: nvmlDevice_t, l: c_uint, pci: *mut nvmlPciInfo_t) |c| {
        let (m, h) = c.handle(device)?;
        let (_, entry) = link(m, h, l)?;
        let bus = entry.remote_pci_bus_id.as_deref().ok_or(NOT_SUPPORTED)?;
        // A peer that is one of this machine's GPUs is reported exactly as that GPU reports itself
        // (bus id text and device id), so a client may compare the strings; any other address in
        // NVML's own `%08X:%02X:%02X.%X` form, whatever the fixture's spelling.
        let address = |id: &str| {
            let hex = |p: &str| u32::from_str_radix(p, 16).ok();
            id.split([':', '.']).map(hex).collect::<Option<Vec<u32>>>()
        };
        let peer = (0..m.fixture.gpus.len() as u32).find(|&p| address(&bus_id(m, p)) == address(bus));
        let text = match (peer, address(bus).as_deref()) {
            (Some(p), _) => bus_id(m, p),
            (None, Some(&[domain, bus, device, function])) => {
                format!("{domain:08X}:{bus:02X}:{device:02X}.{function:X}")
            }
            (None, _) => bus.to_string(),
        };
        out(pci, pci_info(&text, peer.and_then(|p| gpu(m, p).pci_device_id)))
    }

    fn nvmlSystemGetConfComputeCapabilities(caps: *mut nvmlConfComputeSystemCaps_t) |c| {
        let cc = cc(c.machine()?)?;
        let cpu = topo::cpu_caps(cc.cpu.as_deref().ok_or(NOT_SUPPORTED)?).ok_or(UNKNOWN)?;
        let gpus = if need(cc.gpus_capable)? { NVML_CC_SYSTEM_GPUS_CC_CAPABLE } else { NVML_CC_SYSTEM_GPUS_CC_NOT_CAPABLE };
        out(caps, nvmlConfComputeSystemCaps_t { cpuCaps: cpu, gpusCaps: gpus })
    }
    fn nvmlSystemGetConfComputeState(state: *mut nvmlConfComputeSystemState_t) |c| {
        let (environment, ccFeature) = cc_state(cc(c.machine()?)?)?;
        out(state, nvmlConfComputeSystemState_t { environment, ccFeature, devToolsMode: NVML_CC_SYSTEM_DEVTOOLS_MODE_OFF })
    }
    fn nvmlSystemGetConfComputeSettings(settings: *mut nvmlSystemConfComputeSettings_t) |c| {
        let cc = cc(c.machine()?)?;
        if settings.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let version = (*settings).version;
        if version != version_word::<nvmlSystemConfComputeSettings_v1_t>(1) {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let (environment, ccFeature) = cc_state(cc)?;
        let mode = topo::multi_gpu_mode(cc.multi_gpu_mode.as_deref().ok_or(NOT_SUPPORTED)?).ok_or(UNKNOWN)?;
        out(settings, nvmlSystemConfComputeSettings_v1_t {
            version,
            environment,
            ccFeature,
            devToolsMode: NVML_CC_SYSTEM_DEVTOOLS_MODE_OFF,
            multiGpuMode: mode,
        })
    }
    fn nvmlSystemGetConfComputeGpusReadyState(accepting: *mut c_uint) |c| {
        // Nothing in the fixture sets the ready state: with CC on the GPUs wait for it, as after
        // a boot before attestation; with CC off nothing holds them back.
        let enabled = need(cc(c.machine()?)?.enabled)?;
        out(accepting, if enabled { NVML_CC_ACCEPTING_CLIENT_REQUESTS_FALSE } else { NVML_CC_ACCEPTING_CLIENT_REQUESTS_TRUE })
    }
}
