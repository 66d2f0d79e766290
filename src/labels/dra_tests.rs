//! The DRA profile: physical facts whatever the MIG strategy or sharing config say.

use super::*;
use crate::labels::test_support::{full, indexed, m, mig_enabled, ts};
use crate::labels::{compute, Labels};
use crate::snapshot::Snapshot;

fn config(mig_strategy: MigStrategy, sharing: Sharing, profile: Profile) -> LabelConfig {
    LabelConfig { mig_strategy, sharing, timestamp: Some(1_700_000_000), extended: false, profile }
}

fn dra(snap: &Snapshot, mig_strategy: MigStrategy, sharing: Sharing) -> (Labels, Vec<String>) {
    let out = compute(snap, &config(mig_strategy, sharing, Profile::Dra));
    (out.labels, out.warnings)
}

/// A node of two MIG-enabled GPUs (three MIG devices) and one full GPU, all one model.
fn mig_node() -> Snapshot {
    let gpus =
        indexed(vec![mig_enabled(vec![m(1, 1, 5), m(1, 1, 5)]), mig_enabled(vec![m(3, 3, 20)]), full()]);
    Snapshot { gpus, ..Snapshot::default() }
}

#[test]
fn never_a_sharing_or_mig_strategy_label_whatever_the_config() {
    let sharing = [
        Sharing::default(),
        ts(&[("nvidia.com/gpu", 4), ("nvidia.com/mig-1g.5gb", 2)]),
        Sharing::mps(&[("nvidia.com/gpu", 10)]),
    ];
    let mut first: Option<Labels> = None;
    for strategy in [MigStrategy::None, MigStrategy::Single, MigStrategy::Mixed] {
        for s in &sharing {
            let (got, _) = dra(&mig_node(), strategy, s.clone());
            for (k, v) in &got {
                let sharing_key = ["gpu.replicas", "gpu.sharing-strategy", "mps.capable", "mig.strategy"]
                    .iter()
                    .any(|n| k == &format!("nvidia.com/{n}"));
                assert!(!sharing_key && !k.starts_with("nvidia.com/mig-"), "{strategy:?} {s:?}: {k}");
                assert!(!v.contains("SHARED") && !v.contains("-MIG-"), "{strategy:?}: {k}={v}");
            }
            // The same labels under every strategy and sharing config: that is the point.
            match &first {
                None => first = Some(got),
                Some(f) => assert_eq!(&got, f, "{strategy:?} {s:?}"),
            }
        }
    }
    let got = first.unwrap();
    assert_eq!(got["nvidia.com/gpu.count"], "3", "physical GPUs, not MIG devices");
    assert_eq!(got["nvidia.com/gpu.product"], "MOCKMODEL");
    assert_eq!(got["nvidia.com/gpu.memory"], "300", "a physical GPU's memory");
    assert_eq!(got["nvidia.com/mig.capable"], "true");
    assert_eq!(got["nvidia.com/gpu.present"], "true");
    assert_eq!(got["nvidia.com/gfd.timestamp"], "1700000000");
}

#[test]
fn a_device_plugin_config_in_dra_mode_is_one_warning_naming_what_is_ignored() {
    let snap = Snapshot { gpus: vec![full()], ..Snapshot::default() };
    let (_, w) = dra(&snap, MigStrategy::None, Sharing::default());
    assert!(w.is_empty(), "{w:?}");
    let (_, w) = dra(&snap, MigStrategy::Single, ts(&[("nvidia.com/gpu", 4)]));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("sharing section") && w[0].contains("--mig-strategy=single"), "{w:?}");
}

#[test]
fn the_dra_profile_is_the_device_plugin_profile_less_sharing_plus_present() {
    // On a full-GPU node without sharing, the only differences are the three sharing keys
    // and gpu.present.
    let snap = Snapshot { gpus: vec![full(), full()], ..Snapshot::default() };
    let plugin = compute(&snap, &config(MigStrategy::None, Sharing::default(), Profile::DevicePlugin)).labels;
    let (mut got, _) = dra(&snap, MigStrategy::None, Sharing::default());
    assert_eq!(got.remove("nvidia.com/gpu.present").as_deref(), Some("true"));
    let mut want = plugin;
    for k in ["gpu.replicas", "gpu.sharing-strategy", "mps.capable"] {
        assert!(want.remove(&format!("nvidia.com/{k}")).is_some(), "{k}");
    }
    assert_eq!(got, want);
}

#[test]
fn no_gpus_no_present_label() {
    let (got, _) = dra(&Snapshot::default(), MigStrategy::None, Sharing::default());
    assert!(!got.contains_key("nvidia.com/gpu.present"), "{got:?}");
    assert!(got.keys().all(|k| k == "nvidia.com/gfd.timestamp"), "{got:?}");
}

#[test]
fn the_mode_spellings() {
    assert_eq!(AllocationMode::parse("dra"), Some(AllocationMode::Dra));
    assert_eq!(
        AllocationMode::parse("device-plugin").and_then(AllocationMode::fixed),
        Some(Profile::DevicePlugin)
    );
    assert_eq!(AllocationMode::parse("auto").map(AllocationMode::fixed), Some(None));
    assert_eq!(AllocationMode::parse("DRA"), None);
}
