//! Property tests: whatever the hardware reports, every published key and value is valid.

use nvlabel::labels::value::{is_valid_key, is_valid_value, product, sanitise};
use nvlabel::labels::{compute, LabelConfig, MigStrategy};
use nvlabel::probe::profile::profile_name;
use nvlabel::sharing::Sharing;
use nvlabel::snapshot::{Fabric, Gpu, MachineType, Mig, MigDevice, Snapshot, VgpuDevice};
use proptest::prelude::*;

/// Names that look like hardware strings, and arbitrary Unicode.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9 ()\\[\\]/.,+_-]{0,90}",
        any::<String>(),
        Just("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition".to_string()),
    ]
}

fn mig_device() -> impl Strategy<Value = MigDevice> {
    (
        prop_oneof!["[0-9]c?\\.?[0-9]g\\.[0-9]{1,3}gb(\\.me|\\.gfx|-me|\\.me\\.all)?", any::<String>()],
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(|(profile, memory_mib, n)| MigDevice {
            index: 0,
            uuid: None,
            profile,
            gi_id: 1,
            ci_id: 0,
            gi_profile_id: 0,
            ci_profile_id: 0,
            memory_mib,
            multiprocessors: n,
            gpu_instance_slices: n % 9,
            compute_instance_slices: n % 5,
            copy_engines: n % 7,
            decoders: 0,
            encoders: 0,
            jpeg_decoders: 0,
            ofa: 0,
        })
}

fn gpu() -> impl Strategy<Value = Gpu> {
    (
        prop_oneof![Just("NVIDIA A100-SXM4-40GB".to_string()), name()],
        any::<Option<u64>>(),
        (-2i32..16, -2i32..12),
        proptest::option::of((any::<bool>(), proptest::collection::vec(mig_device(), 0..4))),
        proptest::option::of((any::<[u8; 4]>(), any::<u32>(), 0u8..5, prop_oneof![Just(0u32), Just(999u32)])),
        proptest::option::of(prop_oneof![Just(0x030200u32), Just(0x030000), any::<u32>()]),
    )
        .prop_map(|(name, memory_bytes, (major, minor), mig, fabric, pci_class)| Gpu {
            index: 0,
            name,
            uuid: None,
            pci_bus_id: None,
            pci_class,
            memory_bytes,
            compute_capability: [major, minor],
            mig: mig.map(|(enabled, devices)| Mig { enabled, devices }),
            fabric: fabric.map(|(u, clique_id, state, status)| Fabric {
                cluster_uuid: format!(
                    "{:02x}{:02x}{:02x}{:02x}-0000-0000-0000-000000000001",
                    u[0], u[1], u[2], u[3]
                ),
                clique_id,
                state,
                status,
            }),
        })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (
        proptest::option::of(name()),
        any::<Option<i32>>(),
        proptest::collection::vec(gpu(), 0..6),
        proptest::option::of(name()),
        proptest::option::of(proptest::collection::vec((name(), name()), 0..3)),
    )
        .prop_map(|(driver_version, cuda, mut gpus, machine, vgpu)| {
            for (i, g) in gpus.iter_mut().enumerate() {
                g.index = i as u32;
            }
            Snapshot {
                driver_version,
                cuda_driver_version: cuda,
                gpus,
                machine_type: MachineType { path: "/m".into(), content: machine, error: None },
                vgpu: vgpu.map(|v| {
                    v.into_iter()
                        .map(|(a, b)| VgpuDevice {
                            address: "0000:01:00.0".into(),
                            host_driver_version: Some(a),
                            host_driver_branch: Some(b),
                        })
                        .collect()
                }),
                issues: vec![],
            }
        })
}

fn config() -> impl Strategy<Value = LabelConfig> {
    (
        prop_oneof![Just(MigStrategy::None), Just(MigStrategy::Single), Just(MigStrategy::Mixed)],
        0u32..4,
        "nvidia.com/(gpu|mig-1g.5gb|mig-3g.20gb)",
        any::<bool>(),
        any::<Option<u64>>(),
    )
        .prop_map(|(mig_strategy, replicas, resource, mps, timestamp)| LabelConfig {
            mig_strategy,
            sharing: if mps {
                Sharing::mps(&[(&resource, replicas)])
            } else {
                Sharing::time_slicing(&[(&resource, replicas)])
            },
            timestamp,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_label_is_valid(snap in snapshot(), config in config()) {
        let out = compute(&snap, &config);
        for (k, v) in &out.labels {
            prop_assert!(is_valid_key(k), "invalid key {k:?}");
            prop_assert!(is_valid_value(v), "invalid value {k}={v:?}");
        }
        if !snap.gpus.is_empty() {
            prop_assert!(out.labels.contains_key("nvidia.com/gpu.count"));
        }
    }

    #[test]
    fn labels_are_deterministic(snap in snapshot(), config in config()) {
        prop_assert_eq!(compute(&snap, &config), compute(&snap, &config));
    }

    #[test]
    fn the_product_suffix_always_survives(model in name(), profile in "[1-8]g\\.[0-9]{1,3}gb(\\.me|\\.gfx|\\.me\\.all)?", shared in any::<bool>()) {
        let mut suffix = vec!["MIG", profile.as_str()];
        if shared {
            suffix.push("SHARED");
        }
        let p = product(&model, &suffix).expect("a MIG product always has a value");
        prop_assert!(is_valid_value(&p), "{p:?}");
        prop_assert!(p.ends_with(&suffix.join("-")), "{p:?} lost its suffix");
        if sanitise(&model).len() + suffix.join("-").len() < 63 && is_valid_value(&sanitise(&model)) && !sanitise(&model).is_empty() {
            prop_assert_eq!(p, format!("{}-{}", sanitise(&model), suffix.join("-")), "GFD's value where it is valid");
        }
    }

    #[test]
    fn machine_types_are_valid_or_absent(content in name()) {
        let snap = Snapshot {
            gpus: vec![Gpu { index: 0, name: "X".into(), uuid: None, pci_bus_id: None, pci_class: None, memory_bytes: None, compute_capability: [8, 0], mig: None, fabric: None }],
            machine_type: MachineType { path: "/m".into(), content: Some(content), error: None },
            ..Snapshot::default()
        };
        let config = LabelConfig { mig_strategy: MigStrategy::None, sharing: Sharing::default(), timestamp: None };
        if let Some(v) = compute(&snap, &config).labels.get("nvidia.com/gpu.machine") {
            prop_assert!(is_valid_value(v) && !v.is_empty());
        }
    }

    #[test]
    fn mig_profile_names_never_panic(gi in 0u32..20, ci in 0u32..10, mib in any::<u64>(), parent in any::<u64>()) {
        if let Ok(name) = profile_name(gi, ci, mib, parent) {
            prop_assert!(name.contains('g'));
        }
    }
}
