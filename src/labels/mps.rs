//! `nvidia.com/mps.capable`: MPS is configured. GFD exits when MPS meets a MIG-enabled GPU;
//! nvlabel reports `false`, says why, and (in `labels::merge`) drops every sharing claim, since
//! the device plugin cannot share such devices.

use super::{key, Labels};
use crate::sharing::{Sharing, Strategy};
use crate::snapshot::Gpu;

/// The first MIG-enabled GPU when MPS is the configured strategy.
pub fn on_mig<'a>(gpus: &'a [Gpu], sharing: &Sharing) -> Option<&'a Gpu> {
    if sharing.strategy() != Strategy::Mps {
        return None;
    }
    gpus.iter().find(|g| g.mig.as_ref().is_some_and(|m| m.enabled))
}

/// The MPS label.
pub fn labels(gpus: &[Gpu], sharing: &Sharing, warnings: &mut Vec<String>) -> Labels {
    let mut capable = sharing.strategy() == Strategy::Mps;
    if let Some(g) = on_mig(gpus, sharing) {
        warnings.push(format!(
            "MPS sharing is not supported for MIG devices (GPU {} has MIG enabled): nvidia.com/mps.capable=false, and no sharing is labelled",
            g.index
        ));
        capable = false;
    }
    Labels::from([(key("mps.capable"), capable.to_string())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::test_support::{full, indexed, m, mig_enabled, ts};
    use crate::labels::{compute, LabelConfig, MigStrategy};
    use crate::snapshot::Snapshot;

    #[test]
    fn mps_capability() {
        let mut w = Vec::new();
        assert_eq!(labels(&[full()], &Sharing::default(), &mut w)["nvidia.com/mps.capable"], "false");
        assert_eq!(
            labels(&[full()], &ts(&[("nvidia.com/gpu", 2)]), &mut w)["nvidia.com/mps.capable"],
            "false"
        );
        assert_eq!(
            labels(&[full()], &Sharing::mps(&[("nvidia.com/gpu", 1)]), &mut w)["nvidia.com/mps.capable"],
            "false"
        );
        assert_eq!(
            labels(&[full()], &Sharing::mps(&[("nvidia.com/gpu", 2)]), &mut w)["nvidia.com/mps.capable"],
            "true"
        );
        assert!(w.is_empty());
        // GFD exits here; nvlabel says false and why.
        let got = labels(&[mig_enabled(vec![])], &Sharing::mps(&[("nvidia.com/gpu", 2)]), &mut w);
        assert_eq!(got["nvidia.com/mps.capable"], "false");
        assert!(w[0].contains("MPS sharing is not supported for MIG devices"), "{w:?}");
    }

    #[test]
    fn mps_on_a_mig_node_claims_no_sharing() {
        // The device plugin cannot share MIG-enabled devices with MPS, so neither replicas, -SHARED
        // nor the strategy may say it does, under any MIG strategy.
        let gpus = indexed(vec![mig_enabled(vec![m(1, 1, 5), m(1, 1, 5)]), full()]);
        let snap = Snapshot { gpus, ..Snapshot::default() };
        let sharing = Sharing::mps(&[("nvidia.com/gpu", 10), ("nvidia.com/mig-1g.5gb", 4)]);
        for strategy in [MigStrategy::None, MigStrategy::Single, MigStrategy::Mixed] {
            let config = LabelConfig {
                mig_strategy: strategy,
                sharing: sharing.clone(),
                timestamp: None,
                extended: false,
                profile: crate::labels::Profile::DevicePlugin,
            };
            let out = compute(&snap, &config);
            assert!(out.mps_on_mig);
            assert_eq!(out.labels["nvidia.com/mps.capable"], "false");
            for (k, v) in &out.labels {
                assert!(!v.contains("SHARED"), "{strategy:?}: {k}={v}");
                if k.ends_with(".replicas") {
                    assert!(v == "0" || v == "1", "{strategy:?}: {k}={v}");
                }
                if k.ends_with(".sharing-strategy") {
                    assert_ne!(v, "mps", "{strategy:?}: {k}");
                }
            }
            assert_eq!(out.warnings.iter().filter(|w| w.contains("MPS sharing is not supported")).count(), 1);
        }
        // Without MIG the same config shares.
        let snap = Snapshot { gpus: vec![full()], ..Snapshot::default() };
        let config = LabelConfig {
            mig_strategy: MigStrategy::None,
            sharing,
            timestamp: None,
            extended: false,
            profile: Default::default(),
        };
        let out = compute(&snap, &config);
        assert!(!out.mps_on_mig);
        assert_eq!(out.labels["nvidia.com/gpu.sharing-strategy"], "mps");
    }
}
