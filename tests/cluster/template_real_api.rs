//! `nvlabel template` against a real kube-apiserver: its Karpenter NodePool is admitted by
//! Karpenter's own NodePool definition (once the user adds a node class), its ResourceSlice by the
//! API server's own validation, and `--from-cluster` learns two pools from their nodes' labels,
//! naming the key their nodes disagree on. Needs `NVLABEL_KUBE_TEST_SERVER`; without it each
//! test skips with one line.

use crate::common;

use common::apiserver::{self, apply, node, wait_for_kind};
use common::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{json, Value};

/// `nvlabel template` with `args`, its stdout.
fn template(args: &[&str]) -> String {
    ok(nvlabel(None).arg("template").args(args))
}

/// Creates `doc` with `dryRun=All`: what the API server's validation (and the CRD's) says of it.
async fn dry_run(client: &kube::Client, doc: &Value) -> Result<DynamicObject, kube::Error> {
    let (group, version) = doc["apiVersion"].as_str().unwrap().split_once('/').unwrap();
    let gvk = GroupVersionKind::gvk(group, version, doc["kind"].as_str().unwrap());
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::from_gvk(&resource_gvk(&resource)));
    let object: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
    api.create(&PostParams { dry_run: true, field_manager: None }, &object).await
}

fn resource_gvk(r: &ApiResource) -> GroupVersionKind {
    GroupVersionKind::gvk(&r.group, &r.version, &r.kind)
}

#[tokio::test]
async fn the_karpenter_node_pool_is_admitted_by_karpenter_s_definition() {
    let Some(server) = apiserver::server("template_real_api") else { return };
    let admin = server.admin().await;
    let crd = manifests::yaml_docs(&repo().join("testdata/crds/karpenter-nodepool.yaml")).remove(0);
    apply(&admin, &crd).await;
    wait_for_kind(&admin, "karpenter.sh", "v1", "NodePool").await;
    let config = repo().join("testdata/configs/time-slicing-gpu-2.yaml");
    for (machine, extra) in [
        ("rtx4090-x10", vec!["--config-file", config.to_str().unwrap()]),
        ("a100-mig-mixed", vec!["--mig-strategy", "mixed"]),
    ] {
        let snapshot = repo().join(format!("testdata/golden/{machine}.snapshot.yaml"));
        let mut args =
            vec!["--snapshot", snapshot.to_str().unwrap(), "--format", "karpenter", "--name", machine];
        args.extend(extra);
        let mut pool: Value = serde_saphyr::from_str(&template(&args)).unwrap();
        // As printed, the pool lacks the node class only its user can name: the definition says so.
        let refused = dry_run(&admin, &pool).await.expect_err("a NodePool needs its nodeClassRef");
        assert!(refused.to_string().contains("nodeClassRef"), "{machine}: {refused}");
        pool["spec"]["template"]["spec"]["nodeClassRef"] =
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"});
        dry_run(&admin, &pool).await.unwrap_or_else(|e| panic!("{machine}: {e}"));
    }
}

#[tokio::test]
async fn the_resource_slice_is_admitted_by_the_api_server() {
    let Some(server) = apiserver::server("template_real_api") else { return };
    let admin = server.admin().await;
    for machine in ["h100-x8", "a100-mig-mixed", "t4"] {
        let snapshot = repo().join(format!("testdata/golden/{machine}.snapshot.yaml"));
        let args = [
            "--snapshot",
            snapshot.to_str().unwrap(),
            "--allocation-mode",
            "dra",
            "--format",
            "resourceslice",
            "--name",
            machine,
        ];
        let slice: Value = serde_json::from_str(&template(&args)).unwrap();
        assert!(!slice["spec"]["devices"].as_array().unwrap().is_empty(), "{machine}");
        dry_run(&admin, &slice).await.unwrap_or_else(|e| panic!("{machine}: {e}"));
    }
}

#[tokio::test]
async fn from_cluster_learns_two_pools_and_names_the_key_their_nodes_disagree_on() {
    let Some(server) = apiserver::server("template_real_api") else { return };
    let admin = server.admin().await;
    let pool = "nvlabel-test.example/pool";
    let common = [("nvidia.com/gpu.product", "Tesla-T4"), ("nvidia.com/gpu.count", "1")];
    let nodes: Api<Node> = Api::all(admin.clone());
    for (name, p, driver, gpus) in [
        ("tpl-a-1", "a", "550", "1"),
        ("tpl-a-2", "a", "550", "1"),
        ("tpl-b-1", "b", "550", "4"),
        ("tpl-b-2", "b", "535", "4"),
    ] {
        let mut labels =
            json!({pool: p, "nvidia.com/cuda.driver.major": driver, "nvidia.com/gfd.timestamp": name});
        for (k, v) in common {
            labels[k] = json!(v);
        }
        node(&admin, name, labels).await;
        let status = json!({"status": {"capacity": {"cpu": "8", "nvidia.com/gpu": gpus}}});
        nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    }
    let kubeconfig = server.kubeconfig();
    let k = kubeconfig.to_str().unwrap();
    let a = template(&["--from-cluster", "--pool-label", pool, "--pool", "a", "--kubeconfig", k]);
    assert_eq!(
        a,
        "nvidia.com/cuda.driver.major=550\nnvidia.com/gpu.count=1\nnvidia.com/gpu.product=Tesla-T4\n"
    );
    let out = nvlabel(None)
        .arg("template")
        .args(["--from-cluster", "--pool-label", pool, "--format", "json", "--kubeconfig", k])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all["a"]["capacity"]["nvidia.com/gpu"], 1);
    assert_eq!(all["b"]["capacity"]["nvidia.com/gpu"], 4);
    assert!(all["b"]["labels"].get("nvidia.com/cuda.driver.major").is_none(), "{all}");
    let why = all["b"]["leftOut"]["nvidia.com/cuda.driver.major"].as_str().unwrap();
    assert!(why.contains("\"535\" on tpl-b-2") && why.contains("\"550\" on tpl-b-1"), "{why}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nvidia.com/cuda.driver.major") && stderr.contains("tpl-b-2"),
        "said on stderr too: {stderr}"
    );
    let empty = nvlabel(None)
        .arg("template")
        .args(["--from-cluster", "--pool-label", pool, "--pool", "c", "--kubeconfig", k])
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(2), "a pool with no node");
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("--pool c"),
        "{}",
        String::from_utf8_lossy(&empty.stderr)
    );
}
