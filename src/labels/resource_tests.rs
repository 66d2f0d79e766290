//! Resource labels: GFD's labeler cases for full GPUs and MIG devices under every sharing config,
//! the family table, and how the primary model is chosen on a mixed node.

use super::*;
use crate::labels::test_support::{full, indexed, m, mig_enabled, plus, renamed, ts, COMPUTE};
use crate::sharing::{ReplicatedResource, ReplicatedResources};

/// The full-GPU labels of `gpus`, numbered as the probe numbers them.
fn full_gpu(gpus: &[Gpu], sharing: &Sharing) -> Labels {
    full_gpu_labels(&indexed(gpus.to_vec()), sharing, &mut Vec::new())
}

#[test]
fn gpu_resource_labeler() {
    let base = ["gpu.count=1", "gpu.memory=300"];
    let cases: Vec<(&str, Sharing, &str, &str, &str)> = vec![
        ("no sharing", Sharing::default(), "1", "none", "MOCKMODEL"),
        ("time-slicing another resource", ts(&[("nvidia.com/not-gpu", 2)]), "1", "none", "MOCKMODEL"),
        ("time-slicing the GPU", ts(&[("nvidia.com/gpu", 2)]), "2", "time-slicing", "MOCKMODEL-SHARED"),
        (
            "time-slicing the GPU, renamed",
            renamed(ts(&[("nvidia.com/gpu", 2)])),
            "2",
            "time-slicing",
            "MOCKMODEL",
        ),
        ("MPS on another resource", Sharing::mps(&[("nvidia.com/not-gpu", 2)]), "1", "none", "MOCKMODEL"),
        ("MPS on the GPU", Sharing::mps(&[("nvidia.com/gpu", 2)]), "2", "mps", "MOCKMODEL-SHARED"),
        ("MPS on the GPU, renamed", renamed(Sharing::mps(&[("nvidia.com/gpu", 2)])), "2", "mps", "MOCKMODEL"),
    ];
    for (name, sharing, replicas, strategy, product) in cases {
        let want = plus(
            &[&COMPUTE[..], &base].concat(),
            &[
                &format!("gpu.replicas={replicas}"),
                &format!("gpu.sharing-strategy={strategy}"),
                &format!("gpu.product={product}"),
            ],
        );
        assert_eq!(full_gpu(&[full()], &sharing), want, "{name}: {sharing:?}");
    }
}

#[test]
fn mig_resource_labeler() {
    let parent = mig_enabled(vec![m(1, 2, 300)]);
    let dev = m(1, 2, 300);
    let cases: Vec<(&str, &str, Sharing, &str, &str, &str)> = vec![
        (
            "single strategy, no sharing",
            "nvidia.com/gpu",
            Sharing::default(),
            "1",
            "none",
            "MOCKMODEL-MIG-1g.300gb",
        ),
        (
            "single strategy, time-sliced",
            "nvidia.com/gpu",
            ts(&[("nvidia.com/gpu", 2)]),
            "2",
            "time-slicing",
            "MOCKMODEL-MIG-1g.300gb-SHARED",
        ),
        (
            "single strategy, time-sliced and renamed",
            "nvidia.com/gpu",
            renamed(ts(&[("nvidia.com/gpu", 2)])),
            "2",
            "time-slicing",
            "MOCKMODEL-MIG-1g.300gb",
        ),
        (
            "mixed strategy, the GPU renamed, the profile time-sliced",
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
            "mixed strategy, the profile time-sliced and renamed",
            "nvidia.com/mig-1g.1gb",
            renamed(ts(&[("nvidia.com/mig-1g.1gb", 2)])),
            "2",
            "time-slicing",
            "MOCKMODEL-MIG-1g.300gb",
        ),
    ];
    for (name, resource, sharing, replicas, strategy, product) in cases {
        let got = mig_labels(resource, &parent.name, &dev, 1, &sharing, &mut Vec::new());
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
        assert_eq!(got, want, "{name}: {resource} {sharing:?}");
    }
    assert!(mig_labels("nvidia.com/gpu", "X", &dev, 0, &Sharing::default(), &mut Vec::new()).is_empty());
}

#[test]
fn families() {
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

#[test]
fn primary_model_is_deterministic() {
    let named = |n: &str| Gpu { name: n.into(), ..full() };
    let gpus = indexed(vec![named("A"), named("B"), named("B")]);
    assert_eq!(primary_model(&gpus), Some("B"), "most GPUs wins");
    let gpus = indexed(vec![named("B"), named("A"), named("A"), named("B")]);
    assert_eq!(primary_model(&gpus), Some("B"), "ties go to the lowest index");
    let mut w = Vec::new();
    let labels = full_gpu_labels(&gpus, &Sharing::default(), &mut w);
    assert_eq!(labels["nvidia.com/gpu.count"], "2", "count is the primary model's");
    assert!(w[0].contains("\"B\", \"A\""), "the warning names all models: {w:?}");
}

#[test]
fn primary_model_values_never_mix_models() {
    // GFD would let the other model's memory survive when the winner reports none.
    let a = Gpu { name: "A".into(), memory_bytes: None, ..full() };
    let b = Gpu { name: "B".into(), memory_bytes: Some(8 << 30), ..full() };
    let labels = full_gpu_labels(&indexed(vec![a.clone(), a, b]), &Sharing::default(), &mut Vec::new());
    assert!(!labels.contains_key("nvidia.com/gpu.memory"));
}
