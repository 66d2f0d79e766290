//! The topology keys of the fixture schema (`pcie`, `numa_node`, `nvlink`,
//! `confidential_compute`), parsed strictly and validated with the field named in every error.

use serde::Deserialize;

/// `pcie`: the GPU's PCIe link, maximum and current.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pcie {
    /// `nvmlDeviceGetMaxPcieLinkGeneration`.
    pub max_generation: Option<u32>,
    /// `nvmlDeviceGetMaxPcieLinkWidth`.
    pub max_width: Option<u32>,
    /// `nvmlDeviceGetCurrPcieLinkGeneration`; the maximum when absent.
    pub generation: Option<u32>,
    /// `nvmlDeviceGetCurrPcieLinkWidth`; the maximum when absent.
    pub width: Option<u32>,
    /// `nvmlDeviceGetPcieReplayCounter` and field 94; absent means NOT_SUPPORTED.
    pub replay_counter: Option<u64>,
}

/// `nvlink`: the GPU's NVLink version and links.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLink {
    /// Marketed version (`4.0`); `nvmlDeviceGetNvLinkVersion` answers its `nvmlNvlinkVersion_t`.
    pub version: Option<String>,
    /// Links in link order; an entry with `count` stands for that many links.
    #[serde(default)]
    pub links: Vec<Link>,
}

/// One `nvlink.links` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// `gpu` or `switch` (`nvmlDeviceGetNvLinkRemoteDeviceType`).
    pub remote: Option<String>,
    /// How many links this entry stands for.
    #[serde(default = "one")]
    pub count: u32,
    /// `nvmlDeviceGetNvLinkState`.
    #[serde(default = "yes")]
    pub active: bool,
    /// `nvmlDeviceGetNvLinkRemotePciInfo_v2`.
    pub remote_pci_bus_id: Option<String>,
}

fn one() -> u32 {
    1
}

fn yes() -> bool {
    true
}

/// `confidential_compute`: the system's confidential-computing capabilities and state.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfCompute {
    /// CPU capability name (`amd_sev_snp`).
    pub cpu: Option<String>,
    /// Whether the GPUs are CC capable.
    pub gpus_capable: Option<bool>,
    /// `ccFeature` of the state and settings.
    pub enabled: Option<bool>,
    /// `unavailable`, `sim` or `prod`.
    pub environment: Option<String>,
    /// `none` or `protected_pcie`.
    pub multi_gpu_mode: Option<String>,
}

/// NVML allows link ids below this (`NVML_NVLINK_MAX_LINKS`).
pub const MAX_LINKS: u32 = nvml_wrapper_sys::bindings::NVML_NVLINK_MAX_LINKS;

/// `nvmlNvlinkVersion_t` of a marketed version.
pub fn nvlink_version(name: &str) -> Option<u32> {
    let all = ["1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0"];
    all.iter().position(|v| *v == name).map(|i| i as u32 + 1)
}

/// `nvmlIntNvLinkDeviceType_t` of a remote name.
pub fn remote_type(name: &str) -> Option<u32> {
    use nvml_wrapper_sys::bindings::*;
    match name {
        "gpu" => Some(nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU),
        "switch" => Some(nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH),
        _ => None,
    }
}

/// `NVML_CC_SYSTEM_CPU_CAPS_*` of a CPU name.
pub fn cpu_caps(name: &str) -> Option<u32> {
    ["none", "amd_sev", "intel_tdx", "amd_sev_snp", "amd_snp_vtom"]
        .iter()
        .position(|c| *c == name)
        .map(|i| i as u32)
}

/// `NVML_CC_SYSTEM_ENVIRONMENT_*` of an environment name.
pub fn environment(name: &str) -> Option<u32> {
    ["unavailable", "sim", "prod"].iter().position(|c| *c == name).map(|i| i as u32)
}

/// `NVML_CC_SYSTEM_MULTIGPU_*` of a mode name.
pub fn multi_gpu_mode(name: &str) -> Option<u32> {
    ["none", "protected_pcie"].iter().position(|c| *c == name).map(|i| i as u32)
}

/// Whether `text` is a PCI bus id NVML could report (`00000000:07:00.0` or `0000:07:00.0`).
fn is_bus_id(text: &str) -> bool {
    let parts: Vec<&str> = text.split([':', '.']).collect();
    let hex =
        |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 4 && hex(parts[0], 8) && hex(parts[1], 2) && hex(parts[2], 2) && hex(parts[3], 1)
}

/// The link states of one GPU, one per link id: what `nvmlDeviceGetNvLinkState` answers.
pub fn link_states(nvlink: Option<&NvLink>) -> Vec<bool> {
    expand(nvlink).map(|l| l.active).collect()
}

/// The entry behind every link id, in link order.
pub fn expand(nvlink: Option<&NvLink>) -> impl Iterator<Item = &Link> {
    nvlink.into_iter().flat_map(|n| n.links.iter()).flat_map(|l| std::iter::repeat_n(l, l.count as usize))
}

/// Checks one GPU's topology keys; `at` is its path (`gpus[3]`).
pub fn validate_gpu(at: &str, pcie: Option<&Pcie>, nvlink: Option<&NvLink>) -> Result<(), String> {
    if let Some(p) = pcie {
        for (name, v, ok) in [
            ("max_generation", p.max_generation, 1..=6),
            ("generation", p.generation, 1..=6),
            ("max_width", p.max_width, 1..=32),
            ("width", p.width, 1..=32),
        ] {
            if let Some(v) = v.filter(|v| !ok.contains(v)) {
                return Err(format!("{at}.pcie.{name}: {v} is not {}..{}", ok.start(), ok.end()));
            }
        }
    }
    let Some(n) = nvlink else { return Ok(()) };
    if let Some(v) = n.version.as_deref().filter(|v| nvlink_version(v).is_none()) {
        return Err(format!("{at}.nvlink.version: {v:?} is not one of 1.0 2.0 2.2 3.0 3.1 4.0 5.0"));
    }
    let mut total = 0u64;
    for (i, l) in n.links.iter().enumerate() {
        if let Some(r) = l.remote.as_deref().filter(|r| remote_type(r).is_none()) {
            return Err(format!("{at}.nvlink.links[{i}].remote: {r:?} is not gpu or switch"));
        }
        if let Some(b) = l.remote_pci_bus_id.as_deref().filter(|b| !is_bus_id(b)) {
            return Err(format!("{at}.nvlink.links[{i}].remote_pci_bus_id: {b:?} is not a PCI bus id"));
        }
        total += u64::from(l.count);
    }
    if total > u64::from(MAX_LINKS) {
        return Err(format!("{at}.nvlink.links: {total} links; NVML has at most {MAX_LINKS}"));
    }
    Ok(())
}

/// Maps a fixture name to its NVML value.
type NameParser = fn(&str) -> Option<u32>;

/// Checks `confidential_compute`.
pub fn validate_cc(cc: Option<&ConfCompute>) -> Result<(), String> {
    let Some(cc) = cc else { return Ok(()) };
    let fields: [(&str, &Option<String>, NameParser, &str); 3] = [
        ("cpu", &cc.cpu, cpu_caps, "none, amd_sev, intel_tdx, amd_sev_snp or amd_snp_vtom"),
        ("environment", &cc.environment, environment, "unavailable, sim or prod"),
        ("multi_gpu_mode", &cc.multi_gpu_mode, multi_gpu_mode, "none or protected_pcie"),
    ];
    for (name, value, parse, allowed) in fields {
        if let Some(v) = value.as_deref().filter(|v| parse(v).is_none()) {
            return Err(format!("confidential_compute.{name}: {v:?} is not {allowed}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::fixture::{Fixture, Limits};

    const LIMITS: Limits =
        Limits { symbols: crate::exports::SYMBOLS, max_handles: crate::machine::MAX_HANDLES };

    fn parse(gpu_keys: &str, system_keys: &str) -> Result<Fixture, String> {
        let text = format!(
            "driver_version: \"1\"\ncuda_driver_version: 1\n{system_keys}\ngpus:\n  - name: x\n    memory_mib: 1\n    compute_capability: [9, 0]\n{gpu_keys}\n"
        );
        Fixture::parse(&text, &LIMITS)
    }

    #[test]
    fn every_topology_key_is_optional() {
        parse("    pcie: {}\n    nvlink: {}\n    numa_node: 0", "confidential_compute: {}").unwrap();
        parse("    nvlink: {links: [{}]}", "").unwrap();
    }

    #[test]
    fn bad_topology_values_name_the_field() {
        for (gpu, system, field) in [
            ("    nvlink: {version: \"4\"}", "", "gpus[0].nvlink.version"),
            ("    nvlink: {links: [{remote: cpu}]}", "", "gpus[0].nvlink.links[0].remote"),
            ("    nvlink: {links: [{remote: switch, count: 19}]}", "", "gpus[0].nvlink.links"),
            ("    nvlink: {links: [{remote: gpu, remote_pci_bus_id: nope}]}", "", "remote_pci_bus_id"),
            ("    pcie: {max_generation: 7}", "", "gpus[0].pcie.max_generation"),
            ("", "confidential_compute: {cpu: arm_cca}", "confidential_compute.cpu"),
            ("", "confidential_compute: {environment: test}", "confidential_compute.environment"),
            ("", "confidential_compute: {multi_gpu_mode: nvle}", "confidential_compute.multi_gpu_mode"),
        ] {
            let e = parse(gpu, system).unwrap_err();
            assert!(e.contains(field), "{field}: {e}");
        }
    }

    #[test]
    fn unknown_topology_keys_are_errors() {
        for (gpu, system, key) in [
            ("    pcie: {gen: 4}", "", "gen"),
            ("    nvlink: {links: [{remote: gpu, enabled: true}]}", "", "enabled"),
            ("    nvlink: {speed: 50}", "", "speed"),
            ("", "confidential_compute: {mode: on}", "mode"),
        ] {
            let e = parse(gpu, system).unwrap_err();
            assert!(e.contains(key), "{key}: {e}");
        }
    }

    #[test]
    fn link_entries_expand_by_count() {
        let f = parse("    nvlink: {links: [{remote: switch, count: 3}, {active: false}]}", "").unwrap();
        assert_eq!(super::link_states(f.gpus[0].nvlink.as_ref()), [true, true, true, false]);
    }
}
