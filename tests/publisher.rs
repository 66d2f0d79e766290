//! The daemon's publisher, driven by hand through the feature-file writer (no API server, no
//! clock): a fight is throttled as its log line promises, and a publish that failed is tried again
//! as soon as the watched object changes, not after the daemon's backoff.

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
