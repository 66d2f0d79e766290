//! `--health-xid-thresholds` with a running daemon on a real kube-apiserver and the fake NVML:
//! an Xid that is no fault alone (the catalog's say, or the driver's recovery action `none`)
//! turns the condition `False` when it comes COUNT times on one GPU within WINDOW, with a message
//! naming the Xid and the count; another GPU's Xids and repeats further apart than the window do
//! not count. Needs `NVLABEL_KUBE_TEST_SERVER`; without it the test skips with one line.

use crate::common;

use common::apiserver;
use common::health_daemon::*;
use nvlabel::health::values::fault::{Action, Fault};
use std::time::Duration;

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";
const UUID1: &str = "GPU-a1b2c3d4-0001-4000-8000-000000000001";

#[tokio::test]
async fn the_third_xid_43_in_a_minute_is_a_fault() {
    let Some(server) = apiserver::server("the_third_xid_43_in_a_minute_is_a_fault") else { return };
    // GPU 0's driver answers its recovery action (`none`): it decides after an Xid; on GPU 1
    // the catalog does. Xid 43 and 45 are no fault alone either way.
    let flags = ["--health-xid-thresholds=43:3/1m,45:2/2s"];
    let (admin, dir, _daemon) = daemon_on(server, "h100x2-recovery", &flags).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;

    for line in ["0 xid 43", "0 xid 43", "1 xid 43", "1 xid 43", "1 xid 45"] {
        event_line(d, line);
    }
    // Further apart than its window: the second Xid 45 starts a new count.
    tokio::time::sleep(Duration::from_secs(5)).await;
    event_line(d, "1 xid 45");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (c, _) = until(&admin, "still healthy", |_| true).await;
    assert_eq!((c.0.as_str(), c.2.as_str()), ("True", "2 GPUs healthy"), "{}", logs(d));

    // GPU 0's third Xid 43 within the minute (GPU 1's two are its own).
    event_line(d, "0 xid 43");
    let (c, took) = until(&admin, "the third Xid 43", |c| c.0 == "False").await;
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(c.1, "XidCriticalError");
    assert_eq!(
        c.2,
        format!(
            "GPU 0 ({UUID0}): XidCriticalError, Xid 43 3 times in 1m, action: reset the GPU [boot boot-1]"
        )
    );
    let record = record_of(&admin).await.expect("the fault is recorded");
    let fault = &record.faults[0].fault;
    assert!(
        matches!(fault, Fault::Xid { xid: 43, action: Some(Action::ResetGpu), repeated: Some(t), .. } if t.count == 3),
        "{fault:?}"
    );
    let warnings = node_warnings(&admin).await;
    let notes: Vec<_> = warnings.iter().filter_map(|e| e.note.as_deref()).collect();
    assert!(notes.iter().any(|n| n.contains("Xid 43 3 times in 1m")), "{notes:?}");

    // Two Xid 45 at once on GPU 1: its own threshold.
    event_line(d, "1 xid 45");
    event_line(d, "1 xid 45");
    let (c, _) = until(&admin, "GPU 1's Xid 45", |c| c.2.contains("GPU 1")).await;
    assert!(
        c.2.contains(&format!(
            "GPU 1 ({UUID1}): XidCriticalError, Xid 45 2 times in 2s, action: reset the GPU"
        )),
        "{}",
        c.2
    );
}
