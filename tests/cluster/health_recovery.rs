//! Faults that clear in place on a real kube-apiserver, driven through the fake NVML's event
//! file: the driver's recovery action back to none and a completed row remapping each clear their
//! fault once they have read as gone for the hold time, with one `Normal` Event, the condition's
//! time moving only with its status; a fault back
//! within the hour says so and asks for more; an Xid nothing can show the end of stays.
//! Needs `NVLABEL_KUBE_TEST_SERVER`; without it each test skips with one line.

use crate::common;

use common::apiserver;
use common::health_cluster::get_condition;
use common::health_daemon::*;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use std::time::{Duration, Instant};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const UUID0: &str = "GPU-a1b2c3d4-0000-4000-8000-000000000000";
const UUID1: &str = "GPU-a1b2c3d4-0001-4000-8000-000000000001";
/// The hold the daemons run with: long against the 1 s passes, short for a test.
const HOLD: Duration = Duration::from_secs(4);

/// The `GpuFaultCleared` Events about gpu-a, oldest first.
async fn cleared_events(admin: &Client) -> Vec<Event> {
    node_events(admin, |e| e.reason.as_deref() == Some("GpuFaultCleared")).await
}

/// The GPUHealthy condition's lastTransitionTime on gpu-a.
async fn transition(admin: &Client) -> k8s_openapi::jiff::Timestamp {
    let node = common::health_cluster::nodes_of(admin).get("gpu-a").await.unwrap();
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let c = conditions.into_iter().find(|c| c.type_ == "GPUHealthy").expect("the condition");
    c.last_transition_time.expect("a transition time").0
}

/// Waits (bounded) until there are `n` cleared Events after the first `skip`; returns their notes.
async fn until_cleared(admin: &Client, skip: usize, n: usize) -> Vec<String> {
    let start = Instant::now();
    loop {
        let events: Vec<Event> = cleared_events(admin).await.into_iter().skip(skip).collect();
        if events.len() >= n {
            assert_eq!(events.len(), n, "one Event per clearing");
            assert!(events.iter().all(|e| e.type_.as_deref() == Some("Normal")), "{events:?}");
            return events.into_iter().map(|e| e.note.unwrap_or_default()).collect();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{n} cleared Events never came: {events:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_drivers_action_and_a_completed_remap_clear_in_place_and_a_return_says_so() {
    let Some(server) = apiserver::server("the_drivers_action_and_a_completed_remap_clear_in_place") else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let hold = format!("--health-recovery-hold={}s", HOLD.as_secs());
    let (admin, dir, _daemon) = daemon_on(server, "h100x2-recovery", &[&hold]).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;
    let first = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
    let skip = cleared_events(&admin).await.len();

    // The driver asks for a reset on GPU 0; a row remapping waits for a reset on GPU 1.
    event_line(d, "0 set recovery_action gpu_reset");
    event_line(d, "1 set remapped_rows.pending true");
    let (c, _) = until(&admin, "both faults", |c| c.2.contains("RemappedRowsPending")).await;
    assert_eq!(c.1, "GpuRecoveryActionRequired", "{c:?}");
    let since = transition(&admin).await;

    // The driver says none again: GPU 0's fault clears after the hold; the condition stays False
    // and its lastTransitionTime stays, since its status did not change.
    event_line(d, "0 set recovery_action none");
    let gone = Instant::now();
    let (c, _) = until(&admin, "the driver's action back to none", |c| c.1 == "RemappedRowsPending").await;
    assert!(gone.elapsed() >= HOLD, "cleared {:?} after the evidence, before the hold", gone.elapsed());
    assert_eq!(c.0, "False", "{c:?}\n{}", logs(d));
    assert!(!c.2.contains("GpuRecoveryActionRequired"), "{c:?}");
    assert_eq!(transition(&admin).await, since, "the status did not change");
    let notes = until_cleared(&admin, skip, 1).await;
    assert!(
        notes[0].contains(&format!("GPU 0 ({UUID0}): GpuRecoveryActionRequired"))
            && notes[0].contains("cleared: the driver's recovery action is none and the GPU answers"),
        "{notes:?}"
    );
    assert_eq!(record_of(&admin).await.expect("recorded").faults.len(), 1, "the record follows");

    // The remapping completes: healthy, and only now does the condition's time move.
    event_line(d, "1 set remapped_rows.pending false");
    let (c, _) = until(&admin, "the remap completed", |c| c.0 == "True").await;
    assert_eq!(c.1, "GpusHealthy", "{c:?}");
    assert!(transition(&admin).await > since);
    let notes = until_cleared(&admin, skip, 2).await;
    assert!(notes[1].contains(&format!("GPU 1 ({UUID1}): RemappedRowsPending")), "{notes:?}");
    assert!(notes[1].contains("cleared: no row remapping is pending"), "{notes:?}");
    assert_eq!(record_of(&admin).await, None, "no fault left: no record");

    // Back within the hour: it says so, and a GPU that keeps needing resets needs replacing.
    event_line(d, "1 set remapped_rows.pending true");
    let (c, _) = until(&admin, "the remap back", |c| c.0 == "False").await;
    assert!(
        c.2.contains(
            "row remapping pending, back after clearing once within the hour, action: replace the GPU"
        ),
        "{}",
        c.2
    );
    let record = record_of(&admin).await.expect("recorded");
    assert_eq!(record.faults[0].recurrences, Some(1), "{record:?}");
    let now = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
    assert_ne!(now, first);
}

#[tokio::test]
async fn an_xid_nothing_can_show_the_end_of_stays() {
    let Some(server) = apiserver::server("an_xid_nothing_can_show_the_end_of_stays") else { return };
    let _serial = SERIAL.lock().await;
    // No field 230 on this driver: an Xid's end cannot be read.
    let (admin, dir, _daemon) = daemon_on(server, "h100x2", &["--health-recovery-hold=0s"]).await;
    let d = dir.path();
    until(&admin, "the first condition", |c| c.0 == "True").await;
    // The server may be the other test's too: only Events from now count.
    let before = cleared_events(&admin).await.len();
    event_line(d, "0 xid 79");
    let (c, _) = until(&admin, "xid 79", |c| c.0 == "False").await;
    // Many passes with nothing wrong read: the Xid stays.
    let polls = Instant::now();
    while polls.elapsed() < Duration::from_secs(4) {
        let now = get_condition(&admin, "gpu-a", "GPUHealthy").await.unwrap();
        assert_eq!(now, c, "{}", logs(d));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(cleared_events(&admin).await.len(), before);
}
