//! The real kube client as nvlabel builds it (`nvlabel::kubeapi::client_from`), against a
//! misbehaving server on loopback: a server that never answers, one whose body stalls after its
//! headers, a 100 MB answer, the User-Agent, no retries of the client's own, and the QPS limit.
//! What a mocked tower service cannot show, because it replaces the client's own stack.

use crate::common;

use common::raw_http::{self, Answer};
use nvlabel::kubeapi::{client_from, Limits};
use nvlabel::publish::{NodeLabels, Writer};
use std::time::{Duration, Instant};

fn quick() -> nvlabel::kubeapi::backoff::FullJitter {
    nvlabel::kubeapi::backoff::FullJitter::new(Duration::ZERO, Duration::ZERO).retries(0)
}

fn limits(request: Duration) -> Limits {
    Limits { request, ..Limits::default() }
}

/// Bounds a test step: a hang fails the test instead of stalling the suite.
async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f).await.unwrap_or_else(|_| panic!("{what} hung"))
}

#[tokio::test]
async fn a_server_that_never_answers_fails_the_publish_at_the_request_deadline() {
    let server = raw_http::start(Answer::Never).await;
    let client = client_from(server.config(), 0.0, 0, limits(Duration::from_secs(1))).unwrap();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let labels = common::labels(&[("nvidia.com/gpu.count", "1")]);
    let error = bounded("the publish", writer.publish(&labels)).await.expect_err("no answer").to_string();
    assert_eq!(
        error,
        format!("cannot read Node gpu-1: the API server did not answer within 1s"),
        "the message says what was attempted and why it failed"
    );
}

#[tokio::test]
async fn a_body_that_stalls_after_its_headers_fails_the_publish_at_the_request_deadline() {
    let server = raw_http::start(Answer::StallBody).await;
    let client = client_from(server.config(), 0.0, 0, limits(Duration::from_secs(1))).unwrap();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let labels = common::labels(&[("nvidia.com/gpu.count", "1")]);
    let error =
        bounded("the publish", writer.publish(&labels)).await.expect_err("no whole answer").to_string();
    // Either message ends the stall; on a machine too slow to pass the headers on within the
    // second it would be the first.
    assert!(
        error == "cannot read Node gpu-1: the API server's answer did not arrive within 1s"
            || error == "cannot read Node gpu-1: the API server did not answer within 1s",
        "{error}"
    );
}

#[tokio::test]
async fn a_100_mb_answer_is_cut_at_the_limit_and_reported_in_one_short_line() {
    let server = raw_http::start(Answer::Huge(100 << 20)).await;
    let client = client_from(server.config(), 0.0, 0, Limits::default()).unwrap();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let labels = common::labels(&[("nvidia.com/gpu.count", "1")]);
    let error = bounded("the publish", writer.publish(&labels)).await.expect_err("cut off").to_string();
    assert!(error.contains("exceeded 4 MiB"), "{error}");
    assert!(error.len() < 400, "one short line, not the body: {} bytes", error.len());
}

#[tokio::test]
async fn every_request_says_it_is_nvlabel() {
    let server = raw_http::start(Answer::Status(404)).await;
    let client = client_from(server.config(), 0.0, 0, Limits::default()).unwrap();
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let labels = common::labels(&[("nvidia.com/gpu.count", "1")]);
    let _ = bounded("the publish", writer.publish(&labels)).await;
    let heads = server.heads.lock().unwrap().clone();
    assert!(!heads.is_empty());
    let agent = format!("user-agent: nvlabel/{}\r\n", env!("CARGO_PKG_VERSION"));
    assert!(heads.iter().all(|h| h.contains(&agent)), "{heads:?}");
}

#[tokio::test]
async fn the_client_itself_never_retries_so_the_one_backoff_is_the_only_retry_rule() {
    let server = raw_http::start(Answer::Status(503)).await;
    let client = client_from(server.config(), 0.0, 0, Limits::default()).unwrap();
    // One attempt: whatever retries a 503 would be the client's own (kube's retry layer, 15
    // retries of its own backoff inside our deadline).
    let mut writer = NodeLabels::new(client, "gpu-1").with_backoff(quick());
    let labels = common::labels(&[("nvidia.com/gpu.count", "1")]);
    let error = bounded("the publish", writer.publish(&labels)).await.expect_err("a 503").to_string();
    assert!(error.contains("answered 503"), "{error}");
    assert_eq!(server.heads.lock().unwrap().len(), 1, "one request for one attempt");
}

#[tokio::test]
async fn the_qps_limit_is_part_of_the_client_nvlabel_builds() {
    let server = raw_http::start(Answer::Status(404)).await;
    // 2 requests a second, bursts of 1: the 2nd and 3rd request each wait about half a second.
    let client = client_from(server.config(), 2.0, 1, Limits::default()).unwrap();
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let start = Instant::now();
    for _ in 0..3 {
        let _ = bounded("a request", nodes.get_opt("gpu-1")).await;
    }
    // A lower bound only: a slow machine can only make it longer.
    assert!(start.elapsed() >= Duration::from_millis(900), "3 requests at 2/s took {:?}", start.elapsed());
    assert_eq!(server.heads.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_stalled_api_server() {
    use nvlabel::config::{Cli, ConfigSource, ConfigState};
    use nvlabel::daemon::Control;
    let server = raw_http::start(Answer::Never).await;
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("t4.yaml");
    std::fs::write(&snapshot, common::ok(common::nvlabel(Some("t4")).arg("probe"))).unwrap();
    let cli = Cli::try_from_args([
        "nvlabel",
        "--sink=node",
        "--node-name=gpu-1",
        "--sleep-interval=60s",
        "--snapshot",
        snapshot.to_str().unwrap(),
    ])
    .unwrap();
    let state = ConfigState::load(cli, Default::default(), ConfigSource::None, None).unwrap();
    // The production limits: a request would wait 20 s, a publish 60 s.
    let client = client_from(server.config(), 0.0, 0, Limits::default()).unwrap();
    let daemon = common::daemon_of(state, Some(client), Default::default(), None);
    let (control, rx) = tokio::sync::mpsc::channel(4);
    let task = tokio::spawn(daemon.serve(rx));
    // The first pass is waiting on the server once it has received the read.
    while server.heads.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    control.send(Control::Shutdown).await.unwrap();
    // Far below the request deadline: the stop does not wait for the network at all.
    let stopped = tokio::time::timeout(Duration::from_secs(10), task).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "the daemon did not stop while a pass waited: {stopped:?}");
}

/// The binary's logs against a server answering 2 MiB that is not JSON (under the size limit, so
/// the client tries to parse it): every line stays short. The Kubernetes client's own warning
/// quotes whole bodies; nvlabel's default log filter keeps it out.
#[tokio::test(flavor = "multi_thread")]
async fn an_unparseable_answer_is_never_logged_whole() {
    let server = raw_http::start(Answer::Huge(2 << 20)).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\"}}}}]\n\
         contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\nusers: [{{name: u, user: {{}}}}]\n",
        server.url
    );
    std::fs::write(&kubeconfig, config).unwrap();
    let mut cmd = common::nvlabel(Some("t4"));
    cmd.args(["--oneshot", "--sink", "node", "--node-name", "gpu-1", "--kubeconfig"]).arg(&kubeconfig);
    cmd.env_remove("RUST_LOG");
    let (code, _, stderr) =
        bounded("the one-shot run", tokio::task::spawn_blocking(move || common::run(&mut cmd)))
            .await
            .unwrap();
    assert_ne!(code, 0, "the publish cannot succeed: {stderr}");
    let longest = stderr.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2000, "a log line of {longest} bytes (stderr {} bytes)", stderr.len());
}
