//! Driver and CUDA version labels, under both the deprecated and the current keys.

use super::{key, Labels};
use crate::snapshot::Snapshot;

/// Splits a driver version: major, minor, and the rest (empty for `X.Y`, `Z.W` for 4 parts).
pub fn split_driver(v: &str) -> Option<(&str, &str, String)> {
    let parts: Vec<&str> = v.split('.').collect();
    if parts.len() < 2 {
        return None;
    }
    Some((parts[0], parts[1], parts[2..].join(".")))
}

/// The version labels.
pub fn labels(snap: &Snapshot, warnings: &mut Vec<String>) -> Labels {
    let mut l = Labels::new();
    if let Some(driver) = &snap.driver_version {
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
    if let Some(cuda) = snap.cuda_driver_version {
        let (major, minor) = (cuda / 1000, (cuda % 1000) / 10);
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
    l
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
}
