//! A real kube-apiserver for the integration tier: `kube-test-server` (etcd + kube-apiserver on
//! loopback), found through `NVLABEL_KUBE_TEST_SERVER`. One server per set of extra flags,
//! started on first use, shared by the binary's files one file at a time, and stopped when the
//! binary exits. Without the variable every test of the tier
//! skips with one line.
#![allow(dead_code)]

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::Client;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, OnceLock};

/// The variable that points to the `kube-test-server` script.
pub const VAR: &str = "NVLABEL_KUBE_TEST_SERVER";

/// A running server: its state directory (kubeconfig, ca.crt, server).
pub struct Server {
    pub dir: PathBuf,
}

/// The servers this binary started, one per set of extra flags; never freed, so a test's
/// `&'static` stays good until the binary exits and `stop_at_exit` stops them all.
static SERVERS: Mutex<Vec<(Option<String>, &'static Server)>> = Mutex::new(Vec::new());
static SCRIPT: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn stop_at_exit() {
    let Some(script) = SCRIPT.get() else { return };
    let servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    for (_, server) in servers.iter() {
        let _ = std::process::Command::new(script).arg("stop").arg(&server.dir).status();
        let _ = std::fs::remove_dir_all(&server.dir);
    }
}

/// The shared server, or `None` (after printing why) when the tier is not configured.
pub fn server(test: &str) -> Option<&'static Server> {
    server_with(test, None)
}

/// [`server`], started with the extra kube-apiserver flags `args` (`KUBE_TEST_SERVER_ARGS`):
/// one server per set of flags, shared by every file of the binary, one file at a time
/// ([`take_turn`]). The first call of a set starts its server; the files that ask for it after
/// find the objects the files before them left, so each test makes its own names or applies
/// what it needs.
pub fn server_with(test: &str, args: Option<&str>) -> Option<&'static Server> {
    let Some(script) = std::env::var_os(VAR).filter(|v| !v.is_empty()) else {
        static SAID: std::sync::Once = std::sync::Once::new();
        // Straight to stderr: the test harness captures print macros, and this line is for the
        // person running the suite. Once per test binary.
        SAID.call_once(|| {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "skipping the real API server tier ({test} and the rest): {VAR} is not set (CI sets it to kube-test-server)"
            );
        });
        return None;
    };
    take_turn();
    // Held while a server starts: a second test asking for the same flags waits for this one.
    let mut servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, server)) = servers.iter().find(|(a, _)| a.as_deref() == args) {
        return Some(*server);
    }
    let script = PathBuf::from(script);
    let dir = tempfile::Builder::new().prefix("nvlabel-kts-").tempdir().unwrap().keep();
    let mut start = std::process::Command::new(&script);
    start.arg("start").arg(&dir);
    if let Some(args) = args {
        start.env("KUBE_TEST_SERVER_ARGS", args);
    }
    let status = start.status().unwrap_or_else(|e| panic!("{VAR}={}: cannot run it: {e}", script.display()));
    assert!(
        status.success(),
        "{VAR}={}: start failed ({status}); logs in {}",
        script.display(),
        dir.display()
    );
    if SCRIPT.set(script).is_ok() {
        // SAFETY: registering a plain extern "C" function with libc's atexit has no preconditions.
        unsafe { libc::atexit(stop_at_exit) };
    }
    let server: &'static Server = Box::leak(Box::new(Server { dir }));
    servers.push((args.map(str::to_owned), server));
    Some(server)
}

/// Which file of the binary has the servers now, and how many of its tests hold them.
struct Turn {
    file: Option<String>,
    holders: usize,
}

static TURN: Mutex<Turn> = Mutex::new(Turn { file: None, holders: 0 });
static TURN_FREED: Condvar = Condvar::new();

/// A test's hold on its file's turn, released when the test's thread ends.
struct Held;

impl Drop for Held {
    fn drop(&mut self) {
        let mut turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        turn.holders -= 1;
        if turn.holders == 0 {
            turn.file = None;
            TURN_FREED.notify_all();
        }
    }
}

thread_local! {
    static HELD: std::cell::RefCell<Option<Held>> = const { std::cell::RefCell::new(None) };
}

/// Waits until no other file's test holds the servers, then holds them for this test until its
/// thread ends. The tests of one file were written to share a server with each other, not with
/// another file's, which may apply the same overlays or watch the same Nodes. The harness names
/// a test's thread by its path (`real_api::name`); a thread of the test's own (no `::` in its
/// name) rides on the hold its test took.
fn take_turn() {
    let current = std::thread::current();
    let Some(file) = current.name().and_then(|n| n.split_once("::")).map(|(file, _)| file.to_owned()) else {
        return;
    };
    if HELD.with(|h| h.borrow().is_some()) {
        return;
    }
    let mut turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    while turn.file.as_ref().is_some_and(|f| *f != file) {
        turn = TURN_FREED.wait(turn).unwrap_or_else(|e| e.into_inner());
    }
    turn.file = Some(file);
    turn.holders += 1;
    drop(turn);
    HELD.with(|h| *h.borrow_mut() = Some(Held));
}

impl Server {
    /// The cluster-admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// A cluster-admin client.
    pub async fn admin(&self) -> Client {
        client_from(&self.kubeconfig()).await
    }

    /// A kubeconfig for `token` (a service account's), written next to the admin's.
    pub fn kubeconfig_for(&self, name: &str, token: &str) -> PathBuf {
        let server = std::fs::read_to_string(self.dir.join("server")).unwrap();
        let ca = std::fs::read(self.dir.join("ca.crt")).unwrap();
        let ca = base64(&ca);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: test\n  context: {{cluster: test, user: {name}}}\ncurrent-context: test\n",
            server.trim()
        );
        let path = self.dir.join(format!("kubeconfig-{name}"));
        std::fs::write(&path, text).unwrap();
        path
    }
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A client from a kubeconfig file.
pub async fn client_from(path: &Path) -> Client {
    let file = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Server-side applies one object (any kind) as the test's administrator.
pub async fn apply(client: &Client, doc: &Value) -> DynamicObject {
    let (group, version) = match doc["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), doc["apiVersion"].as_str().unwrap().to_string()),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, doc["kind"].as_str().unwrap());
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("no API for {gvk:?}: {e}"));
    let name = doc["metadata"]["name"].as_str().unwrap();
    let api: Api<DynamicObject> = match (caps.scope, doc["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        (kube::discovery::Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &resource),
        (kube::discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
    };
    api.patch(name, &PatchParams::apply("nvlabel-test-admin").force(), &Patch::Apply(doc))
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", doc["kind"]))
}

/// Waits until the API serves a kind (a CRD just created takes a moment).
pub async fn wait_for_kind(client: &Client, group: &str, version: &str, kind: &str) {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    for _ in 0..100 {
        if kube::discovery::pinned_kind(client, &gvk).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{gvk:?} never served");
}

/// Creates a Node (the tier runs no kubelet; nodes are plain objects).
pub async fn node(client: &Client, name: &str, labels: Value) -> Node {
    let api: Api<Node> = Api::all(client.clone());
    let _ = api.delete(name, &Default::default()).await;
    for _ in 0..50 {
        if api.get_opt(name).await.unwrap().is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    api.create(&PostParams::default(), &n).await.unwrap()
}

/// Makes sure a namespace exists, with its `default` service account (no controller creates it).
pub async fn namespace(client: &Client, name: &str, labels: Value) {
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
    )
    .await;
    apply(client, &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}}))
        .await;
}

/// A token of `sa`, bound to `pod` (so it carries the pod's node name).
pub async fn pod_token(client: &Client, namespace: &str, sa: &str, pod: &Pod) -> String {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    // Built from JSON: the typed spec's fields differ between Kubernetes versions.
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid},
            "expirationSeconds": 3600,
        }
    }))
    .unwrap();
    let answer = api.create_token_request(sa, &PostParams::default(), &request).await.unwrap();
    serde_json::to_value(answer).unwrap()["status"]["token"].as_str().unwrap().to_string()
}

/// Whether an API error is the server saying no (403 Forbidden, or 422 Invalid from an admission
/// policy).
pub fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected the API server to refuse, got {other:?}"),
    }
}

/// Requests a client sent: (method, path and query).
pub type Requests = std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>;

/// A service wrapper that records every request.
#[derive(Clone)]
pub struct Counting<S> {
    inner: S,
    seen: Requests,
}

impl<S, B> tower::Service<http::Request<B>> for Counting<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let what = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
        self.seen.lock().unwrap().push((req.method().to_string(), what));
        self.inner.call(req)
    }
}

/// A client from a kubeconfig that records every request it sends.
pub async fn counting_client(path: &Path) -> (Client, Requests) {
    let file = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    let seen = Requests::default();
    let layer = tower::layer::layer_fn({
        let seen = seen.clone();
        move |inner| Counting { inner, seen: seen.clone() }
    });
    let client = kube::client::ClientBuilder::try_from(config).unwrap().with_layer(&layer).build();
    (client, seen)
}
