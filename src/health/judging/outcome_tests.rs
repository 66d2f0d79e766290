use super::*;
use crate::health::values::fault::Threshold;
use crate::health::values::reading::GpuReading;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The lines logged while `f` runs (this thread's).
fn logged(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    text
}

fn tally(seen: u32) -> Option<Tally> {
    Some(Tally { seen, threshold: Threshold { count: 3, window: Duration::from_secs(60) } })
}

const XID_43: Event = Event::Xid { index: 0, xid: 43, mig: None };

#[test]
fn each_rule_is_named_with_why() {
    let cases = [
        (Rule::Catalog { immediate: "IGNORE" }, None, "xid-catalog", "NVIDIA's Xid catalog says IGNORE"),
        (Rule::IgnoreList, None, "--health-ignore-xids", "--health-ignore-xids lists it"),
        (Rule::Driver, None, "driver", "the driver's recovery action reads none"),
        (
            Rule::Catalog { immediate: "IGNORE" },
            tally(1),
            "--health-xid-thresholds",
            "NVIDIA's Xid catalog says IGNORE; below its --health-xid-thresholds count: 1 of 3 within 1m",
        ),
        (
            Rule::Driver,
            tally(2),
            "--health-xid-thresholds",
            "the driver's recovery action reads none; below its --health-xid-thresholds count: 2 of 3 within 1m",
        ),
    ];
    for (rule, tally, name, why) in cases {
        let no = NoFault { rule, tally };
        assert_eq!((no.name(), no.to_string().as_str()), (name, why));
        let line = logged(|| no.log(&XID_43));
        assert_eq!(
            line.trim_end(),
            format!(" INFO nvlabel::health::outcome: GPU event that is not a fault event=Xid 43 on GPU 0 rule={name:?} why={why}"),
        );
    }
}

#[test]
fn what_the_driver_said_after_an_xid() {
    let gpu = |action| GpuReading { index: 0, recovery_action: action, ..GpuReading::default() };
    let reading = |g| Some(Ok(Reading { gpus: vec![g], pci_gpus: None }));
    assert_eq!(DriverSaid::of(reading(gpu(Some(0))).as_ref(), 0), DriverSaid::Nothing);
    assert_eq!(DriverSaid::of(reading(gpu(Some(4))).as_ref(), 0), DriverSaid::Asks(Action::DrainAndReset));
    let unread = |r: Option<Result<Reading, ReadError>>, index| match DriverSaid::of(r.as_ref(), index) {
        DriverSaid::Unread(why) => why,
        other => panic!("{other:?}"),
    };
    assert_eq!(unread(reading(gpu(None)), 0), "the driver did not answer it this time");
    assert_eq!(unread(reading(gpu(Some(0))), 1), "NVML no longer lists GPU 1");
    assert_eq!(unread(reading(GpuReading { lost: true, ..gpu(Some(0)) }), 0), "the GPU is lost (GpuLost)");
    assert_eq!(unread(None, 0), "the reading hangs in NVML");

    let xid = AfterXid { index: 0, xid: 109, tally: None };
    let event = Event::Xid { index: 0, xid: 109, mig: None };
    let line = logged(|| DriverSaid::Asks(Action::ResetGpu).log(&event, &xid, true));
    assert!(line.contains(" INFO "), "{line}");
    assert!(line.contains("GPU event that is a fault: the driver asks for a recovery action (GpuRecoveryActionRequired) event=Xid 109 on GPU 0 action=\"reset the GPU\""), "{line}");
    let line = logged(|| DriverSaid::Asks(Action::ResetGpu).log(&event, &xid, false));
    assert!(line.contains(" WARN ") && line.contains("the next pass reads it again"), "{line}");
    let line = logged(|| DriverSaid::Nothing.log(&event, &AfterXid { tally: tally(1), ..xid }, true));
    assert!(line.contains("GPU event that is not a fault event=Xid 109 on GPU 0 rule=\"--health-xid-thresholds\" why=the driver's recovery action reads none; below its --health-xid-thresholds count: 1 of 3 within 1m"), "{line}");
    let line = logged(|| DriverSaid::Unread("the reading hangs in NVML".into()).log(&event, &xid, true));
    assert!(
        line.contains(" WARN ")
            && line.contains("GPU event not judged yet")
            && line.contains("why=the reading hangs in NVML"),
        "{line}"
    );
}
