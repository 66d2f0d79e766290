//! What NVML reported of the node's GPUs: each pass's reading and the events that come between
//! passes, as plain values the rules judge ([`crate::health::judging::rules`]) and the signals watch
//! ([`crate::health::judging::signals`]).

/// Why NVML could not report the node's health at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// NVML could not be initialised (no driver, or it would not start).
    #[error(transparent)]
    Session(#[from] crate::probe::ProbeError),
    /// An NVML call every reading needs failed.
    #[error("{function}: {source}")]
    Call {
        /// The NVML function.
        function: &'static str,
        /// NVML's answer.
        source: nvml_wrapper::error::NvmlError,
    },
    /// The thread that reads NVML gave no answer.
    #[error("the health reading failed: {0}")]
    Worker(#[from] crate::worker::WorkerError),
}

/// One GPU's health values as NVML reported them this pass; `None` where it could not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuReading {
    /// NVML index.
    pub index: u32,
    /// UUID, when known.
    pub uuid: Option<String>,
    /// NVML answered `GPU_IS_LOST`.
    pub lost: bool,
    /// Volatile uncorrected ECC errors.
    pub uncorrected_volatile: Option<u64>,
    /// Volatile corrected ECC errors (a metric, never a fault).
    pub corrected_volatile: Option<u64>,
    /// Rows remapped for correctable / uncorrectable errors, and pending / failure.
    pub remapped: Option<Remapped>,
    /// Retired pages pending.
    pub retired_pages_pending: Option<bool>,
    /// Each NVLink link's state (true: active), in link order.
    pub nvlink_active: Option<Vec<bool>>,
    /// The driver's recovery action (field 230; 0 is none), where the driver answers it.
    pub recovery_action: Option<u64>,
    /// `nvmlDeviceValidateInforom` answered `CORRUPTED_INFOROM`.
    pub inforom_corrupted: bool,
    /// PCIe replays since the driver loaded (field 94), where the GPU answers it.
    pub pcie_replays: Option<u64>,
    /// Why the clocks are held down now: nvml.h's clock event reason bits.
    pub clock_events: Option<u64>,
}

/// `nvmlDeviceGetRemappedRows`, or fields 142-145.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remapped {
    /// Rows remapped for correctable errors.
    pub correctable: u64,
    /// Rows remapped for uncorrectable errors.
    pub uncorrectable: u64,
    /// A remapping waits for a reset.
    pub pending: bool,
    /// Remapping failed.
    pub failure: bool,
}

/// The whole node this pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Every GPU NVML enumerates.
    pub gpus: Vec<GpuReading>,
    /// NVIDIA GPUs on the PCI bus, when sysfs could say.
    pub pci_gpus: Option<u32>,
}

/// Something NVML reported as it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An Xid critical error (MIG: with the instance ids).
    Xid {
        /// GPU index.
        index: u32,
        /// The Xid.
        xid: u64,
        /// GPU-instance and compute-instance id.
        mig: Option<(u32, u32)>,
    },
    /// A double-bit ECC error.
    DoubleBitEcc {
        /// GPU index.
        index: u32,
    },
    /// The GPU became unavailable.
    Lost {
        /// GPU index.
        index: u32,
    },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Xid { index, xid, mig: None } => write!(f, "Xid {xid} on GPU {index}"),
            Event::Xid { index, xid, mig: Some((gi, ci)) } => {
                write!(f, "Xid {xid} on GPU {index} (MIG GPU instance {gi}, compute instance {ci})")
            }
            Event::DoubleBitEcc { index } => write!(f, "double-bit ECC error on GPU {index}"),
            Event::Lost { index } => write!(f, "GPU {index} became unavailable"),
        }
    }
}

/// Whether GPU `index`'s driver answered its recovery action in the reading `last`.
pub fn driver_answers(last: Option<&Reading>, index: u32) -> bool {
    last.and_then(|r| r.gpus.iter().find(|g| g.index == index)).is_some_and(|g| g.recovery_action.is_some())
}

/// Whether a GPU's reading has a value for one signal.
type Answered = fn(&GpuReading) -> bool;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::reading";

impl Reading {
    /// The signals no GPU of this reading answered: what health cannot read on this node (an
    /// integrated GPU answers little of it; a GPU without ECC memory has no ECC counts).
    pub fn unreadable(&self) -> Vec<&'static str> {
        if self.gpus.is_empty() {
            return Vec::new();
        }
        let none = |f: Answered| self.gpus.iter().all(|g| !f(g));
        let signals: [(&'static str, Answered); 7] = [
            ("ECC error counts", |g| g.uncorrected_volatile.is_some()),
            ("row remapping", |g| g.remapped.is_some()),
            ("retired pages", |g| g.retired_pages_pending.is_some()),
            ("NVLink states", |g| g.nvlink_active.is_some()),
            ("the driver's recovery action", |g| g.recovery_action.is_some()),
            ("PCIe replays", |g| g.pcie_replays.is_some()),
            ("clock event reasons", |g| g.clock_events.is_some()),
        ];
        signals.into_iter().filter(|(_, answered)| none(*answered)).map(|(name, _)| name).collect()
    }
}

/// Says once, at the first reading with GPUs, which signals health cannot read on this node.
#[derive(Debug, Default)]
pub struct Unreadable {
    said: bool,
}

impl Unreadable {
    /// Logs the signals `reading` has none of, the first time a reading has GPUs; returns the
    /// line when it logged one.
    pub fn note(&mut self, reading: &Reading) -> Option<String> {
        if self.said || reading.gpus.is_empty() {
            return None;
        }
        self.said = true;
        let missing = reading.unreadable();
        if missing.is_empty() {
            return None;
        }
        let line = format!(
            "GPU health cannot read {} on this node (NVML does not answer them for its GPUs); every other signal is watched",
            missing.join(", ")
        );
        tracing::info!(target: LOG, "{line}");
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_no_gpu_answers_is_said_once() {
        let answered = GpuReading {
            uncorrected_volatile: Some(0),
            remapped: Some(Remapped::default()),
            retired_pages_pending: Some(false),
            nvlink_active: Some(vec![]),
            recovery_action: Some(0),
            pcie_replays: Some(0),
            clock_events: Some(0),
            ..GpuReading::default()
        };
        let full = Reading { gpus: vec![answered.clone()], pci_gpus: None };
        assert!(full.unreadable().is_empty());
        // One GPU answering is enough: the signal is watched.
        let integrated = GpuReading { clock_events: Some(0), ..GpuReading::default() };
        let mixed = Reading { gpus: vec![integrated.clone(), answered], pci_gpus: None };
        assert!(mixed.unreadable().is_empty());
        let orin = Reading { gpus: vec![integrated], pci_gpus: None };
        assert_eq!(
            orin.unreadable(),
            [
                "ECC error counts",
                "row remapping",
                "retired pages",
                "NVLink states",
                "the driver's recovery action",
                "PCIe replays"
            ]
        );
        let mut once = Unreadable::default();
        assert_eq!(once.note(&Reading::default()), None, "no GPUs yet: nothing to say");
        assert!(once
            .note(&orin)
            .unwrap()
            .starts_with("GPU health cannot read ECC error counts, row remapping"));
        assert_eq!(once.note(&orin), None, "said once");
    }

    #[test]
    fn events_read_as_text() {
        let xid = Event::Xid { index: 0, xid: 79, mig: None };
        assert_eq!(xid.to_string(), "Xid 79 on GPU 0");
        let mig = Event::Xid { index: 1, xid: 94, mig: Some((2, 0)) };
        assert_eq!(mig.to_string(), "Xid 94 on GPU 1 (MIG GPU instance 2, compute instance 0)");
        assert_eq!(Event::DoubleBitEcc { index: 3 }.to_string(), "double-bit ECC error on GPU 3");
        assert_eq!(Event::Lost { index: 2 }.to_string(), "GPU 2 became unavailable");
    }
}
