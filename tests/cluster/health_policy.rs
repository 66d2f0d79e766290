//! The admission policy that fences nvlabel's `nodes/status` patch, on a real kube-apiserver: a
//! pod-bound token may set its own node's one condition and the fault record annotation beside
//! it, and nothing else. Needs `NVLABEL_KUBE_TEST_SERVER`; without it the test skips.

use crate::common;

use common::apiserver::{self, refused};
use common::health_cluster::{condition, get_condition, nodes_of, setup};
use kube::api::{Patch, PatchParams};
use nvlabel::health::values::record::ANNOTATION;
use serde_json::json;

#[tokio::test]
async fn the_token_sets_its_condition_and_nothing_else() {
    let Some(server) = apiserver::server("the_token_sets_its_condition_and_nothing_else") else { return };
    let admin = server.admin().await;
    let (sa, _) = setup(server, &admin).await;
    let nodes = nodes_of(&sa);
    let ssa = PatchParams::apply("nvlabel").force();
    nodes
        .patch_status("gpu-a", &ssa, &Patch::Apply(condition("gpu-a", "GPUHealthy", "False")))
        .await
        .expect("its own condition");
    assert_eq!(get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap().0, "False");

    let no = |r| refused(r).message;
    let m =
        no(nodes.patch_status("gpu-b", &ssa, &Patch::Apply(condition("gpu-b", "GPUHealthy", "False"))).await);
    assert!(m.contains("only change the status of the node its pod runs on"), "{m}");
    let m = no(nodes.patch_status("gpu-a", &ssa, &Patch::Apply(condition("gpu-a", "Ready", "False"))).await);
    assert!(m.contains("only change its own GPU health condition"), "{m}");
    let m = no(nodes
        .patch_status("gpu-a", &ssa, &Patch::Apply(condition("gpu-a", "SomethingElse", "True")))
        .await);
    assert!(m.contains("only change its own GPU health condition"), "{m}");
    let merge = PatchParams::default();
    for change in [
        json!({"status": {"capacity": {"nvidia.com/gpu": "8"}}}),
        json!({"status": {"allocatable": {"nvidia.com/gpu": "0"}}}),
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.9.9.9"}]}}),
    ] {
        let m = no(nodes.patch_status("gpu-a", &merge, &Patch::Merge(&change)).await);
        assert!(m.contains("only change conditions"), "{change}: {m}");
    }
    // The status subresource is not a way around the label policy either.
    let m = no(nodes
        .patch_status("gpu-a", &merge, &Patch::Merge(json!({"metadata": {"labels": {"team": "x"}}})))
        .await);
    assert!(m.contains("may not change node metadata"), "{m}");

    // The fault record goes with the condition, in the same apply; no other annotation may change.
    let admin_nodes = nodes_of(&admin);
    let owner = json!({"metadata": {"annotations": {"example.com/owner": "ops"}}});
    admin_nodes.patch("gpu-a", &merge, &Patch::Merge(&owner)).await.unwrap();
    let mut with_record = condition("gpu-a", "GPUHealthy", "False");
    with_record["metadata"]["annotations"] = json!({ANNOTATION: "{\"version\":1}"});
    nodes.patch_status("gpu-a", &ssa, &Patch::Apply(&with_record)).await.expect("its record annotation");
    let stored = admin_nodes.get("gpu-a").await.unwrap().metadata.annotations.unwrap();
    assert_eq!(stored.get(ANNOTATION).map(String::as_str), Some("{\"version\":1}"));
    assert_eq!(stored.get("example.com/owner").map(String::as_str), Some("ops"));
    let mut and_another = with_record.clone();
    and_another["metadata"]["annotations"]["example.com/team"] = json!("x");
    let m = no(nodes.patch_status("gpu-a", &ssa, &Patch::Apply(&and_another)).await);
    assert!(m.contains("may not change node metadata"), "{m}");
    for change in [
        json!({"example.com/team": "x"}),
        json!({"example.com/owner": "nvlabel"}),
        json!({"example.com/owner": null}),
    ] {
        let patch = json!({"metadata": {"annotations": change}});
        let m = no(nodes.patch_status("gpu-a", &merge, &Patch::Merge(&patch)).await);
        assert!(m.contains("may not change node metadata"), "{change}: {m}");
    }
    let kept = admin_nodes.get("gpu-a").await.unwrap().metadata.annotations.unwrap();
    assert_eq!(kept, stored, "only the record ever changed");
    // Its own removal of the record (the faults are gone) is allowed too.
    nodes
        .patch_status("gpu-a", &ssa, &Patch::Apply(condition("gpu-a", "GPUHealthy", "True")))
        .await
        .expect("the record removed");
    let after = admin_nodes.get("gpu-a").await.unwrap().metadata.annotations.unwrap();
    assert_eq!(after.get(ANNOTATION), None, "SSA dropped the record it no longer sends");
    assert_eq!(after.get("example.com/owner").map(String::as_str), Some("ops"));
    let b = nodes_of(&admin).get("gpu-b").await.unwrap().status.unwrap();
    assert!(b.conditions.unwrap().iter().all(|c| c.type_ != "GPUHealthy"));
    let a = nodes_of(&admin).get("gpu-a").await.unwrap().status.unwrap();
    assert_eq!(a.capacity.unwrap()["nvidia.com/gpu"].0, "2");
    let ready = a.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True");
}
