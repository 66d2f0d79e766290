//! The daemon's publisher, driven by hand through the feature-file writer (no API server, no
//! clock): a fight is throttled as its log line promises, and a publish that failed is tried again
//! as soon as the watched object changes, not after the daemon's backoff; and through the
//! NodeFeature writer on a mocked API whose watch lags behind nvlabel's own write (tokio's
//! virtual clock): no phantom repair at a start.

mod common;

use nvlabel::daemon::publisher::Publisher;
use nvlabel::daemon::Metrics;
use nvlabel::labels::Labels;
use nvlabel::publish::Target;
use std::time::Instant;

fn labels() -> Labels {
    Labels::from([("nvidia.com/gpu.count".to_string(), "1".to_string())])
}

#[tokio::test]
async fn passes_stop_repairing_once_a_fight_starts_the_repair_timer_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gfd");
    let target = Target::File(path.clone(), None);
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(None, Default::default());
    publisher.publish(target.clone(), labels(), &metrics).await.unwrap();
    // Another writer overwrites the file before every pass (a pass every second or two; the
    // whole test takes milliseconds, far inside the guard's minute).
    let mut rewritten = 0;
    for _ in 0..10 {
        std::fs::write(&path, "someone=else\n").unwrap();
        publisher.publish(target.clone(), labels(), &metrics).await.unwrap();
        rewritten += u32::from(std::fs::read_to_string(&path).unwrap().contains("gpu.count=1"));
    }
    assert_eq!(rewritten, 5, "five repairs start the fight; then the passes leave it to the timer");
    assert_eq!(metrics.drift_fights.get(), 1, "the fight is counted once");
    let due = publisher.repair_due().expect("the repair waits on its timer");
    assert!(due >= Instant::now() + std::time::Duration::from_secs(55), "once a minute: {due:?}");
}

#[tokio::test]
async fn a_failed_publish_is_tried_again_as_soon_as_the_object_changes() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("features.d");
    let path = missing.join("gfd");
    let target = Target::File(path.clone(), None);
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(None, Default::default());
    assert!(publisher.publish(target.clone(), labels(), &metrics).await.is_err());
    std::fs::create_dir(&missing).unwrap();
    // What the daemon's loop does when the watched object changes (a relist after a fault).
    let now = Instant::now();
    publisher.object_changed(now);
    assert_eq!(publisher.repair_due(), Some(now), "written now, not after the publish backoff");
    publisher.repair(&metrics).await.unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().contains("nvidia.com/gpu.count=1\n"));
    assert_eq!(publisher.published(), Some(&labels()));
    assert_eq!(publisher.repair_due(), None);
}

/// A NodeFeature as the mocked API server keeps it: `labels` at resourceVersion `rv`.
fn node_feature(labels: &serde_json::Value, rv: u64) -> serde_json::Value {
    serde_json::json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
        "metadata": {"name": "nvidia-features-for-gpu-1", "namespace": "nvlabel", "resourceVersion": rv.to_string(),
            "labels": {"nfd.node.kubernetes.io/node-name": "gpu-1"}},
        "spec": {"labels": labels}})
}

/// The mocked API server of one NodeFeature whose watch lags: its list always shows the object
/// as it was before nvlabel's first write (as a watch does until the event of that write comes),
/// while reads and writes see the object as it is; a write from an old resourceVersion is a 409.
fn lagging_watch(mut handle: common::mock_api::Handle) {
    use http::{Method, Response, StatusCode};
    tokio::spawn(async move {
        let old = node_feature(&serde_json::json!({"nvidia.com/gpu.count": "8"}), 1);
        let mut current = old.clone();
        let mut watches = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let query = request.uri().query().unwrap_or_default().to_string();
            let (code, body) = match request.method().clone() {
                // The watch never delivers the event of nvlabel's write.
                Method::GET if query.contains("watch=true") => {
                    watches.push(send);
                    continue;
                }
                Method::GET if query.contains("fieldSelector") => (
                    StatusCode::OK,
                    serde_json::json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureList",
                        "metadata": {"resourceVersion": "1"}, "items": [old]}),
                ),
                Method::GET => (StatusCode::OK, current.clone()),
                Method::PUT => {
                    let bytes = request.into_body().collect_bytes().await.unwrap();
                    let mut sent: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                    if sent["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"] {
                        let rv: u64 =
                            current["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
                        sent["metadata"]["resourceVersion"] = serde_json::json!((rv + 1).to_string());
                        current = sent.clone();
                        (StatusCode::OK, sent)
                    } else {
                        (StatusCode::CONFLICT, common::mock_api::status(409, "Conflict"))
                    }
                }
                other => panic!("unexpected {other} {}", request.uri()),
            };
            let body = kube::client::Body::from(serde_json::to_vec(&body).unwrap());
            send.send_response(Response::builder().status(code).body(body).unwrap());
        }
    });
}

/// One start in NodeFeature mode, no one else writing: the watch's view from before nvlabel's
/// first write (the event of that write not come yet) is no drift to repair. A repair that finds
/// the object as published writes nothing, and is no repair: no "someone changed" line, no count.
#[tokio::test(start_paused = true)]
async fn a_watch_behind_nvlabels_own_write_is_no_repair() {
    let (client, handle) = common::mock_api::mock();
    lagging_watch(handle);
    let target = Target::NodeFeature { namespace: "nvlabel".into(), node: "gpu-1".into(), pod: None };
    let metrics = Metrics::default();
    let mut publisher = Publisher::new(Some(client), nvlabel::publish::Watches::On(None));
    publisher.publish(target.clone(), labels(), &metrics).await.unwrap();
    // The list's change reaches the daemon's loop after the first write, as it does at a start.
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    publisher.object_changed(Instant::now());
    if publisher.repair_due().is_some() {
        publisher.repair(&metrics).await.unwrap();
    }
    assert_eq!(metrics.drift_repairs.get(), 0, "nobody changed the labels: no repair is counted");
    assert_eq!(publisher.published(), Some(&labels()));
}
