//! The cluster-side cost of many labelers: NODES daemons (nvlabel's own loop, Node mode, one
//! watch of their Node each) in one process against one mocked API server that counts requests
//! per verb. Phases: settle; idle (requests per node per hour, target 0 reads and 0 writes
//! besides the open watches); label changes (target exactly 1 write per node per change); drift
//! injected on some nodes (time until repaired); an API server restart (watch streams cut,
//! requests refused for a while, then `410 Gone` for old resource versions: how the relists
//! spread over time). Appends a `# Load` section to benches/RESULTS.md; exits non-zero when a
//! target is missed.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use kube::client::Body;
use nvlabel::config::{Cli, ConfigSource, ConfigState};
use nvlabel::daemon::{Control, Daemon, Parts};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const NODES: usize = 200;
const PASS_INTERVAL: &str = "2s";
const IDLE: Duration = Duration::from_secs(20);
const CHANGES: usize = 3;
const DRIFTED: usize = 20;
const DOWN: Duration = Duration::from_secs(3);

type ResponseBody = BoxBody<Bytes, Infallible>;

/// One node as the mock server keeps it.
#[derive(Default)]
struct NodeState {
    labels: serde_json::Map<String, Value>,
    rv: u64,
    watchers: Vec<mpsc::UnboundedSender<Result<http_body::Frame<Bytes>, Infallible>>>,
}

/// The mock API server's state.
#[derive(Default)]
struct Cluster {
    nodes: HashMap<String, NodeState>,
    /// Requests by verb.
    verbs: BTreeMap<&'static str, u64>,
    /// When each list request came, for the relist spread.
    lists: Vec<Instant>,
    /// When each node's labels were last written, for drift repair.
    written: HashMap<String, Instant>,
    /// Refuse everything (the API server is down).
    down: bool,
    /// Resource versions below this are gone (410) after a restart.
    epoch: u64,
}

fn node_json(name: &str, n: &NodeState) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": n.rv.to_string(), "labels": n.labels}})
}

fn full(code: StatusCode, v: &Value) -> Response<ResponseBody> {
    let mut r = Response::new(Full::new(Bytes::from(serde_json::to_vec(v).unwrap())).boxed());
    *r.status_mut() = code;
    r
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": reason})
}

impl Cluster {
    fn notify(&mut self, name: &str) {
        let n = self.nodes.get_mut(name).unwrap();
        n.rv = self.epoch.max(n.rv) + 1;
        let event = json!({"type": "MODIFIED", "object": node_json(name, n)});
        let line = Bytes::from(format!("{event}\n"));
        n.watchers.retain(|w| w.send(Ok(http_body::Frame::data(line.clone()))).is_ok());
    }

    fn handle(&mut self, method: &Method, path: &str, query: &str, body: &[u8]) -> Response<ResponseBody> {
        let verb = match (method, query.contains("watch=true")) {
            (&Method::GET, true) => "watch",
            (&Method::GET, false) if path == "/api/v1/nodes" => "list",
            (&Method::GET, false) => "get",
            (&Method::PATCH, _) => "patch",
            _ => "other",
        };
        *self.verbs.entry(verb).or_default() += 1;
        if self.down {
            return full(StatusCode::SERVICE_UNAVAILABLE, &status(503, "ServiceUnavailable"));
        }
        let field = |q: &str, key: &str| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix(key))
                .map(|v| v.replace("%3D", "=").replace("%2F", "/"))
        };
        match verb {
            "list" | "watch" => {
                let selector = field(query, "fieldSelector=").unwrap_or_default();
                let name = selector.trim_start_matches("metadata.name=").to_string();
                if verb == "list" {
                    self.lists.push(Instant::now());
                    let items: Vec<Value> =
                        self.nodes.get(&name).map(|n| node_json(&name, n)).into_iter().collect();
                    let rv = self.nodes.get(&name).map_or(self.epoch, |n| n.rv.max(self.epoch));
                    return full(
                        StatusCode::OK,
                        &json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
                    );
                }
                let from: u64 = field(query, "resourceVersion=").and_then(|v| v.parse().ok()).unwrap_or(0);
                if from < self.epoch {
                    // As the API server says it: a watch stream whose one event is a 410 error.
                    let event = json!({"type": "ERROR", "object": status(410, "Expired")});
                    *self.verbs.entry("gone").or_default() += 1;
                    return Response::new(Full::new(Bytes::from(format!("{event}\n"))).boxed());
                }
                let (tx, rx) = mpsc::unbounded_channel();
                if let Some(n) = self.nodes.get_mut(&name) {
                    n.watchers.push(tx);
                }
                let stream = tokio_stream_from(rx);
                Response::new(StreamBody::new(stream).boxed())
            }
            "get" => {
                let name = path.rsplit('/').next().unwrap().to_string();
                match self.nodes.get(&name) {
                    Some(n) => full(StatusCode::OK, &node_json(&name, n)),
                    None => full(StatusCode::NOT_FOUND, &status(404, "NotFound")),
                }
            }
            "patch" => {
                let name = path.rsplit('/').next().unwrap().to_string();
                let applied: Value = serde_json::from_slice(body).unwrap();
                let labels = applied["metadata"]["labels"].as_object().cloned().unwrap_or_default();
                self.nodes.get_mut(&name).unwrap().labels = labels;
                self.written.insert(name.clone(), Instant::now());
                self.notify(&name);
                full(StatusCode::OK, &node_json(&name, &self.nodes[&name]))
            }
            _ => full(StatusCode::NOT_FOUND, &status(404, "NotFound")),
        }
    }
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A kube client whose requests go to `cluster`.
fn client(cluster: Arc<Mutex<Cluster>>) -> kube::Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let cluster = cluster.clone();
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let query = parts.uri.query().unwrap_or_default().to_string();
            let response = cluster.lock().unwrap().handle(&parts.method, parts.uri.path(), &query, &bytes);
            Ok::<_, Infallible>(response)
        }
    });
    kube::Client::new(service, "default")
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("node.yaml");
    let text = std::fs::read_to_string(root().join("testdata/golden/h100-x8.snapshot.yaml")).unwrap();
    std::fs::write(&snapshot, &text).unwrap();
    let cluster = Arc::new(Mutex::new(Cluster { epoch: 1, ..Cluster::default() }));
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i:05}")).collect();
    for n in &names {
        cluster.lock().unwrap().nodes.insert(n.clone(), NodeState { rv: 1, ..NodeState::default() });
    }
    let mut controls = Vec::new();
    for name in &names {
        let cli = Cli::try_from_args([
            "nvlabel",
            "--sink=node",
            &format!("--node-name={name}"),
            "--no-timestamp",
            &format!("--sleep-interval={PASS_INTERVAL}"),
            "--snapshot",
            snapshot.to_str().unwrap(),
        ])
        .unwrap();
        let state = ConfigState::load(cli, Default::default(), ConfigSource::None, None).unwrap();
        let client = client(cluster.clone());
        let session = nvlabel::probe::Session::new();
        let parts = Parts {
            config: Box::new(nvlabel::config::DaemonInputs::new(state)),
            metrics: Default::default(),
            client: Some(client),
            session,
            views: None,
            slices: None,
            draw: nvlabel::daemon::RANDOM,
        };
        let daemon = Daemon::new(parts).unwrap();
        let (tx, rx) = mpsc::channel(1);
        controls.push(tx);
        tokio::spawn(async move { daemon.serve(rx).await.unwrap() });
    }
    let labelled = |c: &Cluster| c.nodes.values().filter(|n| !n.labels.is_empty()).count();
    wait_until("every node labelled", || labelled(&cluster.lock().unwrap()) == NODES).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Idle.
    let before = cluster.lock().unwrap().verbs.clone();
    tokio::time::sleep(IDLE).await;
    let after = cluster.lock().unwrap().verbs.clone();
    let delta = |verb: &str| after.get(verb).copied().unwrap_or(0) - before.get(verb).copied().unwrap_or(0);
    let per_node_hour = |n: u64| n as f64 / NODES as f64 * 3600.0 / IDLE.as_secs_f64();
    let idle: BTreeMap<&str, f64> =
        ["get", "list", "watch", "patch"].iter().map(|v| (*v, per_node_hour(delta(v)))).collect();

    // Label changes: the driver version changes on every node.
    let mut writes_per_change = Vec::new();
    for i in 0..CHANGES {
        let patches = cluster.lock().unwrap().verbs.get("patch").copied().unwrap_or(0);
        let version = format!("550.90.{}", 20 + i);
        let changed =
            text.replace("driver_version: \"550.90.07\"", &format!("driver_version: \"{version}\""));
        assert_ne!(changed, text, "the snapshot's driver version is where the benchmark expects it");
        // Atomically: 200 labelers read it every pass, and a half-written snapshot can parse as
        // another machine (a write the benchmark would then count against nvlabel).
        let tmp = snapshot.with_extension("tmp");
        std::fs::write(&tmp, changed).unwrap();
        std::fs::rename(&tmp, &snapshot).unwrap();
        let want = Value::String(version.clone());
        wait_until("the change published", || {
            let c = cluster.lock().unwrap();
            c.nodes.values().all(|n| n.labels.get("nvidia.com/cuda.driver-version.full") == Some(&want))
        })
        .await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        let now = cluster.lock().unwrap().verbs.get("patch").copied().unwrap_or(0);
        writes_per_change.push((now - patches) as f64 / NODES as f64);
    }

    // Drift on some nodes: one of our labels removed, as by someone else.
    let mut injected = HashMap::new();
    {
        let mut c = cluster.lock().unwrap();
        for name in names.iter().step_by(NODES / DRIFTED) {
            c.nodes.get_mut(name).unwrap().labels.remove("nvidia.com/gpu.count");
            injected.insert(name.clone(), Instant::now());
            c.notify(name);
        }
    }
    wait_until("drift repaired", || {
        let c = cluster.lock().unwrap();
        injected.keys().all(|n| c.nodes[n].labels.contains_key("nvidia.com/gpu.count"))
    })
    .await;
    let mut repair: Vec<Duration> = {
        let c = cluster.lock().unwrap();
        injected.iter().map(|(n, t)| c.written[n].duration_since(*t)).collect()
    };
    repair.sort();

    // API server restart: every watch stream is cut, requests fail for DOWN, then old resource
    // versions are gone (410) and the watchers relist.
    let restart_patches = cluster.lock().unwrap().verbs.get("patch").copied().unwrap_or(0);
    let cut = Instant::now();
    {
        let mut c = cluster.lock().unwrap();
        c.down = true;
        c.lists.clear();
        for n in c.nodes.values_mut() {
            n.watchers.clear();
        }
    }
    tokio::time::sleep(DOWN).await;
    {
        let mut c = cluster.lock().unwrap();
        c.down = false;
        c.epoch = c.nodes.values().map(|n| n.rv).max().unwrap_or(1) + 1000;
        let epoch = c.epoch;
        for n in c.nodes.values_mut() {
            n.rv = epoch;
        }
    }
    wait_until("every watcher relisted", || cluster.lock().unwrap().lists.len() >= NODES).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lists: Vec<Duration> = cluster.lock().unwrap().lists.iter().map(|t| t.duration_since(cut)).collect();
    let mut per_second: BTreeMap<u64, usize> = BTreeMap::new();
    for t in &lists {
        *per_second.entry(t.as_secs()).or_default() += 1;
    }
    let busiest = per_second.values().copied().max().unwrap_or(0);
    let first = lists.iter().min().copied().unwrap_or_default();
    let last = lists.iter().max().copied().unwrap_or_default();
    let restart_writes = cluster.lock().unwrap().verbs.get("patch").copied().unwrap_or(0) - restart_patches;
    for c in &controls {
        let _ = c.send(Control::Shutdown).await;
    }

    let mut missed = Vec::new();
    if idle["get"] + idle["list"] + idle["patch"] > 0.0 {
        missed.push(format!("idle requests per node per hour: {idle:?}"));
    }
    if writes_per_change.iter().any(|w| (*w - 1.0).abs() > f64::EPSILON) {
        missed.push(format!("writes per node per change: {writes_per_change:?}"));
    }
    if percentile(&repair, 0.99) > Duration::from_secs(5) {
        missed.push(format!("drift repair p99 {:?}", percentile(&repair, 0.99)));
    }
    if busiest > NODES / 4 {
        missed.push(format!("{busiest} of {NODES} relists in one second"));
    }
    if restart_writes > 0 {
        missed.push(format!("{restart_writes} writes after the restart, with nothing changed"));
    }
    let spread: Vec<String> = per_second.iter().map(|(s, n)| format!("{s}s: {n}")).collect();
    let md = format!(
        "\n# Load\n\n`cargo bench --bench load`: {NODES} labelers (nvlabel's daemon loop, Node mode, a pass every\n\
         {PASS_INTERVAL}, one watch of their Node each) in one process against one mocked API server that counts\n\
         requests per verb.\n\n\
         | measure | result | target |\n|---|---|---|\n\
         | idle requests per node per hour (get / list / patch / new watches), over {}s | {:.1} / {:.1} / {:.1} / {:.1} | 0 reads, 0 writes |\n\
         | writes per node per label change ({CHANGES} changes) | {} | exactly 1 |\n\
         | drift repair ({} nodes): median / p99 / max | {:?} / {:?} / {:?} | within seconds (p99 under 5 s) |\n\
         | relists after an API server restart ({}s down): first / last after the cut, busiest second | {:.1}s / {:.1}s / {busiest} of {NODES} | spread, at most a quarter in any second |\n\
         | writes after the restart (nothing changed) | {restart_writes} | 0 |\n\n\
         Relists per second after the cut: {}.\n\n\
         Targets: {}\n",
        IDLE.as_secs(),
        idle["get"], idle["list"], idle["patch"], idle["watch"],
        writes_per_change.iter().map(|w| format!("{w:.2}")).collect::<Vec<_>>().join(", "),
        repair.len(), percentile(&repair, 0.5), percentile(&repair, 0.99), repair.last().unwrap(),
        DOWN.as_secs(), first.as_secs_f64(), last.as_secs_f64(),
        spread.join(", "),
        if missed.is_empty() { "all met.".to_string() } else { format!("MISSED: {missed:?}") }
    );
    let results = root().join("benches/RESULTS.md");
    let old = std::fs::read_to_string(&results).unwrap_or_default();
    let head = match old.find("\n# Load") {
        Some(i) => {
            let rest = &old[i + 1..];
            let end = rest.find("\n# ").map(|j| i + 1 + j).unwrap_or(old.len());
            format!("{}{}", &old[..i], &old[end..])
        }
        None => old,
    };
    std::fs::write(&results, head.trim_end().to_string() + "\n" + &md).unwrap();
    print!("{md}");
    if !missed.is_empty() {
        eprintln!("targets missed: {missed:?}");
        std::process::exit(1);
    }
}

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(120), "{what}: not within 2 minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
