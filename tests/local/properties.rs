//! Property tests: whatever the hardware reports, every key and value a labeler emits is valid
//! by an independent reading of Kubernetes' rules (tests/common/label_rules.rs), checked before
//! nvlabel's own final filter, so the filter cannot hide a labeler's mistake.

use crate::common;

use common::label_rules::{key_ok, value_ok};
use nvlabel::labels::value::{product, sanitise};
use nvlabel::labels::{compute, merge, LabelConfig, MigStrategy, Profile};
use nvlabel::probe::profile::profile_name;
use nvlabel::sharing::Sharing;
use nvlabel::snapshot::{
    ConfCompute, Fabric, Gpu, GpuDirect, MachineType, Mig, MigDevice, NvLink, NvLinkLink, NvLinkRemote,
    Snapshot, Source, VgpuDevice,
};
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

/// Arbitrary NVLinks: any version code, links to switches, CPUs, unknown ends, and GPUs at bus
/// ids that may or may not be on the node (the generated GPUs sit at buses 0 to 5).
fn nvlink() -> impl Strategy<Value = NvLink> {
    let remote = prop_oneof![
        Just(NvLinkRemote::Gpu),
        Just(NvLinkRemote::Switch),
        Just(NvLinkRemote::Ibmnpu),
        Just(NvLinkRemote::Unknown)
    ];
    let bus = proptest::option::of(prop_oneof!["0000000[0-1]:0[0-7]:00.0", any::<String>()]);
    let link = (any::<bool>(), remote, bus).prop_map(|(active, remote, remote_pci_bus_id)| NvLinkLink {
        active,
        remote,
        remote_pci_bus_id,
    });
    (any::<Option<u32>>(), proptest::option::of(proptest::collection::vec(link, 0..20)))
        .prop_map(|(version, links)| NvLink { version, links })
}

/// The topology facts of one GPU: NVLink, maximum PCIe generation and width, NUMA node.
type Topology = (Option<NvLink>, Option<u32>, Option<u32>, Option<u32>);

fn topology() -> impl Strategy<Value = Topology> {
    (proptest::option::of(nvlink()), any::<Option<u32>>(), any::<Option<u32>>(), any::<Option<u32>>())
}

fn gpu() -> impl Strategy<Value = Gpu> {
    (gpu_without_topology(), topology()).prop_map(
        |(g, (nvlink, pcie_max_generation, pcie_max_width, numa_node))| Gpu {
            nvlink,
            pcie_max_generation,
            pcie_max_width,
            numa_node,
            ..g
        },
    )
}

fn gpu_without_topology() -> impl Strategy<Value = Gpu> {
    (
        prop_oneof![Just("NVIDIA A100-SXM4-40GB".to_string()), name()],
        any::<Option<u64>>(),
        (-2i32..16, -2i32..12),
        proptest::option::of((any::<bool>(), proptest::collection::vec(mig_device(), 0..4))),
        proptest::option::of((any::<[u8; 4]>(), any::<u32>(), 0u8..5, prop_oneof![Just(0u32), Just(999u32)])),
        proptest::option::of(prop_oneof![Just(0x030200u32), Just(0x030000), any::<u32>()]),
        any::<Option<u16>>(),
    )
        .prop_map(|(name, memory_bytes, (major, minor), mig, fabric, pci_class, pci_device_id)| Gpu {
            index: 0,
            name,
            uuid: None,
            pci_bus_id: None,
            pci_device_id,
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
            nvlink: None,
            pcie_max_generation: None,
            pcie_max_width: None,
            numa_node: None,
        })
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (
        proptest::option::of(name()),
        any::<Option<i32>>(),
        proptest::collection::vec(gpu(), 0..6),
        proptest::option::of(name()),
        proptest::option::of(proptest::collection::vec((name(), name()), 0..3)),
        proptest::option::of((any::<u32>(), any::<bool>())),
        proptest::option::of(any::<(Option<bool>, Option<bool>, Option<bool>)>()),
        (any::<bool>(), 0..3u8),
    )
        .prop_map(
            |(driver_version, cuda, mut gpus, machine, vgpu, cc, gpudirect, (on_buses, source))| {
                for (i, g) in gpus.iter_mut().enumerate() {
                    g.index = i as u32;
                    // Often at addresses the generated links point to, so peers are found.
                    if on_buses {
                        g.pci_bus_id = Some(format!("00000000:{i:02X}:00.0"));
                    }
                }
                Snapshot {
                    // Every device source: CUDA and vfio label versions their own way.
                    source: [Source::Nvml, Source::Cuda, Source::Vfio][source as usize],
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
                    confidential_compute: cc
                        .map(|(cpu_caps, gpus_capable)| ConfCompute { cpu_caps, gpus_capable }),
                    gpudirect: gpudirect.map(|(rdma, storage, gdrcopy)| GpuDirect { rdma, storage, gdrcopy }),
                }
            },
        )
}

fn config() -> impl Strategy<Value = LabelConfig> {
    (
        prop_oneof![Just(MigStrategy::None), Just(MigStrategy::Single), Just(MigStrategy::Mixed)],
        0u32..4,
        "nvidia.com/(gpu|mig-1g.5gb|mig-3g.20gb)",
        any::<bool>(),
        any::<Option<u64>>(),
        any::<bool>(),
        prop_oneof![Just(Profile::DevicePlugin), Just(Profile::Dra)],
    )
        .prop_map(|(mig_strategy, replicas, resource, mps, timestamp, extended, profile)| LabelConfig {
            mig_strategy,
            sharing: if mps {
                Sharing::mps(&[(&resource, replicas)])
            } else {
                Sharing::time_slicing(&[(&resource, replicas)])
            },
            timestamp,
            extended,
            profile,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_label_is_valid_before_the_final_filter(snap in snapshot(), config in config()) {
        let merged = merge(&snap, &config);
        for (k, v) in &merged.labels {
            prop_assert!(key_ok(k), "a labeler emitted the invalid key {k:?}");
            prop_assert!(value_ok(v), "a labeler emitted the invalid value {k}={v:?}");
        }
        // So the safety net never has to catch anything, and what is published is what was merged.
        let out = compute(&snap, &config);
        prop_assert_eq!(&out.labels, &merged.labels);
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
        prop_assert!(value_ok(&p), "{p:?}");
        prop_assert!(p.ends_with(&suffix.join("-")), "{p:?} lost its suffix");
        if sanitise(&model).len() + suffix.join("-").len() < 63 && value_ok(&sanitise(&model)) && !sanitise(&model).is_empty() {
            prop_assert_eq!(p, format!("{}-{}", sanitise(&model), suffix.join("-")), "GFD's value where it is valid");
        }
    }

    #[test]
    fn machine_types_are_valid_or_absent(content in name()) {
        let snap = Snapshot {
            gpus: vec![Gpu { index: 0, name: "X".into(), uuid: None, pci_bus_id: None, pci_device_id: None, pci_class: None, memory_bytes: None, compute_capability: [8, 0], mig: None, fabric: None, nvlink: None, pcie_max_generation: None, pcie_max_width: None, numa_node: None }],
            machine_type: MachineType { path: "/m".into(), content: Some(content), error: None },
            ..Snapshot::default()
        };
        let config = LabelConfig { mig_strategy: MigStrategy::None, sharing: Sharing::default(), timestamp: None, extended: false, profile: Profile::DevicePlugin };
        if let Some(v) = merge(&snap, &config).labels.get("nvidia.com/gpu.machine") {
            prop_assert!(value_ok(v) && !v.is_empty(), "{v:?}");
        }
    }

    #[test]
    fn mig_profile_names_follow_the_documented_grammar(gi in 0u32..20, ci in 0u32..10, mib in any::<u64>(), parent in any::<u64>()) {
        match profile_name(gi, ci, mib, parent) {
            Ok(name) => {
                prop_assert!(grammar(&name), "{name:?} (gi {gi}, ci {ci})");
                prop_assert!(value_ok(&name), "{name:?}");
            }
            // Only profile ids outside NVML's tables, an unknown parent memory, or a compute
            // instance larger than its GPU instance fail.
            Err(e) => prop_assert!(
                gi > 16 || ci > 8 || parent == 0 || matches!(e, nvlabel::probe::profile::ProfileError::ComputeLargerThanGpu { .. }),
                "gi {gi} ci {ci} parent {parent}: {e}"
            ),
        }
    }

    #[test]
    fn a_snapshot_survives_its_own_file_format(snap in snapshot()) {
        let text = snap.to_yaml().unwrap();
        let back = Snapshot::from_yaml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        prop_assert_eq!(back, snap);
    }
}

/// GFD's MIG profile names: `[<c>c.]<g>g.<gb>gb` then nothing, `.me`, `.me.all`, `-me` or `.gfx`,
/// where the counts are positive and `c` is below `g`.
fn grammar(name: &str) -> bool {
    let (base, _attr) = ["", ".me", ".me.all", "-me", ".gfx"]
        .iter()
        .rev()
        .find_map(|a| name.strip_suffix(a).filter(|b| b.ends_with("gb")).map(|b| (b, *a)))
        .unwrap_or((name, ""));
    let Some(base) = base.strip_suffix("gb") else { return false };
    let parts: Vec<&str> = base.split('.').collect();
    let number =
        |s: &str, unit: char| s.strip_suffix(unit).and_then(|n| n.parse::<u64>().ok()).filter(|n| *n > 0);
    let gb_ok = |s: &str| s.parse::<u64>().is_ok();
    match parts.as_slice() {
        [g, gb] => number(g, 'g').is_some() && gb_ok(gb),
        [c, g, gb] => match (number(c, 'c'), number(g, 'g')) {
            (Some(c), Some(g)) => c < g && gb_ok(gb),
            _ => false,
        },
        _ => false,
    }
}
