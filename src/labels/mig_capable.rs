//! `nvidia.com/mig.capable`: whether any GPU supports MIG.

use super::{key, Labels};
use crate::snapshot::Gpu;

/// The MIG-capability label.
pub fn labels(gpus: &[Gpu]) -> Labels {
    Labels::from([(key("mig.capable"), gpus.iter().any(|g| g.mig.is_some()).to_string())])
}

#[cfg(test)]
mod tests {
    use crate::labels::test_support::{full, mig_enabled};
    use crate::labels::{compute, LabelConfig, MigStrategy};
    use crate::sharing::Sharing;
    use crate::snapshot::Snapshot;

    #[test]
    fn mig_capability() {
        let cases = [
            ("no GPUs: no device labels at all", vec![], None),
            ("one full GPU", vec![full()], Some("false")),
            ("two full GPUs", vec![full(), full()], Some("false")),
            ("one MIG GPU", vec![mig_enabled(vec![])], Some("true")),
            ("a full GPU and a MIG GPU", vec![full(), mig_enabled(vec![])], Some("true")),
        ];
        for (name, gpus, want) in cases {
            let snap = Snapshot { gpus, ..Default::default() };
            let config = LabelConfig {
                mig_strategy: MigStrategy::None,
                sharing: Sharing::default(),
                timestamp: None,
                extended: false,
                profile: crate::labels::Profile::DevicePlugin,
            };
            let got = compute(&snap, &config).labels;
            assert_eq!(got.get("nvidia.com/mig.capable").map(String::as_str), want, "{name}");
        }
    }
}
