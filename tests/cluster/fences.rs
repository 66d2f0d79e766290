//! One node against another on a real kube-apiserver (DeviceTaintRule served), with the chart's
//! admission policies as deploy/node-health-dra renders them and tokens bound to nvlabel's pods
//! on nodes `gpu-1` and `gpu-1-a`, whose names are prefixes of each other: every squatting and
//! spoofing attempt on a DeviceTaintRule or an Event is refused, each node's own writes are
//! admitted, and a squat the released version's policy admitted no longer keeps `gpu-1-a`'s
//! faulty GPU allocatable. Needs `NVLABEL_KUBE_TEST_SERVER`; without it each test skips with one
//! line.

use crate::common;

use common::dra_cluster::{begin, gpu, pod_client, put_slice, rule, rules, setup, taint_rules};
use common::health_cluster::get_condition;
use common::health_daemon::{event_line, node_files};
use common::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const KEY: &str = "nvidia.com/gpu-health";
const DRIVER: &str = "gpu.nvidia.com";
const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";
const UUID1: &str = "GPU-a1b2c3d4-0001-4000-8000-000000000001";

/// Server-side applies `body` (a DeviceTaintRule) through `c`.
async fn write(c: &Client, body: &Value) -> Result<(), kube::Error> {
    let name = body["metadata"]["name"].as_str().unwrap();
    let params = PatchParams::apply("nvlabel").force();
    taint_rules(c).patch(name, &params, &Patch::Apply(body)).await.map(|_| ())
}

/// A rule `rule` builds, with its node label set to `label` (`None`: no node label).
fn labelled(mut body: Value, label: Option<&str>) -> Value {
    let labels = &mut body["metadata"]["labels"];
    match label {
        Some(l) => labels["nvidia.com/gpu-health-node"] = json!(l),
        None => drop(labels.as_object_mut().unwrap().remove("nvidia.com/gpu-health-node")),
    }
    body
}

/// Asserts that `result` is refused by the admission policy `policy` (422 naming it), or, where
/// `policy` is `None`, by the API server in any way (403, 422).
fn refused_by<T: std::fmt::Debug>(what: &str, policy: Option<&str>, result: Result<T, kube::Error>) {
    let status = apiserver::refused(result);
    match policy {
        Some(p) => assert!(status.code == 422 && status.message.contains(p), "{what}: {status:?}"),
        None => assert!(matches!(status.code, 403 | 422), "{what}: {status:?}"),
    }
}

/// Nodes gpu-1 (nvlabel's first pod), gpu-1-a and gpu-2, with each GPU node's slice: gpu-1-a has
/// devices gpu-3 (the fixture's GPU 0) and gpu-4 (GPU 1). The tokens of gpu-1's and gpu-1-a's
/// pods, and gpu-1-a's kubeconfig, once both policies are in force.
async fn cluster(server: &'static apiserver::Server, admin: &Client) -> (Client, Client, std::path::PathBuf) {
    let (t1, _) = setup(server, admin, &["gpu-1", "gpu-1-a", "gpu-2"]).await;
    let (t1a, kubeconfig) = pod_client(server, admin, "gpu-1-a").await;
    for (name, _) in rules(admin).await {
        taint_rules(admin).delete(&name, &DeleteParams::default()).await.unwrap();
    }
    put_slice(admin, "gpu-1", "gpu-1-gpu.nvidia.com", vec![gpu("gpu-3", "GPU-0000-gpu-1", 3)]).await;
    let devices = vec![gpu("gpu-3", UUID0, 3), gpu("gpu-4", UUID1, 4)];
    put_slice(admin, "gpu-1-a", "gpu-1-a-gpu.nvidia.com", devices).await;
    // The Event policy takes effect a moment after it is created: wait until it refuses a dry run.
    let events: Api<Event> = Api::namespaced(t1.clone(), "default");
    let params = PostParams { dry_run: true, ..Default::default() };
    for i in 0.. {
        if events.create(&params, &event("gpu-2", "Node", "nvidia.com/nvlabel")).await.is_err() {
            break;
        }
        assert!(i < 200, "the Event admission policy never took effect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (t1, t1a, kubeconfig)
}

#[tokio::test]
async fn a_node_can_neither_squat_nor_take_over_another_nodes_rules() {
    let Some((server, _serial)) = begin("a_node_can_neither_squat_nor_take_over_another_nodes_rules").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (t1, t1a, _) = cluster(server, &admin).await;
    let policy = Some("nvlabel-device-taints");
    // gpu-1-a's own rule for its GPU 3: admitted.
    let theirs = rule("nvlabel-gpu-3.gpu-1-a", DRIVER, "gpu-1-a", "gpu-3", KEY);
    write(&t1a, &theirs).await.expect("gpu-1-a's own rule");
    // gpu-1 cannot take gpu-1-a's name, nor any name that reads as another node's or device's.
    for (what, body) in [
        ("gpu-1-a's name and pool", theirs.clone()),
        ("gpu-1-a's name, its own pool", rule("nvlabel-gpu-3.gpu-1-a", DRIVER, "gpu-1", "gpu-3", KEY)),
        ("the released version's squat", rule("nvlabel-gpu-1-a-gpu-3", DRIVER, "gpu-1", "a-gpu-3", KEY)),
        ("an old-style name, any device", rule("nvlabel-gpu-1-a-gpu-3", DRIVER, "gpu-1", "gpu-3", KEY)),
        ("a name for another device", rule("nvlabel-gpu-4.gpu-1", DRIVER, "gpu-1", "gpu-3", KEY)),
        (
            "gpu-1-a's label",
            labelled(rule("nvlabel-gpu-3.gpu-1", DRIVER, "gpu-1", "gpu-3", KEY), Some("gpu-1-a")),
        ),
        ("no node label", labelled(rule("nvlabel-gpu-3.gpu-1", DRIVER, "gpu-1", "gpu-3", KEY), None)),
    ] {
        refused_by(what, policy, write(&t1, &body).await);
    }
    // A device name with a dot would make nvlabel-<device>.<node> ambiguous: refused (by the API
    // server's own validation of a device name, or by the policy).
    let dotted = rule("nvlabel-gpu-3.gpu-1-a.gpu-1", DRIVER, "gpu-1", "gpu-3.gpu-1-a", KEY);
    refused_by("a device name with a dot", None, write(&t1, &dotted).await);
    // Nor may it change gpu-1-a's rule, by a patch of its taint or by moving it to its own pool.
    let api = taint_rules(&t1);
    let value = Patch::Merge(json!({"spec": {"taint": {"value": "Spoofed"}}}));
    refused_by(
        "patching gpu-1-a's taint",
        policy,
        api.patch("nvlabel-gpu-3.gpu-1-a", &Default::default(), &value).await,
    );
    let moved = Patch::Merge(json!({"metadata": {"labels": {"nvidia.com/gpu-health-node": "gpu-1"}},
                                    "spec": {"deviceSelector": {"pool": "gpu-1"}}}));
    refused_by(
        "moving gpu-1-a's rule",
        policy,
        api.patch("nvlabel-gpu-3.gpu-1-a", &Default::default(), &moved).await,
    );
    refused_by(
        "deleting gpu-1-a's rule",
        policy,
        api.delete("nvlabel-gpu-3.gpu-1-a", &DeleteParams::default()).await,
    );
    // A rule of gpu-1-a's pool under a name that reads as gpu-1's (not nvlabel's: an
    // administrator's, say): gpu-1 may not take it over by moving it to its own pool.
    let misnamed = rule("nvlabel-gpu-3.gpu-1", DRIVER, "gpu-1-a", "gpu-3", KEY);
    apiserver::apply(&admin, &misnamed).await;
    let mine = Patch::Merge(json!({"metadata": {"labels": {"nvidia.com/gpu-health-node": "gpu-1"}},
                                   "spec": {"deviceSelector": {"pool": "gpu-1"}}}));
    refused_by("taking over", policy, api.patch("nvlabel-gpu-3.gpu-1", &Default::default(), &mine).await);
    taint_rules(&admin).delete("nvlabel-gpu-3.gpu-1", &DeleteParams::default()).await.unwrap();
    // gpu-1-a's rule of the released version's naming: not gpu-1's to delete; gpu-1-a's to delete.
    apiserver::apply(&admin, &rule("nvlabel-gpu-1-a-gpu-4", DRIVER, "gpu-1-a", "gpu-4", KEY)).await;
    refused_by(
        "deleting gpu-1-a's old rule",
        policy,
        api.delete("nvlabel-gpu-1-a-gpu-4", &DeleteParams::default()).await,
    );
    let old = taint_rules(&t1a);
    refused_by(
        "changing an old rule",
        policy,
        old.patch("nvlabel-gpu-1-a-gpu-4", &Default::default(), &value).await,
    );
    old.delete("nvlabel-gpu-1-a-gpu-4", &DeleteParams::default()).await.expect("an upgrade's clean-up");
    // gpu-1's own rule: created, patched, deleted; but not renamed to another device or node.
    let mine = rule("nvlabel-gpu-3.gpu-1", DRIVER, "gpu-1", "gpu-3", KEY);
    write(&t1, &mine).await.expect("its own rule");
    api.patch("nvlabel-gpu-3.gpu-1", &Default::default(), &value).await.expect("its own rule's taint");
    let renamed = Patch::Merge(json!({"spec": {"deviceSelector": {"device": "gpu-4"}}}));
    refused_by(
        "renaming by its device",
        policy,
        api.patch("nvlabel-gpu-3.gpu-1", &Default::default(), &renamed).await,
    );
    let relabelled = Patch::Merge(json!({"metadata": {"labels": {"nvidia.com/gpu-health-node": "gpu-1-a"}}}));
    refused_by(
        "relabelling",
        policy,
        api.patch("nvlabel-gpu-3.gpu-1", &Default::default(), &relabelled).await,
    );
    api.delete("nvlabel-gpu-3.gpu-1", &DeleteParams::default()).await.expect("deleting its own rule");
    // gpu-1-a's rule is as gpu-1-a wrote it; gpu-1-a may still change and delete it.
    let left = rules(&admin).await;
    assert_eq!(left.keys().collect::<Vec<_>>(), ["nvlabel-gpu-3.gpu-1-a"], "{left:?}");
    assert_eq!(left["nvlabel-gpu-3.gpu-1-a"].1["taint"]["value"], "Test");
    old.patch("nvlabel-gpu-3.gpu-1-a", &Default::default(), &value).await.expect("gpu-1-a's own taint");
    old.delete("nvlabel-gpu-3.gpu-1-a", &DeleteParams::default()).await.expect("gpu-1-a's own delete");
}

/// An Event as nvlabel writes it, regarding `name` of `kind`, reported by `controller`.
fn event(name: &str, kind: &str, controller: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"generateName": format!("{name}.gpu-health-"), "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Warning", "reason": "GpuLost",
        "action": "GpuHealthCheck", "note": "GPU 3 has fallen off the bus",
        "reportingController": controller, "reportingInstance": "nvlabel-test",
        "regarding": {"apiVersion": "v1", "kind": kind, "name": name},
    }))
    .unwrap()
}

#[tokio::test]
async fn a_node_reports_events_about_itself_only() {
    let Some((server, _serial)) = begin("a_node_reports_events_about_itself_only").await else {
        return;
    };
    let admin = server.admin().await;
    let (t1, t1a, _) = cluster(server, &admin).await;
    let policy = Some("nvlabel-health-events");
    let events = |c: &Client| Api::<Event>::namespaced(c.clone(), "default");
    let create = |c: &Client, e: Event| {
        let api = events(c);
        async move { api.create(&PostParams::default(), &e).await }
    };
    let mut related = event("gpu-1", "Node", "nvidia.com/nvlabel");
    related.related =
        Some(serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "name": "gpu-2"})).unwrap());
    for (what, e) in [
        ("regarding gpu-1-a", event("gpu-1-a", "Node", "nvidia.com/nvlabel")),
        ("regarding gpu-2", event("gpu-2", "Node", "nvidia.com/nvlabel")),
        ("regarding a Pod", event("gpu-1", "Pod", "nvidia.com/nvlabel")),
        ("as the kubelet", event("gpu-1", "Node", "kubelet")),
        ("related to gpu-2", related),
    ] {
        refused_by(what, policy, create(&t1, e).await);
    }
    // Its own Event: created, and a repeat counted on it (series), as nvlabel does.
    let name = |e: Event| e.metadata.name.unwrap();
    let own = name(create(&t1, event("gpu-1", "Node", "nvidia.com/nvlabel")).await.expect("its own Event"));
    let series =
        Patch::Merge(json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:10.000000Z"}}));
    events(&t1).patch(&own, &Default::default(), &series).await.expect("counting a repeat");
    // gpu-1-a's Event, and the kubelet's about gpu-1 itself: not gpu-1's to patch.
    let theirs =
        name(create(&t1a, event("gpu-1-a", "Node", "nvidia.com/nvlabel")).await.expect("gpu-1-a's own"));
    refused_by(
        "patching gpu-1-a's Event",
        policy,
        events(&t1).patch(&theirs, &Default::default(), &series).await,
    );
    let kubelets = name(create(&admin, event("gpu-1", "Node", "kubelet")).await.unwrap());
    refused_by(
        "patching the kubelet's Event",
        policy,
        events(&t1).patch(&kubelets, &Default::default(), &series).await,
    );
    // Nor turned into an Event about another node (refused whichever check comes first).
    let moved = Patch::Merge(json!({"regarding": {"name": "gpu-2"}}));
    refused_by("moving its Event", None, events(&t1).patch(&own, &Default::default(), &moved).await);
    events(&t1a).patch(&theirs, &Default::default(), &series).await.expect("gpu-1-a counting its repeat");
    let seen = events(&admin).get(&own).await.unwrap();
    assert_eq!(seen.series.map(|s| s.count), Some(2));
}

/// nvlabel on node gpu-1-a, through gpu-1-a's pod token.
fn start(d: &Path, kubeconfig: &Path) -> common::health_daemon::Daemon {
    common::dra_cluster::dra_daemon(d, "gpu-1-a", kubeconfig, &[])
}

/// Polls (bounded, `within`) until the rule names (by the admin's list) satisfy `f`.
async fn until(admin: &Client, d: &Path, within: Duration, f: impl Fn(&[String]) -> bool) -> Duration {
    let names = |all: &common::dra_cluster::Rules| all.keys().cloned().collect::<Vec<_>>();
    common::dra_cluster::until_rules(admin, "the rules", within, Some(d), |all| f(&names(all))).await.1
}

#[tokio::test]
async fn a_squat_no_longer_keeps_another_nodes_faulty_gpu_allocatable() {
    let Some((server, _serial)) = begin("a_squat_no_longer_keeps_another_nodes_faulty_gpu_allocatable").await
    else {
        return;
    };
    let admin = server.admin().await;
    let (t1, _, kubeconfig) = cluster(server, &admin).await;
    // The squat the released version's policy admitted (name prefix nvlabel-gpu-1-, pool gpu-1,
    // even gpu-1-a's label): the name that version gave gpu-1-a's rule for its GPU 3.
    let squat = labelled(rule("nvlabel-gpu-1-a-gpu-3", DRIVER, "gpu-1", "gpu-3", KEY), Some("gpu-1-a"));
    refused_by("the squat, now", Some("nvlabel-device-taints"), write(&t1, &squat).await);
    apiserver::apply(&admin, &squat).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    node_files(d);
    let daemon = start(d, &kubeconfig);
    let started = Instant::now();
    while get_condition(&admin, "gpu-1-a", "GPUHealthy").await.map(|c| c.0).as_deref() != Some("True") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            std::fs::read_to_string(d.join("log")).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // GPU 0 (gpu-1-a's device gpu-3) fails: tainted within seconds, the squat beside it.
    event_line(d, "0 xid 79");
    let took =
        until(&admin, d, Duration::from_secs(10), |r| r.contains(&"nvlabel-gpu-3.gpu-1-a".to_string())).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    // GPU 1 too; then an upgrade from the released version, seen from gpu-1-a: its rule for GPU 1
    // under the old name. A restart (the same boot, the faults kept) replaces it.
    event_line(d, "1 xid 79");
    until(&admin, d, Duration::from_secs(10), |r| r.contains(&"nvlabel-gpu-4.gpu-1-a".to_string())).await;
    drop(daemon);
    taint_rules(&admin).delete("nvlabel-gpu-4.gpu-1-a", &DeleteParams::default()).await.unwrap();
    let mut old = rule("nvlabel-gpu-1-a-gpu-4", DRIVER, "gpu-1-a", "gpu-4", KEY);
    old["spec"]["taint"]["value"] = json!("XidCriticalError");
    apiserver::apply(&admin, &old).await;
    let _daemon = start(d, &kubeconfig);
    let want = ["nvlabel-gpu-1-a-gpu-3", "nvlabel-gpu-3.gpu-1-a", "nvlabel-gpu-4.gpu-1-a"];
    until(&admin, d, Duration::from_secs(10), |r| r == want).await;
    let rule_of = |name: &'static str| {
        let admin = admin.clone();
        async move { rules(&admin).await[name].1.clone() }
    };
    assert_eq!(rule_of("nvlabel-gpu-4.gpu-1-a").await["deviceSelector"]["device"], "gpu-4");
    assert_eq!(
        rule_of("nvlabel-gpu-1-a-gpu-3").await["deviceSelector"]["pool"],
        "gpu-1",
        "the squat is untouched"
    );
    // Its Event about GPU 0's fault went through the Event policy (GPU 1's may have been cut
    // short by the restart: it is sent after the rule is written).
    let events: Api<Event> = Api::namespaced(admin.clone(), "default");
    let listed = events.list(&Default::default()).await.unwrap().items;
    let gpu0 = listed.iter().filter(|e| {
        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("gpu-1-a")
            && e.reason.as_deref() == Some("XidCriticalError")
            && e.note.as_deref().is_some_and(|n| n.starts_with("GPU 0 "))
    });
    assert_eq!(gpu0.count(), 1, "{listed:?}");
    let log = std::fs::read_to_string(d.join("log")).unwrap();
    let refused: Vec<&str> =
        log.lines().filter(|l| l.contains("WARN") && (l.contains("taint") || l.contains("Event"))).collect();
    assert!(refused.is_empty(), "no write refused, no Event refused: {refused:?}");
}
