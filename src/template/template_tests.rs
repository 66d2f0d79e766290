use super::forms::{render, render_all, Form, FormError};
use super::*;
use crate::labels::MigStrategy;
use crate::sharing::{ReplicatedResource, Sharing};
use std::collections::BTreeMap;
use std::path::Path;

fn snapshot(machine: &str) -> Snapshot {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/golden/{machine}.snapshot.yaml"));
    Snapshot::load(&path).unwrap()
}

fn config(mig_strategy: MigStrategy, sharing: Sharing) -> LabelConfig {
    LabelConfig { mig_strategy, sharing, timestamp: Some(1), extended: false, profile: Profile::DevicePlugin }
}

#[test]
fn ten_rtx_4090_time_sliced_twice_advertise_twenty() {
    let t = of_snapshot(
        &snapshot("rtx4090-x10"),
        &config(MigStrategy::None, Sharing::time_slicing(&[("nvidia.com/gpu", 2)])),
    );
    assert_eq!(t.capacity, Capacity::from([("nvidia.com/gpu".to_string(), 20)]));
    assert_eq!(t.labels["nvidia.com/gpu.replicas"], "2");
    assert!(!t.labels.contains_key("nvidia.com/gfd.timestamp"), "a template has no timestamp");
}

#[test]
fn a_renamed_resource_is_advertised_under_its_new_name() {
    let mut sharing = Sharing::time_slicing(&[("nvidia.com/gpu", 2)]);
    let entry = ReplicatedResource {
        name: "nvidia.com/gpu".into(),
        rename: Some("nvidia.com/gpu.shared".into()),
        replicas: 2,
    };
    sharing.time_slicing.as_mut().unwrap().resources = vec![entry];
    let t = of_snapshot(&snapshot("h100-x8"), &config(MigStrategy::None, sharing));
    assert_eq!(t.capacity, Capacity::from([("nvidia.com/gpu.shared".to_string(), 16)]));
}

#[test]
fn mixed_mig_advertises_each_profile_and_the_whole_gpus_apart() {
    let s = snapshot("a100-mig-mixed");
    let t = of_snapshot(&s, &config(MigStrategy::Mixed, Sharing::default()));
    let count = |r: &str| t.labels[&format!("{r}.count")].parse::<u64>().unwrap();
    for profile in ["1c.3g.20gb", "1g.5gb", "1g.5gb.me", "2g.10gb", "3g.20gb", "4g.20gb"] {
        let r = format!("nvidia.com/mig-{profile}");
        assert_eq!(t.capacity[&r], count(&r), "{r}: {:?}", t.capacity);
    }
    // The GPUs without MIG are whole GPUs.
    let whole = s.gpus.iter().filter(|g| !g.mig.as_ref().is_some_and(|m| m.enabled)).count() as u64;
    assert!(whole > 0 && whole < s.gpus.len() as u64, "the fixture mixes both");
    assert_eq!(t.capacity.get("nvidia.com/gpu"), Some(&whole), "{:?}", t.capacity);
    // Where every GPU has MIG on, mixed advertises no whole GPU: no `nvidia.com/gpu: 0`.
    let all_mig = of_snapshot(&snapshot("a100-mig-single"), &config(MigStrategy::Mixed, Sharing::default()));
    assert!(!all_mig.capacity.contains_key("nvidia.com/gpu"), "{:?}", all_mig.capacity);
    assert!(!all_mig.capacity.is_empty());
    // Nor does a node without GPUs advertise `nvidia.com/gpu: 0`, a resource no pod could fit.
    let none = of_snapshot(&snapshot("no-gpus"), &config(MigStrategy::None, Sharing::default()));
    assert_eq!(none.capacity, BTreeMap::new());
    let single = of_snapshot(&snapshot("a100-mig-single"), &config(MigStrategy::Single, Sharing::default()));
    assert_eq!(
        single.capacity["nvidia.com/gpu"],
        single.labels["nvidia.com/gpu.count"].parse::<u64>().unwrap()
    );
}

#[test]
fn run_time_keys_are_left_out_and_named() {
    let t = of_snapshot(&snapshot("gh200-imex"), &config(MigStrategy::None, Sharing::default()));
    assert!(!t.labels.contains_key("nvidia.com/gpu.clique"), "{:?}", t.labels);
    assert!(t.left_out.iter().any(|l| l.key == "nvidia.com/gpu.clique"), "{:?}", t.left_out);
}

#[test]
fn a_pool_without_a_driver_leaves_its_version_labels_out_and_says_so() {
    let mut s = snapshot("t4");
    (s.driver_version, s.cuda_driver_version) = (None, None);
    let t = of_snapshot(&s, &config(MigStrategy::None, Sharing::default()));
    assert!(!t.labels.keys().any(|k| k.starts_with("nvidia.com/cuda.")), "{:?}", t.labels);
    let keys: Vec<&str> = t.left_out.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["nvidia.com/cuda.driver*", "nvidia.com/cuda.runtime*"]);
    let pinned = of_snapshot(&snapshot("t4"), &config(MigStrategy::None, Sharing::default()));
    assert!(pinned.left_out.is_empty(), "{:?}", pinned.left_out);
}

#[test]
fn dra_pools_advertise_no_extended_resources() {
    let c = LabelConfig { profile: Profile::Dra, ..config(MigStrategy::None, Sharing::default()) };
    let t = of_snapshot(&snapshot("h100-x8"), &c);
    assert!(t.dra && t.capacity.is_empty(), "{t:?}");
    let capi = render(&t, Form::ClusterApi, "gpu").unwrap();
    assert!(
        capi.contains("capacity.cluster-autoscaler.kubernetes.io/dra-driver: \"gpu.nvidia.com\""),
        "{capi}"
    );
    assert!(capi.contains("capacity.cluster-autoscaler.kubernetes.io/gpu-count: \"8\""), "{capi}");
}

#[test]
fn the_forms_carry_every_label_and_the_capacity() {
    let t = of_snapshot(
        &snapshot("rtx4090-x10"),
        &config(MigStrategy::None, Sharing::time_slicing(&[("nvidia.com/gpu", 2)])),
    );
    let tags: BTreeMap<String, String> =
        serde_json::from_str(&render(&t, Form::ClusterAutoscaler, "gpu").unwrap()).unwrap();
    assert_eq!(tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"], "20");
    for (k, v) in &t.labels {
        assert_eq!(&tags[&format!("k8s.io/cluster-autoscaler/node-template/label/{k}")], v);
    }
    let lines = render(&t, Form::Labels, "gpu").unwrap();
    assert_eq!(lines.lines().count(), t.labels.len());
    let capi = render(&t, Form::ClusterApi, "gpu").unwrap();
    assert!(capi.contains("gpu-type: \"nvidia.com/gpu\"") && capi.contains("gpu-count: \"20\""), "{capi}");
    let pool = render(&t, Form::Karpenter, "rtx").unwrap();
    assert!(pool.contains("name: \"rtx\"") && pool.contains("nvidia.com/gpu.replicas: \"2\""), "{pool}");
}

/// Several pools print as each one alone would: one JSON object of their documents, each
/// byte for byte its own form's (its fields in the same order), or each text headed by its pool.
#[test]
fn several_pools_print_each_as_it_prints_alone() {
    let pools: Vec<(String, Template)> = ["t4", "rtx4090-x10"]
        .into_iter()
        .map(|m| (m.to_string(), of_snapshot(&snapshot(m), &config(MigStrategy::None, Sharing::default()))))
        .collect();
    for form in [Form::Json, Form::ClusterAutoscaler] {
        // The object's keys are the pools, sorted; each value is the pool's own document.
        let mut each: Vec<String> = pools
            .iter()
            .map(|(pool, t)| {
                format!("  {pool:?}: {}", render(t, form, pool).unwrap().trim_end().replace('\n', "\n  "))
            })
            .collect();
        each.sort();
        let want = format!("{{\n{}\n}}\n", each.join(",\n"));
        assert_eq!(render_all(&pools, form, None).unwrap(), want, "{form:?}");
    }
    let labels = render_all(&pools, Form::Labels, None).unwrap();
    let headed: Vec<String> = pools
        .iter()
        .map(|(pool, t)| format!("# pool {pool}\n{}", render(t, Form::Labels, pool).unwrap()))
        .collect();
    assert_eq!(labels, headed.join("\n"));
}

#[test]
fn a_form_too_small_for_the_template_refuses_it() {
    let mut t = of_snapshot(&snapshot("t4"), &config(MigStrategy::None, Sharing::default()));
    for i in 0..100 {
        t.labels.insert(format!("nvidia.com/x{i}"), "y".into());
    }
    assert!(matches!(
        render(&t, Form::ClusterAutoscaler, "gpu"),
        Err(FormError::TooManyLabels { max: 50, .. })
    ));
    // Over 100, the labels that do not fit metadata.labels are requirements; over 200, refused.
    let pool = render(&t, Form::Karpenter, "gpu").unwrap();
    let keys =
        |part: &str| pool.split(part).nth(1).unwrap().lines().take_while(|l| l.starts_with("  ")).count();
    assert_eq!(pool.matches("operator: In").count(), 100, "{pool}");
    assert!(keys("      labels:\n") >= 100, "{pool}");
    for i in 100..200 {
        t.labels.insert(format!("nvidia.com/z{i}"), "y".into());
    }
    assert!(matches!(render(&t, Form::Karpenter, "gpu"), Err(FormError::TooManyLabels { max: 200, .. })));
    assert!(matches!(
        render(&t, Form::ClusterAutoscaler, "gpu"),
        Err(FormError::TooManyLabels { max: 50, .. })
    ));
}

/// Every label of a NodePool past Karpenter's 100 template labels is still declared: those
/// `metadata.labels` cannot hold are requirements, none lost between the two.
#[test]
fn a_node_pool_past_a_hundred_labels_declares_every_one() {
    let mut t = of_snapshot(&snapshot("t4"), &config(MigStrategy::None, Sharing::default()));
    for i in 0..120 {
        t.labels.insert(format!("nvidia.com/x{i:03}"), "y".into());
    }
    #[derive(serde::Deserialize)]
    struct Requirement {
        key: String,
    }
    let pool: serde_json::Value =
        crate::yaml::from_str(&render(&t, Form::Karpenter, "gpu").unwrap()).unwrap();
    let template = &pool["spec"]["template"];
    let labels = template["metadata"]["labels"].as_object().unwrap();
    let requirements: Vec<Requirement> =
        serde_json::from_value(template["spec"]["requirements"].clone()).unwrap();
    assert_eq!((labels.len(), requirements.len()), (100, 100));
    let declared: std::collections::BTreeSet<&str> =
        labels.keys().map(String::as_str).chain(requirements.iter().map(|r| r.key.as_str())).collect();
    let want: std::collections::BTreeSet<&str> = t.labels.keys().map(String::as_str).collect();
    assert_eq!(declared, want);
}

/// An EC2 tag key over 128 characters, or annotations over Kubernetes' 256 KiB, refuse the form
/// with what does not fit.
#[test]
fn a_key_or_annotations_too_long_for_the_form_refuse_it() {
    let mut t = of_snapshot(&snapshot("t4"), &config(MigStrategy::None, Sharing::default()));
    t.labels.insert(format!("nvidia.com/{}", "k".repeat(80)), "v".into());
    match render(&t, Form::ClusterAutoscaler, "gpu") {
        Err(FormError::TooLong { what: "tag key", max: 128, .. }) => {}
        other => panic!("{other:?}"),
    }
    for i in 0..5000 {
        t.labels.insert(format!("nvidia.com/long-{i:04}-{}", "x".repeat(40)), "v".repeat(20));
    }
    match render(&t, Form::ClusterApi, "gpu") {
        Err(FormError::TooLong { what: "the annotations", max: 262144, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_dra_pool_s_slice_has_a_device_per_gpu_or_mig_device_with_the_driver_s_attributes() {
    let dra = |machine: &str| {
        let c = LabelConfig { profile: Profile::Dra, ..config(MigStrategy::None, Sharing::default()) };
        of_snapshot(&snapshot(machine), &c)
    };
    let t = dra("h100-x8");
    let slice: serde_json::Value =
        serde_json::from_str(&render(&t, Form::Resourceslice, "pool-a").unwrap()).unwrap();
    assert_eq!(slice["spec"]["driver"], "gpu.nvidia.com");
    assert_eq!(slice["spec"]["nodeName"], "pool-a");
    let devices = slice["spec"]["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 8);
    let a = &devices[0]["attributes"];
    assert_eq!(a["productName"]["string"], t.node.as_ref().unwrap().gpus[0].name.as_str());
    assert_eq!(a["architecture"]["string"], "Hopper");
    assert_eq!(a["cudaComputeCapability"]["version"], "9.0.0");
    assert_eq!(devices[0]["capacity"]["memory"]["value"], format!("{}Mi", t.labels["nvidia.com/gpu.memory"]));
    let mig = dra("a100-mig-mixed");
    let slice: serde_json::Value =
        serde_json::from_str(&render(&mig, Form::Resourceslice, "m").unwrap()).unwrap();
    let devices = slice["spec"]["devices"].as_array().unwrap();
    let migs = mig
        .node
        .as_ref()
        .unwrap()
        .gpus
        .iter()
        .filter_map(|g| g.mig.as_ref().filter(|m| m.enabled))
        .map(|m| m.devices.len())
        .sum::<usize>();
    assert_eq!(devices.iter().filter(|d| d["attributes"]["type"]["string"] == "mig").count(), migs);
    let plugin = of_snapshot(&snapshot("h100-x8"), &config(MigStrategy::None, Sharing::default()));
    assert_eq!(render(&plugin, Form::Resourceslice, "x"), Err(FormError::NotDra));
}

#[test]
fn driver_versions_become_semantic_versions_for_the_slice() {
    let mut s = snapshot("t4");
    s.driver_version = Some("535.104.05".into());
    let c = LabelConfig { profile: Profile::Dra, ..config(MigStrategy::None, Sharing::default()) };
    let slice = slice::of(of_snapshot(&s, &c).node.as_ref().unwrap(), "n");
    assert_eq!(slice["spec"]["devices"][0]["attributes"]["driverVersion"]["version"], "535.104.5");
    assert_eq!(slice["spec"]["devices"][0]["attributes"]["cudaDriverVersion"]["version"], "12.2.0");
}
