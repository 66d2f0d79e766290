//! The daemon's Prometheus metrics and readiness, every series present from the start. A device
//! source's failures are counted in `nvlabel_nvml_errors_total` by function, with a `source`
//! label where the source is not NVML (so NVML's series are as they always were).

use crate::http::Liveness;
use crate::probe::Source;
use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A publish failure, by writer and reason.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PublishFailure {
    /// The writer.
    pub writer: String,
    /// Why (`conflict`, `throttled`, `server`, `connection`, `file`, ...).
    pub reason: String,
}

/// A resource of the sharing cross-check.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Resource {
    /// The resource name (`nvidia.com/gpu`).
    pub resource: String,
}

/// What a session has cost so far: driver opens and PCI config-space reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCosts {
    /// Times NVML was opened.
    pub opens: u64,
    /// Config-space reads.
    pub config_reads: u64,
}

/// A device source's function (or file) that failed.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct DriverFunction {
    /// The function (or `nvmlInit`).
    pub function: String,
    /// The source it belongs to: a `source` label, left out for NVML.
    pub source: Source,
}

impl EncodeLabelSet for DriverFunction {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        ("function", self.function.as_str()).encode(encoder.encode_label())?;
        if self.source != Source::Nvml {
            ("source", self.source.as_str()).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// The daemon's metrics and its liveness and readiness (what /healthz and /readyz answer).
#[derive(Debug)]
pub struct Metrics {
    /// Labelling passes.
    pub passes: Counter,
    /// Time a pass takes (probe and labels).
    pub pass_duration: Histogram,
    /// Publishes that failed.
    pub publish_failures: Family<PublishFailure, Counter>,
    /// Device-source calls that failed, by function (and source, where not NVML).
    pub driver_errors: Family<DriverFunction, Counter>,
    /// Config reloads rejected (invalid file, missing key).
    pub config_reload_failures: Counter,
    /// Labels in the last successful publish.
    pub labels_published: Gauge,
    /// Unix time of the last successful publish.
    pub last_success: Gauge<f64, AtomicU64>,
    /// 1 while MPS is configured on a node with MIG enabled (no sharing is labelled).
    pub mps_on_mig: Gauge,
    /// Published labels put back after someone else removed or changed them.
    pub drift_repairs: Counter,
    /// Times another writer kept changing our labels back, so repairs were slowed down.
    pub drift_fights: Counter,
    /// 1 per resource while what the labels promise and the Node's allocatable disagree.
    pub sharing_mismatch: Family<Resource, Gauge>,
    /// Times NVML was initialised (once per process while the driver and the GPUs stay).
    pub nvml_inits: Counter,
    /// Reads of PCI config space (once per NVIDIA PCI function while the bus stays).
    pub pci_config_reads: Counter,
    /// Readiness.
    pub liveness: Arc<Liveness>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            passes: Counter::default(),
            pass_duration: Histogram::new([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0]),
            publish_failures: Family::default(),
            driver_errors: Family::default(),
            config_reload_failures: Counter::default(),
            labels_published: Gauge::default(),
            last_success: Gauge::default(),
            mps_on_mig: Gauge::default(),
            sharing_mismatch: Family::default(),
            drift_repairs: Counter::default(),
            drift_fights: Counter::default(),
            nvml_inits: Counter::default(),
            pci_config_reads: Counter::default(),
            liveness: Arc::new(Liveness::default()),
        }
    }
}

impl Metrics {
    /// Registers the metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register("nvlabel_passes", "Labelling passes", self.passes.clone());
        registry.register(
            "nvlabel_pass_duration_seconds",
            "Time to probe and compute labels",
            self.pass_duration.clone(),
        );
        registry.register(
            "nvlabel_publish_failures",
            "Publishes that failed, by writer and reason",
            self.publish_failures.clone(),
        );
        registry.register(
            "nvlabel_nvml_errors",
            "Device-source calls that failed, by function (and source, where not NVML)",
            self.driver_errors.clone(),
        );
        registry.register(
            "nvlabel_config_reload_failures",
            "Configuration reloads rejected; the last good configuration stayed in use",
            self.config_reload_failures.clone(),
        );
        registry.register(
            "nvlabel_labels_published",
            "Labels in the last successful publish",
            self.labels_published.clone(),
        );
        registry.register(
            "nvlabel_last_success_timestamp_seconds",
            "Unix time of the last successful publish",
            self.last_success.clone(),
        );
        registry.register(
            "nvlabel_mps_on_mig",
            "1 while MPS is configured on a node with MIG enabled: the device plugin cannot share such GPUs, so no sharing is labelled",
            self.mps_on_mig.clone(),
        );
        registry.register(
            "nvlabel_drift_repairs",
            "Published labels put back after someone else removed or changed them",
            self.drift_repairs.clone(),
        );
        registry.register(
            "nvlabel_drift_fights",
            "Times another writer kept changing nvlabel's labels back, so repairs were slowed to one a minute",
            self.drift_fights.clone(),
        );
        registry.register(
            "nvlabel_sharing_mismatch",
            "1 while the sharing labels promise (count x replicas) differs from the Node's allocatable for a resource, after a grace period",
            self.sharing_mismatch.clone(),
        );
        registry.register(
            "nvlabel_nvml_inits",
            "Times NVML was initialised: once, and again only when the driver or the NVIDIA GPUs on the PCI bus change",
            self.nvml_inits.clone(),
        );
        registry.register(
            "nvlabel_pci_config_reads",
            "Reads of NVIDIA PCI functions' config space (the vGPU scan): again only when those functions change",
            self.pci_config_reads.clone(),
        );
    }

    /// Adds what `session` cost since `before` (its opens and config reads) to the counters;
    /// returns the new totals.
    pub fn count_session(&self, session: &crate::probe::Session, before: SessionCosts) -> SessionCosts {
        let now = SessionCosts { opens: session.opens(), config_reads: session.config_reads() };
        self.nvml_inits.inc_by(now.opens.saturating_sub(before.opens));
        self.pci_config_reads.inc_by(now.config_reads.saturating_sub(before.config_reads));
        now
    }

    /// Creates every labelled series a fresh process can know of at zero, so that alerts see 0
    /// rather than no data: failures of `writer` for each reason, and errors of every NVML
    /// function the probe calls.
    pub fn zero(&self, target: &crate::publish::Target) {
        let writer = target.writer_name();
        for reason in target.failure_reasons() {
            let _ = self
                .publish_failures
                .get_or_create(&PublishFailure { writer: writer.into(), reason: reason.as_str().into() });
        }
        let _ = self.sharing_mismatch.get_or_create(&Resource { resource: "nvidia.com/gpu".into() });
        for function in crate::probe::NVML_FUNCTIONS {
            let _ = self
                .driver_errors
                .get_or_create(&DriverFunction { function: (*function).into(), source: Source::Nvml });
        }
    }

    /// Counts a failed call (or file) `function` of the device `source`.
    pub fn source_failed(&self, source: Source, function: &str) {
        self.driver_errors.get_or_create(&DriverFunction { function: function.into(), source }).inc();
    }

    /// Counts a failed publish of `writer` and marks the labeler not ready.
    pub fn publish_failed(&self, writer: &str, reason: crate::publish::FailureReason) {
        self.publish_failures
            .get_or_create(&PublishFailure { writer: writer.into(), reason: reason.as_str().into() })
            .inc();
        self.liveness.record(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVML's series keep the one label they always had; the other sources' say which they are.
    #[test]
    fn each_source_is_counted_under_its_own_name() {
        let metrics = Metrics::default();
        metrics.source_failed(Source::Nvml, "nvmlInit");
        metrics.source_failed(Source::Cuda, "cuInit");
        metrics.source_failed(Source::Vfio, "pci.ids");
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "nvlabel_nvml_errors_total{function=\"nvmlInit\"} 1\n",
            "nvlabel_nvml_errors_total{function=\"cuInit\",source=\"cuda\"} 1\n",
            "nvlabel_nvml_errors_total{function=\"pci.ids\",source=\"vfio\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
