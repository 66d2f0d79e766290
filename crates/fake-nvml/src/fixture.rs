//! The machine fixture: the YAML schema of `docs/fake-nvml.md`, parsed strictly.

pub use crate::gpu_fixture::{Gpu, MigDevice};
use crate::topology_fixture::ConfCompute;
use serde::Deserialize;
use std::collections::BTreeSet;

/// The whole machine, as `FAKE_NVML_FIXTURE` describes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// `nvmlSystemGetDriverVersion`.
    pub driver_version: String,
    /// `nvmlSystemGetCudaDriverVersion`, NVML's integer form (12040 is 12.4).
    pub cuda_driver_version: i32,
    /// GPUs in index order.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// Injected failures.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// System-wide confidential-computing facts; absent means NOT_SUPPORTED.
    pub confidential_compute: Option<ConfCompute>,
    /// The CUDA driver's machine, for the fake `libcuda.so.1` that reads the same file.
    pub cuda: Option<serde::de::IgnoredAny>,
}

/// One injected failure.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Exported symbol name.
    pub function: String,
    /// `"3"` for GPU 3, `"3:1"` for MIG device 1 of GPU 3; absent matches every call.
    pub device: Option<String>,
    /// An `NVML_ERROR_*` name in lower case.
    pub error: String,
    /// Succeed this many matching calls first.
    #[serde(default)]
    pub after: u64,
}

/// Where a fault applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultTarget {
    /// Every call of the function.
    Any,
    /// One GPU.
    Gpu(u32),
    /// One MIG device of one GPU.
    Mig(u32, u32),
}

/// GPU-instance slice count by NVML GI profile id; `None` for ids it cannot name.
///
/// This table and [`ci_profile_slices`] repeat what nvlabel's probe knows (`src/probe/profile.rs`)
/// on purpose: the fake plays the driver, and a shared table would let one mistake pass both the
/// answer and its check. They differ where the driver and GFD's naming do: NVML has profile 17
/// (3 slices, graphics), which GFD's naming table refuses.
pub fn gi_profile_slices(profile: u32) -> Option<u32> {
    Some(match profile {
        0 | 7 | 9 | 10 | 13 | 15 => 1,
        1 | 8 | 11 | 14 | 16 => 2,
        2 | 17 => 3,
        3 | 12 => 4,
        6 => 6,
        4 => 7,
        5 => 8,
        _ => return None,
    })
}

/// Compute-instance slice count by NVML CI profile id.
pub fn ci_profile_slices(profile: u32) -> Option<u32> {
    Some(match profile {
        0 | 7 => 1,
        1 => 2,
        2 => 3,
        3 => 4,
        6 => 6,
        4 | 8 => 7,
        5 => 8,
        _ => return None,
    })
}

/// What a fixture is checked against: the library's own symbols and handle table (passed in, so
/// this module depends on neither the exports nor the state).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The NVML symbols a fault may name (one list per file of exports).
    pub symbols: &'static [&'static [&'static str]],
    /// How many device handles the library can hand out.
    pub max_handles: usize,
}

impl Fixture {
    /// Reads and validates the fixture at `path`.
    pub fn load(path: &str, limits: &Limits) -> Result<Fixture, String> {
        // Bounded, so a wrong path (a device, a huge file) cannot exhaust memory.
        const LIMIT: u64 = 64 << 20;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?,
                LIMIT + 1,
            ),
            &mut bytes,
        )
        .map_err(|e| format!("cannot read {path}: {e}"))?;
        if bytes.len() as u64 > LIMIT {
            return Err(format!("{path} is larger than the {LIMIT}-byte fixture limit"));
        }
        let text = String::from_utf8(bytes).map_err(|e| format!("{path} is not UTF-8: {e}"))?;
        Fixture::parse(&text, limits).map_err(|e| format!("invalid fixture {path}: {e}"))
    }

    /// Parses and validates fixture text.
    pub fn parse(text: &str, limits: &Limits) -> Result<Fixture, String> {
        let fixture: Fixture = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        fixture.validate(limits)?;
        Ok(fixture)
    }

    fn validate(&self, limits: &Limits) -> Result<(), String> {
        let handles: usize = self
            .gpus
            .iter()
            .map(|g| 1 + 3 * g.mig.as_ref().filter(|m| m.enabled).map_or(0, |m| m.devices.len()))
            .sum();
        if handles > limits.max_handles {
            return Err(format!(
                "gpus: {handles} device handles; the fake serves at most {}",
                limits.max_handles
            ));
        }
        crate::topology_fixture::validate_cc(self.confidential_compute.as_ref())?;
        for (g, gpu) in self.gpus.iter().enumerate() {
            crate::topology_fixture::validate_gpu(
                &format!("gpus[{g}]"),
                gpu.pcie.as_ref(),
                gpu.nvlink.as_ref(),
            )?;
            let Some(mig) = &gpu.mig else { continue };
            if mig.devices.len() > mig.max_devices as usize {
                return Err(format!(
                    "gpus[{g}].mig.devices: {} devices but max_devices is {}",
                    mig.devices.len(),
                    mig.max_devices
                ));
            }
            let mut gis = std::collections::BTreeMap::new();
            let mut cis = BTreeSet::new();
            for (m, dev) in mig.devices.iter().enumerate() {
                if dev.gi_profile > 17 {
                    return Err(format!(
                        "gpus[{g}].mig.devices[{m}].gi_profile: {} is not 0..17",
                        dev.gi_profile
                    ));
                }
                if dev.ci_profile > 8 {
                    return Err(format!(
                        "gpus[{g}].mig.devices[{m}].ci_profile: {} is not 0..8",
                        dev.ci_profile
                    ));
                }
                let gi = dev.gi_id(m);
                if let Some(prev) = gis.insert(gi, dev.gi_profile) {
                    if prev != dev.gi_profile {
                        return Err(format!(
                            "gpus[{g}].mig.devices[{m}].gi_profile: GPU instance {gi} already has profile {prev}"
                        ));
                    }
                }
                if !cis.insert((gi, dev.ci_id())) {
                    return Err(format!(
                        "gpus[{g}].mig.devices[{m}]: compute instance {} of GPU instance {gi} appears twice",
                        dev.ci_id()
                    ));
                }
            }
            if let Some(f) = &gpu.fabric {
                fabric_state(&f.state)
                    .ok_or_else(|| format!("gpus[{g}].fabric.state: unknown state {:?}", f.state))?;
                crate::codes::by_name(&f.status)
                    .ok_or_else(|| format!("gpus[{g}].fabric.status: unknown NVML return {:?}", f.status))?;
                parse_uuid(&f.cluster_uuid).ok_or_else(|| {
                    format!("gpus[{g}].fabric.cluster_uuid: not a UUID: {:?}", f.cluster_uuid)
                })?;
            }
        }
        for (i, fault) in self.faults.iter().enumerate() {
            // The fake libcuda.so.1 reads this list too; its entries use CUDA's names and errors.
            if fault.is_cuda() {
                continue;
            }
            if !limits.symbols.iter().any(|s| s.contains(&fault.function.as_str())) {
                return Err(format!(
                    "faults[{i}].function: {:?} is not an exported NVML symbol",
                    fault.function
                ));
            }
            crate::codes::by_name(&fault.error)
                .ok_or_else(|| format!("faults[{i}].error: unknown NVML error {:?}", fault.error))?;
            fault.target().map_err(|e| format!("faults[{i}].device: {e}"))?;
        }
        Ok(())
    }
}

impl Fault {
    /// Whether the fault is for the fake CUDA driver (a `cu*` function), which NVML ignores.
    pub fn is_cuda(&self) -> bool {
        self.function.starts_with("cu")
    }

    /// Parses `device`.
    pub fn target(&self) -> Result<FaultTarget, String> {
        let Some(d) = &self.device else {
            return Ok(FaultTarget::Any);
        };
        let num = |s: &str| {
            s.trim().parse::<u32>().map_err(|_| format!("{d:?} is not \"<gpu>\" or \"<gpu>:<mig>\""))
        };
        match d.split_once(':') {
            None => Ok(FaultTarget::Gpu(num(d)?)),
            Some((g, m)) => Ok(FaultTarget::Mig(num(g)?, num(m)?)),
        }
    }
}

/// NVML fabric state value for a fixture state name.
pub fn fabric_state(name: &str) -> Option<u8> {
    Some(match name {
        "not_supported" => 0,
        "not_started" => 1,
        "in_progress" => 2,
        "completed" => 3,
        _ => return None,
    })
}

/// Parses a UUID written with or without dashes into its 16 bytes.
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = text.bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_LIMITS: Limits =
        Limits { symbols: crate::exports::SYMBOLS, max_handles: crate::machine::MAX_HANDLES };
    use proptest::prelude::*;

    #[test]
    fn semantic_errors_name_the_field() {
        let base = "driver_version: \"1.2\"\ncuda_driver_version: 1\n";
        let e = Fixture::parse(
            &format!("{base}faults: [{{function: nvmlGetNothing, error: unknown}}]\n"),
            &TEST_LIMITS,
        )
        .unwrap_err();
        assert!(e.contains("faults[0].function"), "{e}");
        let e = Fixture::parse(
            &format!("{base}faults: [{{function: nvmlInit_v2, error: oops}}]\n"),
            &TEST_LIMITS,
        )
        .unwrap_err();
        assert!(e.contains("faults[0].error"), "{e}");
        let gpu = "gpus: [{name: x, memory_mib: 1, compute_capability: [8, 0], mig: {enabled: true, max_devices: 1, devices: [{gi_profile: 0, ci_profile: 0, memory_mib: 1}, {gi_profile: 0, ci_profile: 0, memory_mib: 1}]}}]";
        let e = Fixture::parse(&format!("{base}{gpu}\n"), &TEST_LIMITS).unwrap_err();
        assert!(e.contains("gpus[0].mig.devices"), "{e}");
    }

    #[test]
    fn the_cuda_block_is_left_to_the_cuda_fake() {
        let base = "driver_version: \"1.2\"\ncuda_driver_version: 1\n";
        let cuda = "cuda:\n  driver_version: 12060\n  devices: [{name: Orin, whatever: 1}]\n";
        let f = Fixture::parse(&format!("{base}{cuda}"), &TEST_LIMITS).unwrap();
        assert!(f.cuda.is_some());
        let e = Fixture::parse(&format!("{base}cudaa: {{}}\n"), &TEST_LIMITS).unwrap_err();
        assert!(e.contains("cudaa"), "other unknown keys stay errors: {e}");
    }

    #[test]
    fn cuda_faults_are_left_to_the_cuda_fake() {
        let base = "driver_version: \"1.2\"\ncuda_driver_version: 1\n";
        let faults = "faults:\n  - {function: cuDeviceGetName, device: \"0\", error: invalid_value}\n";
        let f = Fixture::parse(&format!("{base}{faults}"), &TEST_LIMITS).unwrap();
        assert!(f.faults[0].is_cuda());
        let e = Fixture::parse(
            &format!("{base}faults: [{{function: nvmlInit_v2, error: invalid_value}}]\n"),
            &TEST_LIMITS,
        )
        .unwrap_err();
        assert!(e.contains("faults[0].error"), "NVML faults are still checked: {e}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any text, or a valid fixture with arbitrary values spliced in: a fixture or an error.
        #[test]
        fn fixture_text_never_panics(text in prop_oneof![
            any::<String>(),
            "driver_version: \"[0-9.]{0,12}\"\ncuda_driver_version: -?[0-9]{0,12}\ngpus:\n  - name: [a-zA-Z ]{0,20}\n    memory_mib: -?[0-9]{0,22}\n    compute_capability: \\[-?[0-9]{1,3}, [0-9]{1,3}\\]\n    mig:\n      enabled: (true|false|maybe)\n      max_devices: [0-9]{0,5}\n      devices:\n        - \\{gi_profile: [0-9]{1,3}, ci_profile: [0-9]{1,3}, memory_mib: [0-9]{1,6}, gi_id: [0-9]{1,2}\\}\n(faults:\n  - \\{function: nvml[A-Za-z_]{0,20}, device: \"[0-9:]{0,4}\", error: [a-z_]{0,12}\\}\n)?",
        ]) {
            let _ = Fixture::parse(&text, &TEST_LIMITS);
        }
    }
}
