//! `nvidia.com/gpu.mode`: `compute` or `graphics` from the GPUs' PCI class.

use super::{key, Labels};
use crate::snapshot::Gpu;

/// VGA-compatible controller.
const VGA: u32 = 0x030000;
/// 3D controller.
const COMPUTE_3D: u32 = 0x030200;

/// The mode label: one class for all GPUs decides it; anything else is `unknown`.
pub fn labels(gpus: &[Gpu], warnings: &mut Vec<String>) -> Labels {
    let mut classes: Vec<u32> = Vec::new();
    let mut unreadable = false;
    for g in gpus {
        match g.pci_class {
            Some(c) if !classes.contains(&c) => classes.push(c),
            Some(_) => {}
            None => unreadable = true,
        }
    }
    let mode = if unreadable {
        "unknown"
    } else {
        match classes.as_slice() {
            [VGA] => "graphics",
            [COMPUTE_3D] => "compute",
            [] | [_] => "unknown",
            _ => {
                warnings.push(format!("Not all GPU devices belong to the same class: {classes:#08x?}"));
                "unknown"
            }
        }
    };
    Labels::from([(key("gpu.mode"), mode.to_string())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::test_support::full;

    #[test]
    fn gpu_mode() {
        let with = |classes: &[u32]| {
            let gpus: Vec<Gpu> = classes.iter().map(|c| Gpu { pci_class: Some(*c), ..full() }).collect();
            labels(&gpus, &mut Vec::new())["nvidia.com/gpu.mode"].clone()
        };
        assert_eq!(with(&[0x030000]), "graphics");
        assert_eq!(with(&[0x030200]), "compute");
        assert_eq!(with(&[0x068000]), "unknown");
        assert_eq!(with(&[0x030200; 3]), "compute");
        assert_eq!(with(&[0x030000; 3]), "graphics");
        assert_eq!(with(&[0x030000, 0x030200, 0x030000]), "unknown");
        let unreadable = [Gpu { pci_class: Some(0x030200), ..full() }, Gpu { pci_class: None, ..full() }];
        assert_eq!(labels(&unreadable, &mut Vec::new())["nvidia.com/gpu.mode"], "unknown");
    }
}
