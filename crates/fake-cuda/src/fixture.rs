//! What the fake CUDA driver reads of a machine fixture: the top-level `cuda:` block, strictly,
//! and the `faults:` entries whose `function` starts with `cu`. Every other key belongs to the
//! NVML fake, which reads the same file and checks those itself.

use crate::faults::{self, Entry, Fault};
use serde::Deserialize;
use std::path::Path;

/// The file as this library parses it; no `deny_unknown_fields`, since the other top-level keys
/// are NVML's and a JetPack 5 machine has none of them.
#[derive(Deserialize)]
struct Raw {
    cuda: Option<Cuda>,
    #[serde(default)]
    faults: Vec<Entry>,
}

/// The CUDA half of a machine fixture, checked.
#[derive(Debug)]
pub struct Fixture {
    /// The CUDA driver's machine; absent means `cuInit` answers `CUDA_ERROR_NO_DEVICE`.
    pub cuda: Option<Cuda>,
    /// The injected failures of `cu*` functions, in file order.
    pub faults: Vec<Fault>,
}

/// The `cuda:` block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cuda {
    /// `cuDriverGetVersion`, CUDA's integer form (12060 is 12.6).
    pub driver_version: i32,
    /// Devices in ordinal order; none means `cuInit` answers `CUDA_ERROR_NO_DEVICE`.
    #[serde(default)]
    pub devices: Vec<Device>,
}

/// One device of the `cuda:` block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// `cuDeviceGetName` (CUDA's name, which differs from NVML's on Jetson).
    pub name: String,
    /// `cuDeviceTotalMem_v2`, and clamped to 32 bits by the legacy `cuDeviceTotalMem`.
    pub total_memory_bytes: u64,
    /// `[major, minor]`: attributes 75 and 76.
    pub compute_capability: [i32; 2],
    /// Attribute 16.
    #[serde(default = "one")]
    pub multiprocessors: i32,
    /// `cuDeviceGetUuid` as text; derived from the ordinal when absent.
    pub uuid: Option<String>,
    /// The 16 bytes `cuDeviceGetUuid` answers, filled in by validation.
    #[serde(skip)]
    pub uuid_bytes: [u8; 16],
}

fn one() -> i32 {
    1
}

impl Fixture {
    /// Reads and checks the fixture at `path`; `symbols` are those a fault may name.
    pub fn load(path: &Path, symbols: &[&str]) -> Result<Fixture, String> {
        // Bounded, so a wrong path (a device, a huge file) cannot exhaust memory.
        const LIMIT: u64 = 64 << 20;
        let shown = path.display();
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, LIMIT + 1), &mut bytes)
            .map_err(|e| format!("cannot read {shown}: {e}"))?;
        if bytes.len() as u64 > LIMIT {
            return Err(format!("{shown} is larger than the {LIMIT}-byte fixture limit"));
        }
        let text = String::from_utf8(bytes).map_err(|e| format!("{shown} is not UTF-8: {e}"))?;
        Fixture::parse(&text, symbols).map_err(|e| format!("invalid fixture {shown}: {e}"))
    }

    /// Parses and checks fixture text.
    pub fn parse(text: &str, symbols: &[&str]) -> Result<Fixture, String> {
        let raw: Raw = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        let mut cuda = raw.cuda;
        if let Some(cuda) = &mut cuda {
            check_cuda(cuda)?;
        }
        let mut faults = Vec::new();
        for (i, entry) in raw.faults.iter().enumerate() {
            if let Some(fault) = faults::check(entry, symbols).map_err(|e| format!("faults[{i}]{e}"))? {
                faults.push(fault);
            }
        }
        Ok(Fixture { cuda, faults })
    }
}

/// Checks the `cuda:` block and fills in each device's UUID bytes.
fn check_cuda(cuda: &mut Cuda) -> Result<(), String> {
    if cuda.driver_version <= 0 {
        return Err(format!(
            "cuda.driver_version: {} is not CUDA's integer form (12060 is 12.6)",
            cuda.driver_version
        ));
    }
    if i32::try_from(cuda.devices.len()).is_err() {
        return Err(format!("cuda.devices: {} devices do not fit a CUdevice", cuda.devices.len()));
    }
    for (i, d) in cuda.devices.iter_mut().enumerate() {
        let at = format!("cuda.devices[{i}]");
        if d.name.is_empty() || d.name.contains('\0') {
            return Err(format!("{at}.name: {:?} is empty or holds a NUL", d.name));
        }
        let [major, minor] = d.compute_capability;
        if !(1..=99).contains(&major) || !(0..=99).contains(&minor) {
            return Err(format!("{at}.compute_capability: [{major}, {minor}] is not a compute capability"));
        }
        if d.multiprocessors < 1 {
            return Err(format!("{at}.multiprocessors: {} is not a positive count", d.multiprocessors));
        }
        d.uuid_bytes = match &d.uuid {
            Some(text) => parse_uuid(text)
                .ok_or_else(|| format!("{at}.uuid: {text:?} is not a UUID (32 hex digits)"))?,
            None => default_uuid(i as u32),
        };
    }
    Ok(())
}

/// The bytes of a UUID written as NVML writes GPU UUIDs (`GPU-` and dashes optional).
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = text.strip_prefix("GPU-").unwrap_or(text).bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(hex.chunks(2)) {
        *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

/// The UUID of a device without one: the NVML fake's default for the same index, so that a
/// machine both fakes serve names its GPU 0 alike in both APIs.
pub fn default_uuid(ordinal: u32) -> [u8; 16] {
    let text = format!("GPU-{:08x}-fa4e-4000-8000-{:012x}", 0x6b5a_0000u32.wrapping_add(ordinal), ordinal);
    parse_uuid(&text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;

    const SYMBOLS: &[&str] = crate::exports::SYMBOLS;

    fn err(text: &str) -> String {
        Fixture::parse(text, SYMBOLS).unwrap_err()
    }

    const ORIN: &str = "cuda:\n  driver_version: 12060\n  devices:\n    - name: Orin\n      total_memory_bytes: 65890410496\n      compute_capability: [8, 7]\n";

    #[test]
    fn a_jetpack_5_fixture_is_only_a_cuda_block() {
        let f = Fixture::parse(ORIN, SYMBOLS).unwrap();
        let cuda = f.cuda.unwrap();
        assert_eq!(cuda.driver_version, 12060);
        let d = &cuda.devices[0];
        assert_eq!(
            (d.name.as_str(), d.total_memory_bytes, d.compute_capability),
            ("Orin", 65890410496, [8, 7])
        );
        assert_eq!(d.multiprocessors, 1, "the default");
        assert_eq!(d.uuid_bytes, default_uuid(0));
        assert_ne!(default_uuid(0), default_uuid(1));
        assert!(f.faults.is_empty());
    }

    #[test]
    fn nvml_keys_and_faults_are_left_to_the_nvml_fake() {
        let nvml = "driver_version: \"540.4.0\"\ncuda_driver_version: 12060\ngpus: [{name: \"Orin (nvgpu)\", anything: [1, {x: y}]}]\nsomething_new: {a: 1}\n";
        let faults = "faults:\n  - {function: nvmlDeviceGetName, device: \"0:1\", error: gpu_is_lost, hang: 3}\n  - {function: cuDeviceGetName, device: \"0\", error: unknown, after: 2}\n";
        let f = Fixture::parse(&format!("{nvml}{ORIN}{faults}"), SYMBOLS).unwrap();
        assert_eq!(
            f.faults,
            [Fault { function: "cuDeviceGetName".into(), device: Some(0), error: codes::UNKNOWN, after: 2 }]
        );
        assert!(Fixture::parse(nvml, SYMBOLS).unwrap().cuda.is_none());
    }

    #[test]
    fn unknown_keys_in_the_cuda_block_name_the_key() {
        let e = err(&format!("{ORIN}      multiprocesors: 16\n"));
        assert!(e.contains("unknown") && e.contains("multiprocesors"), "{e}");
        let e = err(&format!("{ORIN}  drivr: 1\n"));
        assert!(e.contains("unknown") && e.contains("drivr"), "{e}");
    }

    #[test]
    fn bad_values_name_the_field_and_value() {
        for (from, to, field, value) in [
            ("12060", "0", "cuda.driver_version", "0"),
            ("[8, 7]", "[0, 7]", "cuda.devices[0].compute_capability", "[0, 7]"),
            ("name: Orin", "name: \"\"", "cuda.devices[0].name", "\"\""),
            ("[8, 7]\n", "[8, 7]\n      multiprocessors: 0\n", "cuda.devices[0].multiprocessors", "0"),
            ("[8, 7]\n", "[8, 7]\n      uuid: GPU-12\n", "cuda.devices[0].uuid", "GPU-12"),
        ] {
            let e = err(&ORIN.replace(from, to));
            assert!(e.contains(field) && e.contains(value), "{field}: {e}");
        }
        let uuid = "[8, 7]\n      uuid: GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9\n";
        let f = Fixture::parse(&ORIN.replace("[8, 7]\n", uuid), SYMBOLS).unwrap();
        assert_eq!(f.cuda.unwrap().devices[0].uuid_bytes[..3], [0x0a, 0x1b, 0x2c]);
    }

    #[test]
    fn bad_cuda_faults_name_the_field_and_value() {
        for (fault, field, value) in [
            ("{function: cuDeviceGetNam, error: unknown}", "faults[0].function", "cuDeviceGetNam"),
            ("{function: cuInit, error: gpu_is_lost}", "faults[0].error", "gpu_is_lost"),
            ("{function: cuInit, error: success}", "faults[0].error", "success"),
            ("{function: cuInit}", "faults[0].error", "missing"),
            ("{function: cuInit, error: unknown, device: \"0:1\"}", "faults[0].device", "0:1"),
            ("{function: cuInit, error: unknown, after: -1}", "faults[0].after", "-1"),
            ("{function: cuInit, error: unknown, aftr: 1}", "faults[0]", "aftr"),
        ] {
            let e = err(&format!("{ORIN}faults: [{fault}]\n"));
            assert!(e.contains(field) && e.contains(value), "{fault}: {e}");
        }
        let f = Fixture::parse(&format!("{ORIN}faults: [{{function: cuInit, error: no_device}}]\n"), SYMBOLS);
        assert_eq!(f.unwrap().faults[0].error, codes::NO_DEVICE);
    }

    /// The users' docs show one whole machine; it must be a fixture this library reads as shown.
    #[test]
    fn the_documented_example_is_a_fixture() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/fake-nvml.md")).unwrap();
        let section = &doc[doc.find("## The fake CUDA driver").expect("the section")..];
        let yaml =
            section.split("```yaml\n").nth(1).and_then(|b| b.split("```").next()).expect("its example");
        let f = Fixture::parse(yaml, SYMBOLS).unwrap();
        let d = &f.cuda.unwrap().devices[0];
        assert_eq!((d.name.as_str(), d.multiprocessors, d.uuid_bytes[0]), ("Orin", 16, 0x0a));
        assert_eq!(f.faults.len(), 1, "only the cu* fault is ours: {:?}", f.faults);
    }

    #[test]
    fn uuids_parse_with_or_without_prefix_and_dashes() {
        let bytes = parse_uuid("GPU-00112233-4455-6677-8899-aabbccddeeff").unwrap();
        assert_eq!(bytes[0], 0x00);
        assert_eq!(bytes[15], 0xff);
        assert_eq!(parse_uuid("00112233445566778899AABBCCDDEEFF"), Some(bytes));
        assert_eq!(parse_uuid("MIG-00112233-4455-6677-8899-aabbccddeeff"), None);
        assert_eq!(parse_uuid("GPU-00112233-4455-6677-8899-aabbccddeefg"), None);
    }
}
