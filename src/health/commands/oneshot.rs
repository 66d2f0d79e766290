//! `nvlabel health`: the node's GPU health once, as node-problem-detector's custom plugins report
//! it: a message on stdout and exit code 0 (healthy), 1 (a problem) or 2 (unknown). Only what a
//! single look can see (ECC counts, row remapping, retired pages, the driver's recovery action,
//! the InfoROM, lost and missing GPUs, fewer than `--health-expected-gpus`); Xid events need the
//! daemon, which watches all along.

use crate::health::config::HealthConfig;
use crate::health::judging::rules::Rules;
use crate::health::judging::sticky::Tracker;
use crate::health::reading::nvml_reads;
use crate::health::values::reading::Reading;
use crate::probe::Session;

/// NPD's exit code for "healthy".
pub const OK: i32 = 0;
/// NPD's exit code for "a problem".
pub const NONOK: i32 = 1;
/// NPD's exit code for "cannot tell".
pub const UNKNOWN: i32 = 2;

/// Reads NVML once and reports: the exit code and the text to print.
pub fn check(config: &HealthConfig) -> (i32, String) {
    let reading = nvml_reads::read(&Session::new(), &config.probe);
    report(&Rules::new(&config.settings.judging), reading)
}

/// The report for a reading (pure, for tests).
pub fn report(
    rules: &Rules,
    reading: Result<Reading, crate::health::values::reading::ReadError>,
) -> (i32, String) {
    let mut tracker = Tracker::without_boot();
    let reading = match reading {
        Ok(r) => r,
        Err(e) => return (UNKNOWN, format!("GPU health unknown: NVML cannot report it: {e}\n")),
    };
    tracker.nvml(Ok(reading.gpus.len()));
    for f in rules.faults(&reading, None) {
        let uuid =
            f.gpu.and_then(|i| reading.gpus.iter().find(|g| g.index == i)).and_then(|g| g.uuid.as_deref());
        tracker.record(&f, uuid, |_| 0);
    }
    let faulty = tracker.faulty_gpus();
    let mut out = String::new();
    let verdict = tracker.verdict();
    if verdict.status == crate::health::values::verdict::Status::False {
        let message = verdict
            .message
            .rsplit_once(crate::health::values::old_message::BOOT_MARK)
            .map_or(verdict.message.as_str(), |(m, _)| m);
        out.push_str(&format!("{}: {message}\n", verdict.reason));
    } else {
        out.push_str(&format!("{}: {}\n", verdict.reason, verdict.message));
    }
    for g in &reading.gpus {
        let state = if faulty.contains(&g.index) { "fault" } else { "healthy" };
        out.push_str(&format!(
            "GPU {} {}: {state}\n",
            g.index,
            g.uuid.as_deref().unwrap_or("(UUID unknown)")
        ));
    }
    let code = if verdict.status == crate::health::values::verdict::Status::False { NONOK } else { OK };
    (code, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::values::reading::{GpuReading, Remapped};

    #[test]
    fn exit_codes_follow_the_npd_plugin_protocol() {
        let gpu = |i: u32| GpuReading { index: i, uuid: Some(format!("GPU-{i}")), ..GpuReading::default() };
        let rules = Rules::default();
        let healthy = Reading { gpus: vec![gpu(0), gpu(1)], pci_gpus: Some(2) };
        assert_eq!(
            report(&rules, Ok(healthy.clone())),
            (OK, "GpusHealthy: 2 GPUs healthy\nGPU 0 GPU-0: healthy\nGPU 1 GPU-1: healthy\n".into())
        );
        let mut bad = healthy;
        bad.gpus[1].remapped = Some(Remapped { failure: true, ..Remapped::default() });
        let (code, out) = report(&rules, Ok(bad));
        assert_eq!(code, NONOK);
        assert_eq!(
            out,
            "RemappedRowsFailure: GPU 1 (GPU-1): RemappedRowsFailure, row remapping failed, action: replace the GPU\n\
             GPU 0 GPU-0: healthy\nGPU 1 GPU-1: fault\n"
        );
        let no_driver = crate::probe::ProbeError::no_driver("the driver is not loaded");
        let (code, out) = report(&rules, Err(no_driver.into()));
        assert_eq!(code, UNKNOWN);
        assert!(out.contains("the driver is not loaded"), "{out}");
    }
}
