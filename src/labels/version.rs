//! Driver and CUDA version labels, under both the deprecated and the current keys.

use super::{key, Labels};
use crate::snapshot::{Snapshot, Source};

/// GFD's driver version off NVML (CUDA without NVML, vfio): every part reads `unknown`.
const UNKNOWN_DRIVER: &str = "unknown.unknown.unknown";

/// Splits a driver version: major, minor, and the rest (empty for `X.Y`, `Z.W` for 4 parts).
pub fn split_driver(v: &str) -> Option<(&str, &str, String)> {
    let parts: Vec<&str> = v.split('.').collect();
    // Every part a run of letters and digits, so every label built from them is a valid value.
    let part_ok = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric());
    if parts.len() < 2 || v.len() > 63 || !parts.iter().all(part_ok) {
        return None;
    }
    Some((parts[0], parts[1], parts[2..].join(".")))
}

/// The version labels.
pub fn labels(snap: &Snapshot, warnings: &mut Vec<String>) -> Labels {
    let mut l = Labels::new();
    let driver = match (&snap.driver_version, snap.source) {
        (Some(driver), _) => Some(driver.as_str()),
        (None, Source::Nvml) => None,
        (None, Source::Cuda | Source::Vfio) => Some(UNKNOWN_DRIVER),
    };
    if let Some(driver) = driver {
        match split_driver(driver) {
            Some((major, minor, rev)) => {
                for (k, v) in [
                    ("cuda.driver.major", major),
                    ("cuda.driver.minor", minor),
                    ("cuda.driver.rev", &rev),
                    ("cuda.driver-version.major", major),
                    ("cuda.driver-version.minor", minor),
                    ("cuda.driver-version.revision", &rev),
                    ("cuda.driver-version.full", driver),
                ] {
                    l.insert(key(k), v.to_string());
                }
            }
            None => warnings.push(format!(
                "omitting driver version labels: Version {driver:?} does not match format \"X.Y[.Z]\""
            )),
        }
    }
    // vfio has no driver to ask: GFD labels CUDA 0.0 there.
    let cuda = if snap.source == Source::Vfio { Some(0) } else { snap.cuda_driver_version };
    match cuda {
        // The integer is 1000 * major + 10 * minor; a negative one is no version at all.
        Some(cuda) if cuda < 0 => {
            warnings.push(format!("omitting CUDA version labels: the driver reported CUDA version {cuda}"));
        }
        Some(cuda) => cuda_labels(cuda, snap.source, &mut l),
        None => {}
    }
    l
}

fn cuda_labels(cuda: i32, source: Source, l: &mut Labels) {
    {
        // GFD's CUDA backend reads the minor as (v % 100) / 10, which differs from NVML's
        // formula only for a minor of 10 or more; both are kept as GFD has them.
        let minor = if source == Source::Cuda { (cuda % 100) / 10 } else { (cuda % 1000) / 10 };
        let (major, minor) = (cuda / 1000, minor);
        for (k, v) in [
            ("cuda.runtime.major", major.to_string()),
            ("cuda.runtime.minor", minor.to_string()),
            ("cuda.runtime-version.major", major.to_string()),
            ("cuda.runtime-version.minor", minor.to_string()),
            ("cuda.runtime-version.full", format!("{major}.{minor}")),
        ] {
            l.insert(key(k), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions() {
        assert_eq!(split_driver("550.54.15"), Some(("550", "54", "15".into())));
        assert_eq!(split_driver("535.104.05"), Some(("535", "104", "05".into())), "leading zeros kept");
        assert_eq!(split_driver("400.300"), Some(("400", "300", String::new())));
        assert_eq!(split_driver("570.86.15.01"), Some(("570", "86", "15.01".into())));
        assert_eq!(split_driver("550"), None);
    }

    #[test]
    fn gfd_mock_block_v() {
        let snap = Snapshot {
            driver_version: Some("400.300".into()),
            cuda_driver_version: Some(8000),
            ..Default::default()
        };
        let l = labels(&snap, &mut Vec::new());
        let want = [
            ("cuda.driver-version.full", "400.300"),
            ("cuda.driver-version.major", "400"),
            ("cuda.driver-version.minor", "300"),
            ("cuda.driver-version.revision", ""),
            ("cuda.driver.major", "400"),
            ("cuda.driver.minor", "300"),
            ("cuda.driver.rev", ""),
            ("cuda.runtime-version.full", "8.0"),
            ("cuda.runtime-version.major", "8"),
            ("cuda.runtime-version.minor", "0"),
            ("cuda.runtime.major", "8"),
            ("cuda.runtime.minor", "0"),
        ];
        assert_eq!(l, want.iter().map(|(k, v)| (key(k), v.to_string())).collect::<Labels>());
    }

    #[test]
    fn a_negative_cuda_version_is_no_version() {
        let snap = Snapshot { cuda_driver_version: Some(-10), ..Default::default() };
        let mut w = Vec::new();
        assert!(labels(&snap, &mut w).keys().all(|k| !k.contains("cuda.runtime")));
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn cuda_12_4() {
        let snap = Snapshot { cuda_driver_version: Some(12040), ..Default::default() };
        assert_eq!(labels(&snap, &mut Vec::new())["nvidia.com/cuda.runtime-version.full"], "12.4");
    }

    #[test]
    fn a_bad_driver_string_omits_only_the_driver_labels() {
        let snap = Snapshot {
            driver_version: Some("550".into()),
            cuda_driver_version: Some(12040),
            ..Default::default()
        };
        let mut w = Vec::new();
        let l = labels(&snap, &mut w);
        assert_eq!(l.len(), 5);
        assert!(w[0].contains("\"550\""), "{w:?}");
    }

    /// Off NVML, GFD's driver version is `unknown` in every part; NVML's answer wins where there
    /// is one (JetPack 6, Thor). CUDA's minor is `(v % 100) / 10`; vfio's CUDA version is 0.0.
    #[test]
    fn each_source_versions_as_gfd_does() {
        let label = |source, driver: Option<&str>, cuda, k: &str| {
            let snap = Snapshot {
                source,
                driver_version: driver.map(String::from),
                cuda_driver_version: cuda,
                ..Default::default()
            };
            labels(&snap, &mut Vec::new()).get(&key(k)).cloned()
        };
        let full = "cuda.driver-version.full";
        assert_eq!(label(Source::Cuda, None, Some(11040), full).as_deref(), Some("unknown.unknown.unknown"));
        assert_eq!(label(Source::Cuda, None, None, "cuda.driver.rev").as_deref(), Some("unknown"));
        assert_eq!(label(Source::Cuda, Some("540.4.0"), None, full).as_deref(), Some("540.4.0"));
        assert_eq!(label(Source::Vfio, None, None, full).as_deref(), Some("unknown.unknown.unknown"));
        assert_eq!(label(Source::Nvml, None, None, full), None, "NVML's failed call omits them");
        let runtime = "cuda.runtime-version.full";
        // 12.10 as the integer 12100: NVML's formula reads minor 10, CUDA's backend 0.
        assert_eq!(label(Source::Nvml, None, Some(12100), runtime).as_deref(), Some("12.10"));
        assert_eq!(label(Source::Cuda, None, Some(12100), runtime).as_deref(), Some("12.0"));
        assert_eq!(label(Source::Cuda, None, Some(12060), runtime).as_deref(), Some("12.6"));
        assert_eq!(label(Source::Vfio, None, Some(12060), runtime).as_deref(), Some("0.0"));
        assert_eq!(label(Source::Vfio, None, None, runtime).as_deref(), Some("0.0"));
    }
}
