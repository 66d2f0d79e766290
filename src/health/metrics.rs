//! Per-GPU health metrics. Where dcgm-exporter has the metric, the name and the `gpu` / `UUID`
//! labels are its own, so dashboards and alerts written for it work on nvlabel's too:
//! `DCGM_FI_DEV_XID_ERRORS` (the last Xid), `DCGM_FI_DEV_ECC_SBE_VOL_TOTAL`,
//! `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, `DCGM_FI_DEV_RETIRED_PENDING`,
//! `DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS`, `DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`,
//! `DCGM_FI_DEV_ROW_REMAP_PENDING`, `DCGM_FI_DEV_ROW_REMAP_FAILURE`,
//! `DCGM_FI_DEV_PCIE_REPLAY_COUNTER`, `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`. dcgm-exporter has no
//! health flag, per-Xid count, warning episode or hung-call gauge: `nvlabel_gpu_healthy`,
//! `nvlabel_gpu_health_readings`, `nvlabel_gpu_device_taints`,
//! `nvlabel_gpu_device_taint_failures`,
//! `nvlabel_gpu_xid_errors_total`, `nvlabel_gpu_warning_episodes_total`,
//! `nvlabel_gpu_fault_recoveries_total`, `nvlabel_gpu_fault_recurrences_total`,
//! `nvlabel_gpu_health_condition_overwrites_total` and `nvlabel_nvml_call_stalled` are ours.

use crate::health::values::reading::GpuReading;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// dcgm-exporter's GPU labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct GpuLabels {
    /// NVML index.
    pub gpu: String,
    /// GPU UUID (dcgm-exporter's label name).
    pub UUID: String,
}

/// The GPU labels plus the Xid.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct XidLabels {
    /// NVML index.
    pub gpu: String,
    /// GPU UUID.
    pub UUID: String,
    /// The Xid number.
    pub xid: String,
}

/// The GPU labels plus the reason of a warning or a fault.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct WarningLabels {
    /// NVML index.
    pub gpu: String,
    /// GPU UUID.
    pub UUID: String,
    /// The Event's reason (`GpuThermalSlowdown`, ...).
    pub reason: String,
}

/// Who wrote over the health condition.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriterLabels {
    /// The other writer's field manager(s).
    pub manager: String,
}

/// The health metrics.
#[derive(Debug, Default)]
pub struct HealthMetrics {
    /// 1 healthy, 0 a fault is recorded.
    pub healthy: Family<GpuLabels, Gauge>,
    /// Health readings of NVML that came back (a reading stuck in the driver does not count).
    pub readings: Counter,
    /// Xid events by Xid (ignored ones too: they are still worth seeing).
    pub xid_errors: Family<XidLabels, Counter>,
    /// The last Xid.
    pub last_xid: Family<GpuLabels, Gauge>,
    /// Volatile corrected ECC errors.
    pub sbe_volatile: Family<GpuLabels, Gauge>,
    /// Volatile uncorrected ECC errors.
    pub dbe_volatile: Family<GpuLabels, Gauge>,
    /// Retired pages pending (0/1).
    pub retired_pending: Family<GpuLabels, Gauge>,
    /// Rows remapped for correctable errors.
    pub remapped_correctable: Family<GpuLabels, Gauge>,
    /// Rows remapped for uncorrectable errors.
    pub remapped_uncorrectable: Family<GpuLabels, Gauge>,
    /// Row remapping pending (0/1).
    pub remap_pending: Family<GpuLabels, Gauge>,
    /// Row remapping failed (0/1).
    pub remap_failure: Family<GpuLabels, Gauge>,
    /// PCIe replays since the driver loaded.
    pub pcie_replays: Family<GpuLabels, Gauge>,
    /// Clock event reasons now (nvml.h's bits).
    pub clock_events: Family<GpuLabels, Gauge>,
    /// Warning episodes (slowdowns, PCIe replays) that began, by reason.
    pub warning_episodes: Family<WarningLabels, Counter>,
    /// Faults cleared in place on evidence, by the fault's reason.
    pub recoveries: Family<WarningLabels, Counter>,
    /// Faults that came back within the hour after clearing in place, by the fault's reason.
    pub recurrences: Family<WarningLabels, Counter>,
    /// 1 while an NVML call has run longer than `--health-nvml-timeout`.
    pub nvml_stalled: Gauge,
    /// This node's DeviceTaintRules in force (DRA nodes).
    pub device_taints: Gauge,
    /// Failed attempts to bring the DeviceTaintRules in line.
    pub device_taint_failures: Counter,
    /// Another writer's changes of the health condition that nvlabel wrote back, by writer.
    pub condition_overwrites: Family<WriterLabels, Counter>,
}

impl HealthMetrics {
    /// Registers the metrics into the daemon's registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "nvlabel_gpu_health_readings",
            "Health readings of NVML that came back (one per pass interval; stalls while a driver call hangs)",
            self.readings.clone(),
        );
        let gauges: [(&str, &str, &Family<GpuLabels, Gauge>); 11] = [
            ("nvlabel_gpu_healthy", "1 while the GPU has no recorded fault this boot, else 0", &self.healthy),
            ("DCGM_FI_DEV_XID_ERRORS", "The last Xid error of the GPU", &self.last_xid),
            (
                "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                "Volatile single-bit (corrected) ECC errors",
                &self.sbe_volatile,
            ),
            (
                "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                "Volatile double-bit (uncorrected) ECC errors",
                &self.dbe_volatile,
            ),
            ("DCGM_FI_DEV_RETIRED_PENDING", "1 while retired pages wait for a reset", &self.retired_pending),
            (
                "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                "Rows remapped for correctable errors",
                &self.remapped_correctable,
            ),
            (
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                "Rows remapped for uncorrectable errors",
                &self.remapped_uncorrectable,
            ),
            (
                "DCGM_FI_DEV_ROW_REMAP_PENDING",
                "1 while a row remapping waits for a reset",
                &self.remap_pending,
            ),
            ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "1 when row remapping failed", &self.remap_failure),
            ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "PCIe replays since the driver loaded", &self.pcie_replays),
            (
                "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
                "Why the clocks are held down now (nvml.h's clock event reason bits)",
                &self.clock_events,
            ),
        ];
        for (name, help, family) in gauges {
            registry.register(name, help, family.clone());
        }
        registry.register("nvlabel_gpu_xid_errors", "Xid errors by GPU and Xid", self.xid_errors.clone());
        registry.register(
            "nvlabel_gpu_warning_episodes",
            "Warning episodes (thermal or power-brake slowdown, PCIe replays) that began, by reason",
            self.warning_episodes.clone(),
        );
        registry.register(
            "nvlabel_nvml_call_stalled",
            "1 while an NVML call has run longer than --health-nvml-timeout",
            self.nvml_stalled.clone(),
        );
        registry.register(
            "nvlabel_gpu_fault_recoveries",
            "GPU faults cleared in place, without a reboot, on evidence that they ended (by reason)",
            self.recoveries.clone(),
        );
        registry.register(
            "nvlabel_gpu_fault_recurrences",
            "GPU faults that came back within the hour after clearing in place (by reason)",
            self.recurrences.clone(),
        );
        registry.register(
            "nvlabel_gpu_device_taints",
            "DeviceTaintRules nvlabel keeps on this node's faulty GPUs' DRA devices",
            self.device_taints.clone(),
        );
        registry.register(
            "nvlabel_gpu_device_taint_failures",
            "Failed attempts to write or remove this node's DeviceTaintRules",
            self.device_taint_failures.clone(),
        );
        registry.register(
            "nvlabel_gpu_health_condition_overwrites",
            "Changes of the GPU health condition by another writer (field manager) that nvlabel wrote its verdict back over",
            self.condition_overwrites.clone(),
        );
    }

    /// Records a pass's reading of one GPU.
    pub fn observe<'a>(&self, gpu: &GpuReading, uuid: impl Into<Option<&'a str>>) {
        let l = labels(gpu.index, uuid.into());
        let set = |f: &Family<GpuLabels, Gauge>, v: Option<u64>| {
            if let Some(v) = v {
                f.get_or_create(&l).set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        };
        set(&self.sbe_volatile, gpu.corrected_volatile);
        set(&self.dbe_volatile, gpu.uncorrected_volatile);
        set(&self.retired_pending, gpu.retired_pages_pending.map(u64::from));
        set(&self.remapped_correctable, gpu.remapped.map(|r| r.correctable));
        set(&self.remapped_uncorrectable, gpu.remapped.map(|r| r.uncorrectable));
        set(&self.remap_pending, gpu.remapped.map(|r| u64::from(r.pending)));
        set(&self.remap_failure, gpu.remapped.map(|r| u64::from(r.failure)));
        set(&self.pcie_replays, gpu.pcie_replays);
        set(&self.clock_events, gpu.clock_events);
    }

    /// Records a warning episode that began.
    pub fn warning<'a>(&self, index: u32, uuid: impl Into<Option<&'a str>>, reason: &str) {
        let l = labels(index, uuid.into());
        self.warning_episodes
            .get_or_create(&WarningLabels { gpu: l.gpu, UUID: l.UUID, reason: reason.into() })
            .inc();
    }

    /// Counts a fault of GPU `index` (none: the node's) cleared in place, or come back.
    pub fn fault_turn<'a>(
        &self,
        back: bool,
        index: Option<u32>,
        uuid: impl Into<Option<&'a str>>,
        reason: &str,
    ) {
        let gpu = index.map_or_else(String::new, |i| i.to_string());
        let l = WarningLabels { gpu, UUID: uuid.into().unwrap_or_default().into(), reason: reason.into() };
        let family = if back { &self.recurrences } else { &self.recoveries };
        family.get_or_create(&l).inc();
    }

    /// Records an Xid event.
    pub fn xid<'a>(&self, index: u32, uuid: impl Into<Option<&'a str>>, xid: u64) {
        let l = labels(index, uuid.into());
        self.last_xid.get_or_create(&l).set(i64::try_from(xid).unwrap_or(i64::MAX));
        let x = XidLabels { gpu: l.gpu, UUID: l.UUID, xid: xid.to_string() };
        self.xid_errors.get_or_create(&x).inc();
    }

    /// Records whether a GPU is healthy.
    pub fn healthy(&self, index: u32, uuid: &str, healthy: bool) {
        self.healthy.get_or_create(&labels(index, Some(uuid))).set(i64::from(healthy));
    }
}

/// A GPU's labels; a UUID not read (yet) is an empty `UUID` label, Prometheus' spelling of none.
fn labels(index: u32, uuid: Option<&str>) -> GpuLabels {
    GpuLabels { gpu: index.to_string(), UUID: uuid.unwrap_or_default().to_string() }
}
