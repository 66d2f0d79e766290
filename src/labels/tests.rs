//! The labeler-level cases of GFD's own unit tests, with GFD's mock devices, plus nvlabel's
//! deviations (README, "How nvlabel differs from GFD").

use super::*;
use crate::sharing::{ReplicatedResource, ReplicatedResources};
use crate::snapshot::{Fabric, Gpu, MachineType, Mig, MigDevice, VgpuDevice};

/// GFD's `NewFullGPU()`: MOCKMODEL, compute 8.0, 300 MiB, PCI class 0.
fn full() -> Gpu {
    Gpu {
        index: 0,
        name: "MOCKMODEL".into(),
        uuid: None,
        pci_bus_id: None,
        pci_device_id: None,
        pci_class: Some(0),
        memory_bytes: Some(300 << 20),
        compute_capability: [8, 0],
        mig: None,
        fabric: None,
        nvlink: None,
        pcie_max_generation: None,
        pcie_max_width: None,
        numa_node: None,
    }
}

/// GFD's `NewMigEnabledDevice(migs...)`: as `full()`, MIG enabled, compute 0.0.
fn mig_enabled(devices: Vec<MigDevice>) -> Gpu {
    Gpu { compute_capability: [0, 0], mig: Some(Mig { enabled: true, devices }), ..full() }
}

/// GFD's `NewMigDevice(gi, ci, gb)`: profile `<gi>g.<gb>gb`, memory `gb`, slices gi/ci, all else 0.
fn m(gi: u32, ci: u32, gb: u64) -> MigDevice {
    MigDevice {
        index: 0,
        uuid: None,
        profile: format!("{gi}g.{gb}gb"),
        gi_id: 0,
        ci_id: 0,
        gi_profile_id: 0,
        ci_profile_id: 0,
        memory_mib: gb,
        multiprocessors: 0,
        gpu_instance_slices: gi,
        compute_instance_slices: ci,
        copy_engines: 0,
        decoders: 0,
        encoders: 0,
        jpeg_decoders: 0,
        ofa: 0,
    }
}

fn indexed(mut gpus: Vec<Gpu>) -> Vec<Gpu> {
    for (i, g) in gpus.iter_mut().enumerate() {
        g.index = i as u32;
    }
    gpus
}

fn ts(resources: &[(&str, u32)]) -> Sharing {
    Sharing::time_slicing(resources)
}

fn renamed(mut s: Sharing) -> Sharing {
    for block in [&mut s.time_slicing, &mut s.mps].into_iter().flatten() {
        for r in &mut block.resources {
            r.rename = Some(format!("{}.shared", r.name));
        }
    }
    s
}

/// `"k=v"` pairs, prefixing `nvidia.com/`.
fn l(pairs: &[&str]) -> Labels {
    pairs
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (format!("nvidia.com/{k}"), v.to_string())
        })
        .collect()
}

fn full_gpu(gpus: &[Gpu], sharing: &Sharing) -> Labels {
    resource::full_gpu_labels(&indexed(gpus.to_vec()), sharing, &mut Vec::new())
}

fn with_strategy(gpus: &[Gpu], strategy: MigStrategy, sharing: &Sharing) -> Labels {
    let gpus = indexed(gpus.to_vec());
    let mut w = Vec::new();
    let mut labels = resource::full_gpu_labels(&gpus, sharing, &mut w);
    labels.extend(mig_strategy::labels(&gpus, strategy, sharing, &mut w));
    labels
}

const COMPUTE: [&str; 3] = ["gpu.compute.major=8", "gpu.compute.minor=0", "gpu.family=ampere"];

fn plus(a: &[&str], b: &[&str]) -> Labels {
    l(&[a, b].concat())
}

#[test]
fn mig_strategy_none_labels() {
    let ts2 = ts(&[("nvidia.com/gpu", 2)]);
    let none = Sharing::default();
    let cases: Vec<(&str, Vec<Gpu>, &Sharing, Labels)> = vec![
        ("no GPUs", vec![], &none, Labels::new()),
        (
            "one full GPU",
            vec![full()],
            &none,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=1",
                    "gpu.replicas=1",
                    "gpu.sharing-strategy=none",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL",
                ],
            ),
        ),
        (
            "one full GPU, time-sliced",
            vec![full()],
            &ts2,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=1",
                    "gpu.replicas=2",
                    "gpu.sharing-strategy=time-slicing",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL-SHARED",
                ],
            ),
        ),
        (
            "two full GPUs, time-sliced",
            vec![full(), full()],
            &ts2,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=2",
                    "gpu.replicas=2",
                    "gpu.sharing-strategy=time-slicing",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL-SHARED",
                ],
            ),
        ),
        (
            "MIG enabled without devices",
            vec![mig_enabled(vec![])],
            &ts2,
            l(&[
                "gpu.count=1",
                "gpu.replicas=0",
                "gpu.sharing-strategy=none",
                "gpu.memory=300",
                "gpu.product=MOCKMODEL",
            ]),
        ),
        (
            "two MIG GPUs without devices",
            vec![mig_enabled(vec![]), mig_enabled(vec![])],
            &ts2,
            l(&[
                "gpu.count=2",
                "gpu.replicas=0",
                "gpu.sharing-strategy=none",
                "gpu.memory=300",
                "gpu.product=MOCKMODEL",
            ]),
        ),
        (
            "an empty MIG GPU and a full GPU, time-sliced",
            vec![mig_enabled(vec![]), full()],
            &ts2,
            plus(
                &COMPUTE,
                &[
                    "gpu.count=2",
                    "gpu.replicas=2",
                    "gpu.sharing-strategy=time-slicing",
                    "gpu.memory=300",
                    "gpu.product=MOCKMODEL-SHARED",
                ],
            ),
        ),
    ];
    for (name, gpus, sharing, want) in cases {
        assert_eq!(with_strategy(&gpus, MigStrategy::None, sharing), want, "{name}");
    }
}

#[test]
fn mig_strategy_single_labels() {
    let none = Sharing::default();
    let invalid = [
        "gpu.count=0",
        "gpu.replicas=0",
        "gpu.sharing-strategy=",
        "gpu.memory=0",
        "gpu.product=MOCKMODEL-MIG-INVALID",
        "mig.strategy=single",
    ];
    let full_one = [
        "gpu.count=1",
        "gpu.replicas=1",
        "gpu.sharing-strategy=none",
        "gpu.memory=300",
        "gpu.product=MOCKMODEL",
        "mig.strategy=single",
    ];
    let mut attrs = m(1, 2, 100);
    (
        attrs.multiprocessors,
        attrs.copy_engines,
        attrs.decoders,
        attrs.encoders,
        attrs.jpeg_decoders,
        attrs.ofa,
    ) = (12, 13, 14, 15, 16, 17);
    let cases: Vec<(&str, Vec<Gpu>, Labels)> = vec![
        ("no GPUs", vec![], Labels::new()),
        ("one full GPU", vec![full()], plus(&COMPUTE, &full_one)),
        ("two full GPUs", vec![full(), full()], plus(&COMPUTE, &[&["gpu.count=2"], &full_one[1..]].concat())),
        (
            "one MIG device",
            vec![mig_enabled(vec![m(1, 2, 100)])],
            l(&[
                "gpu.count=1",
                "gpu.replicas=1",
                "gpu.sharing-strategy=none",
                "gpu.memory=100",
                "gpu.product=MOCKMODEL-MIG-1g.100gb",
                "mig.strategy=single",
                "gpu.multiprocessors=0",
                "gpu.slices.gi=1",
                "gpu.slices.ci=2",
                "gpu.engines.copy=0",
                "gpu.engines.decoder=0",
                "gpu.engines.encoder=0",
                "gpu.engines.jpeg=0",
                "gpu.engines.ofa=0",
            ]),
        ),
        (
            "two MIG GPUs of one profile, attributes reported",
            vec![mig_enabled(vec![attrs.clone()]), mig_enabled(vec![attrs])],
            l(&[
                "gpu.count=2",
                "gpu.replicas=1",
                "gpu.sharing-strategy=none",
                "gpu.memory=100",
                "gpu.product=MOCKMODEL-MIG-1g.100gb",
                "mig.strategy=single",
                "gpu.multiprocessors=12",
                "gpu.slices.gi=1",
                "gpu.slices.ci=2",
                "gpu.engines.copy=13",
                "gpu.engines.decoder=14",
                "gpu.engines.encoder=15",
                "gpu.engines.jpeg=16",
                "gpu.engines.ofa=17",
            ]),
        ),
        ("MIG enabled without devices", vec![mig_enabled(vec![])], l(&invalid)),
        ("two profiles on one GPU", vec![mig_enabled(vec![m(1, 2, 100), m(3, 4, 100)])], l(&invalid)),
        ("a MIG GPU and a full GPU", vec![mig_enabled(vec![m(1, 2, 100)]), full()], plus(&COMPUTE, &invalid)),
        (
            "a MIG GPU, a full GPU and an empty MIG GPU",
            vec![mig_enabled(vec![m(1, 2, 100)]), full(), mig_enabled(vec![])],
            plus(&COMPUTE, &invalid),
        ),
    ];
    for (name, gpus, want) in cases {
        assert_eq!(with_strategy(&gpus, MigStrategy::Single, &none), want, "{name}");
    }
}

#[test]
fn gpu_resource_labeler() {
    let base = ["gpu.count=1", "gpu.memory=300"];
    let cases: Vec<(Sharing, &str, &str, &str)> = vec![
        (Sharing::default(), "1", "none", "MOCKMODEL"),
        (ts(&[("nvidia.com/not-gpu", 2)]), "1", "none", "MOCKMODEL"),
        (ts(&[("nvidia.com/gpu", 2)]), "2", "time-slicing", "MOCKMODEL-SHARED"),
        (renamed(ts(&[("nvidia.com/gpu", 2)])), "2", "time-slicing", "MOCKMODEL"),
        (Sharing::mps(&[("nvidia.com/not-gpu", 2)]), "1", "none", "MOCKMODEL"),
        (Sharing::mps(&[("nvidia.com/gpu", 2)]), "2", "mps", "MOCKMODEL-SHARED"),
        (renamed(Sharing::mps(&[("nvidia.com/gpu", 2)])), "2", "mps", "MOCKMODEL"),
    ];
    for (sharing, replicas, strategy, product) in cases {
        let want = plus(
            &[&COMPUTE[..], &base].concat(),
            &[
                &format!("gpu.replicas={replicas}"),
                &format!("gpu.sharing-strategy={strategy}"),
                &format!("gpu.product={product}"),
            ],
        );
        assert_eq!(full_gpu(&[full()], &sharing), want, "{sharing:?}");
    }
}

#[test]
fn mig_resource_labeler() {
    let parent = mig_enabled(vec![m(1, 2, 300)]);
    let dev = m(1, 2, 300);
    let cases: Vec<(&str, Sharing, &str, &str, &str)> = vec![
        ("nvidia.com/gpu", Sharing::default(), "1", "none", "MOCKMODEL-MIG-1g.300gb"),
        (
            "nvidia.com/gpu",
            ts(&[("nvidia.com/gpu", 2)]),
            "2",
            "time-slicing",
            "MOCKMODEL-MIG-1g.300gb-SHARED",
        ),
        (
            "nvidia.com/gpu",
            renamed(ts(&[("nvidia.com/gpu", 2)])),
            "2",
            "time-slicing",
            "MOCKMODEL-MIG-1g.300gb",
        ),
        (
            "nvidia.com/mig-1g.1gb",
            Sharing {
                time_slicing: Some(ReplicatedResources {
                    resources: vec![
                        ReplicatedResource {
                            name: "nvidia.com/gpu".into(),
                            rename: Some("nvidia.com/gpu.shared".into()),
                            replicas: 2,
                        },
                        ReplicatedResource {
                            name: "nvidia.com/mig-1g.1gb".into(),
                            rename: None,
                            replicas: 2,
                        },
                    ],
                }),
                mps: None,
            },
            "2",
            "time-slicing",
            "MOCKMODEL-MIG-1g.300gb-SHARED",
        ),
        (
            "nvidia.com/mig-1g.1gb",
            renamed(ts(&[("nvidia.com/mig-1g.1gb", 2)])),
            "2",
            "time-slicing",
            "MOCKMODEL-MIG-1g.300gb",
        ),
    ];
    for (resource, sharing, replicas, strategy, product) in cases {
        let got = resource::mig_labels(resource, &parent.name, &dev, 1, &sharing, &mut Vec::new());
        let want: Labels = [
            ("count", "1"),
            ("replicas", replicas),
            ("sharing-strategy", strategy),
            ("memory", "300"),
            ("product", product),
            ("multiprocessors", "0"),
            ("slices.gi", "1"),
            ("slices.ci", "2"),
            ("engines.copy", "0"),
            ("engines.decoder", "0"),
            ("engines.encoder", "0"),
            ("engines.jpeg", "0"),
            ("engines.ofa", "0"),
        ]
        .iter()
        .map(|(k, v)| (format!("{resource}.{k}"), v.to_string()))
        .collect();
        assert_eq!(got, want, "{resource} {sharing:?}");
    }
    assert!(
        resource::mig_labels("nvidia.com/gpu", "X", &dev, 0, &Sharing::default(), &mut Vec::new()).is_empty()
    );
}

#[test]
fn mig_strategy_mixed_labels() {
    let gpus = [mig_enabled(vec![m(3, 0, 20), m(1, 0, 5)])];
    let got = with_strategy(&gpus, MigStrategy::Mixed, &Sharing::default());
    assert_eq!(got["nvidia.com/gpu.count"], "1");
    assert_eq!(got["nvidia.com/gpu.replicas"], "0");
    assert_eq!(got["nvidia.com/gpu.product"], "MOCKMODEL");
    assert_eq!(got["nvidia.com/mig.strategy"], "mixed");
    assert_eq!(got["nvidia.com/mig-3g.20gb.product"], "MOCKMODEL-MIG-3g.20gb");
    assert_eq!(got["nvidia.com/mig-3g.20gb.memory"], "20");
    assert_eq!(got["nvidia.com/mig-1g.5gb.count"], "1");
    assert_eq!(got["nvidia.com/mig-1g.5gb.slices.ci"], "0");
    assert_eq!(got.keys().filter(|k| k.starts_with("nvidia.com/mig-")).count(), 26);
}

#[test]
fn mig_capability() {
    let cases = [
        (vec![], None),
        (vec![full()], Some("false")),
        (vec![full(), full()], Some("false")),
        (vec![mig_enabled(vec![])], Some("true")),
        (vec![full(), mig_enabled(vec![])], Some("true")),
    ];
    for (gpus, want) in cases {
        let snap = Snapshot { gpus, ..Default::default() };
        let config = LabelConfig {
            mig_strategy: MigStrategy::None,
            sharing: Sharing::default(),
            timestamp: None,
            extended: false,
        };
        let got = compute(&snap, &config).labels;
        assert_eq!(got.get("nvidia.com/mig.capable").map(String::as_str), want);
    }
}

#[test]
fn mps_capability() {
    let mut w = Vec::new();
    assert_eq!(mps::labels(&[full()], &Sharing::default(), &mut w)["nvidia.com/mps.capable"], "false");
    assert_eq!(
        mps::labels(&[full()], &ts(&[("nvidia.com/gpu", 2)]), &mut w)["nvidia.com/mps.capable"],
        "false"
    );
    assert_eq!(
        mps::labels(&[full()], &Sharing::mps(&[("nvidia.com/gpu", 1)]), &mut w)["nvidia.com/mps.capable"],
        "false"
    );
    assert_eq!(
        mps::labels(&[full()], &Sharing::mps(&[("nvidia.com/gpu", 2)]), &mut w)["nvidia.com/mps.capable"],
        "true"
    );
    assert!(w.is_empty());
    // GFD exits here; nvlabel says false and why.
    let got = mps::labels(&[mig_enabled(vec![])], &Sharing::mps(&[("nvidia.com/gpu", 2)]), &mut w);
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
    let config = LabelConfig { mig_strategy: MigStrategy::None, sharing, timestamp: None, extended: false };
    let out = compute(&snap, &config);
    assert!(!out.mps_on_mig);
    assert_eq!(out.labels["nvidia.com/gpu.sharing-strategy"], "mps");
}

#[test]
fn gpu_mode() {
    let with = |classes: &[u32]| {
        let gpus: Vec<Gpu> = classes.iter().map(|c| Gpu { pci_class: Some(*c), ..full() }).collect();
        mode::labels(&gpus, &mut Vec::new())["nvidia.com/gpu.mode"].clone()
    };
    assert_eq!(with(&[0x030000]), "graphics");
    assert_eq!(with(&[0x030200]), "compute");
    assert_eq!(with(&[0x068000]), "unknown");
    assert_eq!(with(&[0x030200; 3]), "compute");
    assert_eq!(with(&[0x030000; 3]), "graphics");
    assert_eq!(with(&[0x030000, 0x030200, 0x030000]), "unknown");
    let unreadable = [Gpu { pci_class: Some(0x030200), ..full() }, Gpu { pci_class: None, ..full() }];
    assert_eq!(mode::labels(&unreadable, &mut Vec::new())["nvidia.com/gpu.mode"], "unknown");
}

#[test]
fn families() {
    use resource::family;
    let cases = [
        (1, 0, "tesla"),
        (2, 1, "fermi"),
        (3, 5, "kepler"),
        (5, 2, "maxwell"),
        (6, 1, "pascal"),
        (7, 0, "volta"),
        (7, 5, "turing"),
        (8, 6, "ampere"),
        (8, 9, "ada-lovelace"),
        (9, 0, "hopper"),
        (10, 0, "blackwell"),
        (11, 0, "blackwell"),
        (12, 0, "blackwell"),
        (13, 0, "rubin"),
        (4, 0, "undefined"),
        (14, 0, "undefined"),
    ];
    for (major, minor, want) in cases {
        assert_eq!(family(major, minor), want, "{major}.{minor}");
    }
}

fn fabric(uuid: &str, clique: u32) -> Option<Fabric> {
    Some(Fabric { cluster_uuid: uuid.into(), clique_id: clique, state: 3, status: 0 })
}

#[test]
fn clique() {
    const U1: &str = "7b968a6d-c8aa-45e1-9e07-e1e51be99c31";
    const U2: &str = "11111111-c8aa-45e1-9e07-e1e51be99c31";
    let with = |fabrics: Vec<Option<Fabric>>| {
        let gpus: Vec<Gpu> = fabrics.into_iter().map(|fabric| Gpu { fabric, ..full() }).collect();
        let mut w = Vec::new();
        (clique::labels(&gpus, &mut w).get("nvidia.com/gpu.clique").cloned(), w)
    };
    assert_eq!(with(vec![fabric(U1, 1), fabric(U1, 1)]).0.unwrap(), format!("{U1}.1"));
    assert_eq!(with(vec![None, fabric(U1, 7)]).0.unwrap(), format!("{U1}.7"));
    let (label, w) = with(vec![fabric(U1, 1), fabric(U2, 1)]);
    assert_eq!(label, None);
    assert!(w[0].starts_with("Cluster UUIDs are non-unique"), "{w:?}");
    let (label, w) = with(vec![fabric(U1, 1), fabric(U1, 2)]);
    assert_eq!(label, None);
    assert!(w[0].starts_with("Clique IDs are non-unique"), "{w:?}");
    let in_progress = Some(Fabric { state: 2, ..fabric(U1, 1).unwrap() });
    assert_eq!(with(vec![in_progress]).0, None);
    let failed = Some(Fabric { status: 999, ..fabric(U1, 1).unwrap() });
    assert_eq!(with(vec![failed]).0, None);
    assert_eq!(with(vec![fabric("00000000-0000-0000-0000-000000000000", 1)]).0, None);
    assert_eq!(with(vec![None]).0, None);
}

#[test]
fn primary_model_is_deterministic() {
    let named = |n: &str| Gpu { name: n.into(), ..full() };
    let gpus = indexed(vec![named("A"), named("B"), named("B")]);
    assert_eq!(resource::primary_model(&gpus), Some("B"), "most GPUs wins");
    let gpus = indexed(vec![named("B"), named("A"), named("A"), named("B")]);
    assert_eq!(resource::primary_model(&gpus), Some("B"), "ties go to the lowest index");
    let mut w = Vec::new();
    let labels = resource::full_gpu_labels(&gpus, &Sharing::default(), &mut w);
    assert_eq!(labels["nvidia.com/gpu.count"], "2", "count is the primary model's");
    assert!(w[0].contains("\"B\", \"A\""), "the warning names all models: {w:?}");
}

#[test]
fn primary_model_values_never_mix_models() {
    // GFD would let the other model's memory survive when the winner reports none.
    let a = Gpu { name: "A".into(), memory_bytes: None, ..full() };
    let b = Gpu { name: "B".into(), memory_bytes: Some(8 << 30), ..full() };
    let labels =
        resource::full_gpu_labels(&indexed(vec![a.clone(), a, b]), &Sharing::default(), &mut Vec::new());
    assert!(!labels.contains_key("nvidia.com/gpu.memory"));
}

/// GFD's `TestRunOneshot`: one full mock GPU, the mock manager (driver 400.300, CUDA 8.0), the
/// machine file `product-name`, PCI class 0 and the vGPU mock: 28 labels.
#[test]
fn gfd_run_oneshot_scenario() {
    let snap = Snapshot {
        driver_version: Some("400.300".into()),
        cuda_driver_version: Some(8000),
        gpus: vec![full()],
        machine_type: MachineType {
            path: "/tmp/machine-type".into(),
            content: Some("product-name\n".into()),
            error: None,
        },
        vgpu: Some(vec![VgpuDevice {
            address: "0000:01:00.0".into(),
            host_driver_version: Some("460.16".into()),
            host_driver_branch: Some("r460_00".into()),
        }]),
        issues: vec![],
        ..Snapshot::default()
    };
    let config = LabelConfig {
        mig_strategy: MigStrategy::None,
        sharing: Sharing::default(),
        timestamp: Some(1_700_000_000),
        extended: false,
    };
    let got = compute(&snap, &config).labels;
    assert_eq!(got.len(), 28);
    for (k, v) in [
        ("gfd.timestamp", "1700000000"),
        ("gpu.machine", "product-name"),
        ("mps.capable", "false"),
        ("gpu.mode", "unknown"),
        ("vgpu.present", "true"),
        ("vgpu.host-driver-version", "460.16"),
        ("vgpu.host-driver-branch", "r460_00"),
        ("mig.capable", "false"),
        ("gpu.count", "1"),
        ("gpu.product", "MOCKMODEL"),
        ("cuda.driver.rev", ""),
        ("cuda.runtime-version.full", "8.0"),
    ] {
        assert_eq!(got[&format!("nvidia.com/{k}")], v, "{k}");
    }
    let no_ts = LabelConfig { timestamp: None, ..config };
    assert_eq!(compute(&snap, &no_ts).labels.len(), 27);
}

#[test]
fn no_gpus_gives_only_node_labels() {
    let snap = Snapshot { vgpu: Some(vec![]), ..Default::default() };
    let config = LabelConfig {
        mig_strategy: MigStrategy::Single,
        sharing: Sharing::default(),
        timestamp: Some(1),
        extended: false,
    };
    assert_eq!(compute(&snap, &config).labels, l(&["gfd.timestamp=1", "vgpu.present=false"]));
}

#[test]
fn invalid_values_never_leave_compute() {
    let weird = Gpu { name: "((()))".into(), compute_capability: [-1, -1], ..full() };
    let snap = Snapshot {
        gpus: vec![weird],
        machine_type: MachineType {
            path: "/m".into(),
            content: Some("To Be Filled By O.E.M.".into()),
            error: None,
        },
        vgpu: Some(vec![VgpuDevice {
            address: "x".into(),
            host_driver_version: Some("\u{1}bad version!\u{2}".into()),
            host_driver_branch: Some("...".into()),
        }]),
        driver_version: Some("550.54.15-".into()),
        ..Default::default()
    };
    let config = LabelConfig {
        mig_strategy: MigStrategy::None,
        sharing: Sharing::default(),
        timestamp: None,
        extended: false,
    };
    let out = compute(&snap, &config);
    for (k, v) in &out.labels {
        assert!(value::is_valid_key(k) && value::is_valid_value(v), "{k}={v}");
    }
    assert!(!out.labels.contains_key("nvidia.com/gpu.product"));
    assert!(!out.labels.contains_key("nvidia.com/gpu.compute.major"));
    assert_eq!(out.labels["nvidia.com/gpu.machine"], "To-Be-Filled-By-O.E.M");
    assert_eq!(out.labels["nvidia.com/vgpu.host-driver-version"], "bad-version");
    assert!(!out.labels.contains_key("nvidia.com/vgpu.host-driver-branch"));
    // The version labeler refuses the driver string itself, so no driver label is left to filter.
    assert!(out.warnings.iter().any(|w| w.contains("omitting driver version labels")), "{:?}", out.warnings);
    assert!(out.labels.keys().all(|k| !k.contains("cuda.driver")));
    assert!(!out.warnings.iter().any(|w| w.contains("omitting invalid label")), "{:?}", out.warnings);
}

#[test]
fn extended_labels_describe_the_physical_node() {
    let l40s = |i| Gpu {
        index: i,
        name: "NVIDIA L40S".into(),
        memory_bytes: Some(46068 << 20),
        pci_device_id: Some(0x26b9),
        ..full()
    };
    let t4 = |i, name: &str| Gpu {
        index: i,
        name: name.into(),
        memory_bytes: Some(15360 << 20),
        pci_device_id: Some(0x1eb8),
        ..full()
    };
    // Two spellings of one model are one model; MIG does not change the physical view.
    let gpus = vec![l40s(0), t4(1, "Tesla T4"), l40s(2), t4(3, "NVIDIA T4"), mig_enabled(vec![m(1, 1, 5)])];
    let gpus = indexed(gpus);
    let mut w = Vec::new();
    let l = extended::labels(&gpus, &mut w);
    assert_eq!(l["nvidia.com/gpu.physical.count"], "5");
    assert_eq!(l["nvidia.com/gpu.models.l40s.count"], "2");
    assert_eq!(l["nvidia.com/gpu.models.t4.count"], "2");
    assert_eq!(l["nvidia.com/gpu.models.t4.memory"], "15360");
    assert_eq!(l["nvidia.com/gpu.models.mockmodel.count"], "1");
    // Primary by raw name, as gpu.product: two L40S beat one "Tesla T4" and one "NVIDIA T4".
    assert_eq!(l["nvidia.com/gpu.model"], "l40s");
    assert_eq!(l["nvidia.com/gpu.pci-device-id"], "26b9");
    assert_eq!(l["nvidia.com/gpu.physical.memory"], "46068");
    assert!(w.is_empty(), "{w:?}");
    // A name with no model in it: counted, named nowhere, said once.
    let odd = indexed(vec![Gpu { name: "NVIDIA".into(), pci_device_id: None, ..full() }]);
    let l = extended::labels(&odd, &mut w);
    assert_eq!(l["nvidia.com/gpu.physical.count"], "1");
    assert!(!l.keys().any(|k| k.starts_with("nvidia.com/gpu.model")), "{l:?}");
    assert!(!l.contains_key("nvidia.com/gpu.pci-device-id"));
    assert_eq!(w.len(), 1, "{w:?}");
    // No GPUs, no labels.
    assert!(extended::labels(&[], &mut w).is_empty());
}
