//! Every judgement of an NVML event said, through the `Monitor` as the daemon drives it: each Xid
//! gets one line saying what was decided, a "not a fault" line naming the rule that decided (the
//! Xid catalog, `--health-ignore-xids`, or where its `--health-xid-thresholds` count stands), and
//! an Xid the driver decides a line after its recovery action was read; a recovery action the
//! driver asks for after an Xid names the Xid in the condition, the record and the Event. The fake
//! NVML in a process of its own (`common::in_child`: it reads its environment at init), a mocked
//! API that takes every write.

use crate::common;

use common::logs::Logs;
use http::{Method, Response, StatusCode};
use kube::client::Body;
use nvlabel::health::config::{HealthConfig, HealthSettings};
use nvlabel::health::monitor::Monitor;
use nvlabel::health::values::reading::Event;
use nvlabel::probe::{ProbeOptions, Session};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Every write the mocked API took: method, path, body.
type Writes = Arc<Mutex<Vec<(Method, String, Value)>>>;

/// Answers every read with the Node and takes every write (an Event gets a name).
fn serve(mut handle: common::mock_api::Handle, writes: Writes) {
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-1", "uid": "uid-1", "resourceVersion": "1"}});
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (method, path) = (request.method().clone(), request.uri().path().to_string());
            let body = match method {
                Method::GET => node.clone(),
                _ => {
                    let bytes = request.into_body().collect_bytes().await.unwrap();
                    let mut body: Value = serde_json::from_slice(&bytes).unwrap();
                    writes.lock().unwrap().push((method.clone(), path, body.clone()));
                    if method == Method::POST {
                        body["metadata"]["name"] = json!("e1");
                    }
                    body
                }
            };
            let response =
                Response::builder().status(StatusCode::OK).body(Body::from(body.to_string().into_bytes()));
            send.send_response(response.unwrap());
        }
    });
}

/// The lines `logs` got since it held `before` lines.
fn since(logs: &Logs, before: &mut usize) -> Vec<String> {
    let lines = logs.lines();
    let new = lines[*before..].to_vec();
    *before = lines.len();
    new
}

/// Asserts the judge's and the monitor's lines among `lines` (not the writers') are exactly one
/// for each of `says`, in order, each containing its text.
fn said(lines: Vec<String>, says: &[&str]) {
    let judging = ["nvlabel::health::monitor:", "nvlabel::health::outcome:", "nvlabel::health::judge:"];
    let lines: Vec<&String> = lines.iter().filter(|l| judging.iter().any(|j| l.contains(j))).collect();
    assert_eq!(lines.len(), says.len(), "{lines:#?}");
    for (line, says) in lines.iter().zip(says) {
        assert!(line.contains(says), "{says:?} not in {line:?}");
    }
}

#[test]
fn each_xid_says_what_was_decided_and_which_rule_decided_it() {
    let test = "each_xid_says_what_was_decided_and_which_rule_decided_it";
    let Some(env) = common::in_child(test, &["FAKE_NVML_FIXTURE", "FAKE_NVML_EVENTS"]) else { return };
    let events = env["FAKE_NVML_EVENTS"].clone();
    // GPU 0's driver answers its recovery action (none); GPU 1's does not: the catalog decides.
    std::fs::copy(common::repo().join("testdata/health/h100x2-recovery.yaml"), &env["FAKE_NVML_FIXTURE"])
        .unwrap();
    std::fs::write(&events, "").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let boot_id_file = dir.path().join("boot_id");
    std::fs::write(&boot_id_file, "6f1e0c0a-1111-2222-3333-444455556666\n").unwrap();
    let mut settings = HealthSettings { enabled: true, boot_id_file, ..Default::default() };
    settings.judging.ignored_xids = [79].into();
    settings.judging.xid_thresholds = nvlabel::health::judging::thresholds::parse("43:3/1m").unwrap();
    let config = HealthConfig {
        probe: ProbeOptions {
            library: common::fake_nvml(),
            sysfs_root: dir.path().join("sys"),
            machine_type_file: "".into(),
            topology: false,
            ..ProbeOptions::default()
        },
        ..common::health_on_gpu_1(settings)
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let logs = Logs::default();
        let _guard = logs.capture();
        let (client, handle) = common::mock_api::mock();
        let writes = Writes::default();
        serve(handle, writes.clone());
        let metrics = Arc::new(Default::default());
        let mut monitor = Monitor::new(&config, client, Session::new(), metrics, None, None).unwrap();
        monitor.pass().await;
        let mut seen = logs.lines().len();
        let xid = |index, xid| Event::Xid { index, xid, mig: None };
        let not_a_fault = "GPU event that is not a fault";

        monitor.event(xid(1, 31)).await;
        said(since(&logs, &mut seen), &[&format!("{not_a_fault} event=Xid 31 on GPU 1 rule=\"xid-catalog\" why=NVIDIA's Xid catalog says RESTART_APP")]);
        monitor.event(xid(1, 79)).await;
        said(since(&logs, &mut seen), &[&format!("{not_a_fault} event=Xid 79 on GPU 1 rule=\"--health-ignore-xids\" why=--health-ignore-xids lists it")]);
        for n in 1..=2 {
            monitor.event(xid(1, 43)).await;
            said(since(&logs, &mut seen), &[&format!("{not_a_fault} event=Xid 43 on GPU 1 rule=\"--health-xid-thresholds\" why=NVIDIA's Xid catalog says IGNORE; below its --health-xid-thresholds count: {n} of 3 within 1m")]);
        }
        monitor.event(xid(1, 43)).await;
        said(since(&logs, &mut seen), &["WARN nvlabel::health::judge: GPU fault fault=GPU 1 (GPU-a1b2c3d4-0001-4000-8000-000000000001): XidCriticalError, Xid 43 3 times in 1m, action: reset the GPU"]);
        monitor.event(xid(1, 48)).await;
        said(since(&logs, &mut seen), &["GPU fault fault=GPU 1 (GPU-a1b2c3d4-0001-4000-8000-000000000001): XidCriticalError, Xid 48"]);
        monitor.event(xid(1, 48)).await;
        said(since(&logs, &mut seen), &["GPU event that is a fault recorded already event=Xid 48 on GPU 1"]);

        // GPU 0: its driver decides, read at once, and the decision is said after the reading.
        let reading = "Xid: the driver's recovery action decides; reading it now";
        monitor.event(xid(0, 109)).await;
        said(
            since(&logs, &mut seen),
            &[reading, &format!("{not_a_fault} event=Xid 109 on GPU 0 rule=\"driver\" why=the driver's recovery action reads none")],
        );
        let mut file = std::fs::OpenOptions::new().append(true).open(&events).unwrap();
        writeln!(file, "0 set recovery_action gpu_reset").unwrap();
        monitor.event(xid(0, 109)).await;
        let asks = "GPU 0 (GPU-a1b2c3d4-0000-4000-8000-000000000000): GpuRecoveryActionRequired, the driver asks for a recovery action after Xid 109, action: reset the GPU";
        said(
            since(&logs, &mut seen),
            &[
                reading,
                &format!("GPU fault fault={asks}"),
                "GPU event that is a fault: the driver asks for a recovery action (GpuRecoveryActionRequired) event=Xid 109 on GPU 0 action=\"reset the GPU\"",
            ],
        );

        // The condition, its record and the fault's Event name the Xid.
        let writes = writes.lock().unwrap();
        let status = writes.iter().rev().find(|(m, p, _)| m == Method::PATCH && p.ends_with("/status")).unwrap();
        let condition = &status.2["status"]["conditions"][0];
        assert!(condition["message"].as_str().unwrap().starts_with(asks), "{condition}");
        let record = status.2["metadata"]["annotations"]["nvidia.com/gpu-health-record"].as_str().unwrap();
        assert!(record.contains(r#""kind":"GpuRecoveryActionRequired","driverAction":"ResetGpu","xid":109"#), "{record}");
        let event = writes.iter().find(|(m, _, b)| m == Method::POST && b["reason"] == "GpuRecoveryActionRequired");
        assert_eq!(event.unwrap().2["note"], asks, "{writes:#?}");
    });
}
