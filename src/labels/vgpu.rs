//! `nvidia.com/vgpu.*` from the PCI scan.

use super::{key, value, Labels};
use crate::snapshot::VgpuDevice;

/// The vGPU labels: none when the scan failed; the last vGPU's host driver wins, as in GFD.
pub fn labels(scan: Option<&[VgpuDevice]>, warnings: &mut Vec<String>) -> Labels {
    let Some(devices) = scan else {
        return Labels::new();
    };
    let mut l = Labels::from([(key("vgpu.present"), (!devices.is_empty()).to_string())]);
    for d in devices {
        match (&d.host_driver_version, &d.host_driver_branch) {
            (Some(v), Some(b)) => {
                for (k, raw) in [("vgpu.host-driver-version", v), ("vgpu.host-driver-branch", b)] {
                    match value::make_valid(raw) {
                        Some(v) => {
                            l.insert(key(k), v);
                        }
                        None => warnings
                            .push(format!("omitting nvidia.com/{k}: {raw:?} has no valid label value")),
                    }
                }
            }
            _ => warnings
                .push(format!("vGPU {} has no host driver record; its driver labels are omitted", d.address)),
        }
    }
    l
}
