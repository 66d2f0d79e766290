//! Health's failed API calls are logged as the rest of nvlabel's: once when they start, at most
//! once a minute while health retries, once when they end; never a line per retry. On tokio's
//! virtual clock with a mocked API (`common::mock_api`) whose answers the test switches: the
//! condition's read failing, then its write and the Events, then everything working. Each API
//! call retries within itself on a jittered backoff, so a pass takes a random span of virtual
//! time: the test counts lines against the time that passed, never against passes.

use crate::common;

use common::logs::Logs;
use http::{Method, Response, StatusCode};
use kube::client::Body;
use nvlabel::health::config::{HealthConfig, HealthSettings};
use nvlabel::health::monitor::Monitor;
use nvlabel::health::values::reading::Event;
use serde_json::json;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the mocked API answers: everything fails; reads work; everything works.
const ALL_FAIL: u8 = 0;
const READS_WORK: u8 = 1;
const ALL_WORK: u8 = 2;

/// Answers every request by the phase in force; counts the requests refused.
fn serve(mut handle: common::mock_api::Handle, phase: Arc<AtomicU8>, refused: Arc<AtomicU32>) {
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-1", "uid": "uid-1", "resourceVersion": "1"}});
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let phase = phase.load(Ordering::SeqCst);
            let works = phase == ALL_WORK || (phase == READS_WORK && request.method() == Method::GET);
            let body = match (works, request.method()) {
                (false, _) => {
                    refused.fetch_add(1, Ordering::SeqCst);
                    common::mock_api::status(500, "InternalError")
                }
                (true, &Method::POST) => {
                    let bytes = request.into_body().collect_bytes().await.unwrap();
                    let mut event: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                    event["metadata"]["name"] = json!("e1");
                    event
                }
                (true, _) => node.clone(),
            };
            let code = if works { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR };
            let response =
                Response::builder().status(code).body(Body::from(serde_json::to_vec(&body).unwrap()));
            send.send_response(response.unwrap());
        }
    });
}

fn config(boot_id_file: std::path::PathBuf) -> HealthConfig {
    common::health_on_gpu_1(HealthSettings { boot_id_file, ..Default::default() })
}

/// A new fault every second until `seconds` of virtual time have passed, each on a GPU of its
/// own so each is new (a condition to write, an Event to send). Returns the whole seconds that
/// passed: a pass whose calls retry takes longer than its second.
async fn events_for(monitor: &mut Monitor, seconds: u64) -> u64 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = tokio::time::Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        let index = NEXT.fetch_add(1, Ordering::SeqCst);
        monitor.event(Event::DoubleBitEcc { index }).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    start.elapsed().as_secs()
}

/// The most lines a failure may take over `seconds`: its first, then one a minute.
fn at_most(seconds: u64) -> usize {
    1 + (seconds / 60) as usize
}

#[tokio::test(start_paused = true)]
async fn a_failing_call_is_said_once_then_once_a_minute_then_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let boot = dir.path().join("boot_id");
    std::fs::write(&boot, "6f1e0c0a-1111-2222-3333-444455556666\n").unwrap();
    let logs = Logs::default();
    let _guard = logs.capture();
    let (client, handle) = common::mock_api::mock();
    let phase = Arc::new(AtomicU8::new(ALL_FAIL));
    let refused = Arc::new(AtomicU32::new(0));
    serve(handle, phase.clone(), refused.clone());
    let metrics = Arc::new(Default::default());
    let mut monitor =
        Monitor::new(&config(boot), client, nvlabel::probe::Session::new(), metrics, None, None).unwrap();

    // Under a minute: the first line only, though the read was tried again and again.
    let read = "cannot read the Node's health condition yet";
    let first = events_for(&mut monitor, 45).await;
    assert!(first < 60, "a read's retries took {first} s");
    assert_eq!(logs.count(read), 1, "a minute of retries is one line:\n{}", logs.text());
    assert!(refused.load(Ordering::SeqCst) >= 3, "the read was retried");
    let passed = first + events_for(&mut monitor, 600 - first).await;
    let lines = logs.count(read);
    assert!((2..=at_most(passed)).contains(&lines), "then at most one a minute: {lines} in {passed} s");
    assert_eq!(logs.count(&format!("still: {read}")), lines - 1, "each reminder says so");

    phase.store(READS_WORK, Ordering::SeqCst);
    let write = "writing the GPU health condition failed";
    let event = "cannot send a GPU health Event";
    let passed = events_for(&mut monitor, 300).await;
    assert_eq!(logs.count("resolved: the Node's health condition is read"), 1, "{}", logs.text());
    assert!((1..=at_most(passed)).contains(&logs.count(write)), "{passed} s:\n{}", logs.text());
    assert_eq!(logs.count(&format!("still: {write}")), logs.count(write) - 1);
    let events = logs.count(event);
    assert!(
        (1..=at_most(passed)).contains(&events),
        "not one per fault Event ({passed} s):\n{}",
        logs.text()
    );

    phase.store(ALL_WORK, Ordering::SeqCst);
    events_for(&mut monitor, 300).await;
    assert_eq!(logs.count("resolved: the GPU health condition is written again"), 1, "{}", logs.text());
    assert_eq!(logs.count("resolved: GPU health Events are sent again"), 1, "{}", logs.text());
}

/// A refused write of the condition is tried again when its backoff ends (a timer, its first
/// wait under a second), not at the next reading, here an hour away. On the real clock: the
/// reading runs on a thread of its own, which a paused clock would not wait for.
#[tokio::test]
async fn a_refused_condition_write_is_retried_when_its_backoff_ends() {
    let dir = tempfile::tempdir().unwrap();
    let boot = dir.path().join("boot_id");
    std::fs::write(&boot, "6f1e0c0a-1111-2222-3333-444455556666\n").unwrap();
    let logs = Logs::default();
    let _guard = logs.capture();
    let (client, mut handle) = common::mock_api::mock();
    let patches = Arc::new(AtomicU32::new(0));
    let seen = patches.clone();
    tokio::spawn(async move {
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-1", "uid": "uid-1", "resourceVersion": "1"}});
        while let Some((request, send)) = handle.next_request().await {
            let refuse = request.method() == Method::PATCH && seen.fetch_add(1, Ordering::SeqCst) == 0;
            let (code, body) = match refuse {
                true => (StatusCode::FORBIDDEN, common::mock_api::status(403, "Forbidden")),
                false => (StatusCode::OK, node.clone()),
            };
            let response =
                Response::builder().status(code).body(Body::from(serde_json::to_vec(&body).unwrap()));
            send.send_response(response.unwrap());
        }
    });
    let config = HealthConfig { every: Duration::from_secs(3600), ..config(boot) };
    let watches = nvlabel::health::task::Watches::default();
    let mut task =
        nvlabel::health::task::start(&config, Some(client), nvlabel::probe::Session::new(), watches)
            .unwrap()
            .expect("health is on");
    let (_tx, rx) = tokio::sync::watch::channel(Arc::new(config));
    let written = async {
        let start = std::time::Instant::now();
        while patches.load(Ordering::SeqCst) < 2 && start.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    task.run(rx, written).await;
    assert_eq!(patches.load(Ordering::SeqCst), 2, "refused once, then written:\n{}", logs.text());
    assert_eq!(logs.count("writing the GPU health condition failed"), 1, "{}", logs.text());
    assert_eq!(logs.count("resolved: the GPU health condition is written again"), 1, "{}", logs.text());
}
