//! The API layer's guards that show only at fleet scale or on a bad day, each pinned by a test that
//! fails without it: the NodeFeature object's owner is restored.
//!
//! Against the mocked API (`common::mock_api`), the test answering each request; where waiting is
//! involved, on tokio's virtual clock, so nothing depends on machine speed.

mod common;

use common::mock_api::{expect, mock, no_more_requests};
use http::Method;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use nvlabel::kubeapi::retry::Backoff;
use nvlabel::publish::{NodeFeature, Writer};
use serde_json::{json, Value};
use std::time::Duration;

const NF: &str = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu-operator/nodefeatures";

fn ds_owner() -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        name: "nvlabel".into(),
        uid: "ds-uid-456".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

#[tokio::test]
async fn an_object_without_our_owner_gets_it_back_in_one_publish() {
    let want = common::labels(&[("nvidia.com/gpu.count", "8")]);
    let recreated = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvlabel", "uid": "old-uid",
        "controller": true}]);
    // Labels right, owner wrong: written by a version without owners (or stripped by hand), or
    // owned by a DaemonSet since deleted and recreated (a new uid).
    for (case, owners) in [("no owner", Value::Null), ("a recreated DaemonSet", recreated)] {
        let (client, mut handle) = mock();
        let mut writer = NodeFeature::new(client, "gpu-operator", "gpu-1", Some(ds_owner()))
            .with_backoff(Backoff { attempts: 1, initial: Duration::ZERO, max: Duration::ZERO });
        let publish = tokio::spawn({
            let want = want.clone();
            async move { (writer.publish(&want).await.map_err(|e| e.to_string()), writer) }
        });
        let path = format!("{NF}/nvidia-features-for-gpu-1");
        let current = json!({
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
            "metadata": {"name": "nvidia-features-for-gpu-1", "namespace": "gpu-operator", "resourceVersion": "3",
                         "labels": {"nfd.node.kubernetes.io/node-name": "gpu-1"}, "ownerReferences": owners},
            "spec": {"labels": want, "features": {"flags": {}, "attributes": {}, "instances": {}}},
        });
        expect(&mut handle, Method::GET, &path, 200, current).await;
        let body =
            expect(&mut handle, Method::PUT, &format!("{path}?&fieldManager=nvlabel"), 200, json!({})).await;
        assert_eq!(body["metadata"]["ownerReferences"], json!([ds_owner()]), "{case}");
        assert_eq!(body["spec"]["labels"], json!(want), "{case}");
        let (result, writer) = publish.await.unwrap();
        assert_eq!(result, Ok(true), "{case}");
        drop(writer);
        no_more_requests(handle).await;
    }
}
