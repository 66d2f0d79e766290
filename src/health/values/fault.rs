//! What a fault is, as both sides name it: one GPU's (or the node's) fault, what to do about
//! it, and the threshold a repeating Xid reached. Plain values that serialize as the Node's
//! fault record stores them; what counts as a fault is the judge's ([`crate::health::judging`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// One fault of one GPU. Serialized with its condition reason as `kind` and its values beside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Fault {
    /// NVML answers `GPU_IS_LOST` for the GPU, or sent a GPU-unavailable event.
    #[serde(rename = "GpuLost")]
    Lost,
    /// Fewer GPUs through NVML than NVIDIA GPUs on the PCI bus.
    #[serde(rename = "GpuMissing")]
    Missing {
        /// GPUs NVML enumerates.
        nvml: u32,
        /// NVIDIA display-class devices on the PCI bus.
        pci: u32,
    },
    /// Fewer GPUs through NVML than the node should have (`--health-expected-gpus`, or the
    /// node's `nvidia.com/gpu.expected-count` label).
    #[serde(rename = "GpuCountBelowExpected")]
    BelowExpected {
        /// GPUs NVML enumerates.
        nvml: u32,
        /// GPUs the node should have.
        expected: u32,
    },
    /// The GPU ran out of spare rows: remapping failed.
    RemappedRowsFailure,
    /// A double-bit ECC error event.
    #[serde(rename = "DoubleBitEccError")]
    DoubleBitEcc,
    /// The volatile uncorrected ECC count is above zero.
    #[serde(rename = "UncorrectedEccErrors")]
    UncorrectedEcc {
        /// The count.
        count: u64,
    },
    /// A critical Xid event, on the GPU or on one of its MIG devices.
    #[serde(rename = "XidCriticalError")]
    Xid {
        /// The Xid number.
        xid: u64,
        /// GPU-instance and compute-instance id of the MIG device it came from.
        #[serde(default, skip_serializing_if = "Option::is_none", with = "mig_device")]
        mig: Option<(u32, u32)>,
        /// What the catalog (or the operator) says to do; a record from before the catalog has
        /// none and is read with the old rule. Its own key: the recorded fault's `action` is
        /// beside it in the record.
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "xidAction")]
        action: Option<Action>,
        /// The threshold it reached (`--health-xid-thresholds`), where only its repeats made it
        /// a fault. An nvlabel without thresholds reads the fault as the Xid alone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repeated: Option<Threshold>,
    },
    /// The driver says the GPU needs a recovery action (NVML field 230).
    #[serde(rename = "GpuRecoveryActionRequired")]
    Recovery {
        /// The driver's action (its own key, as the Xid's).
        #[serde(rename = "driverAction")]
        action: Action,
        /// The Xid after which the driver was asked and first said so, where one was (a pass's
        /// reading alone knows of none). An nvlabel without the key reads the fault without it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        xid: Option<u64>,
    },
    /// The GPU's InfoROM (its configuration and error-record store) fails its checksum.
    #[serde(rename = "InforomCorrupted")]
    Inforom,
    /// A row remapping waits for a GPU reset.
    RemappedRowsPending,
    /// Retired pages wait for a GPU reset or reboot.
    RetiredPagesPending,
    /// An NVLink link that was active is not any more.
    NvlinkInactive {
        /// The link number.
        link: u32,
    },
}

/// A MIG device's ids as the record names them (a pair would be a bare array there).
mod mig_device {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Mig {
        gpu_instance: u32,
        compute_instance: u32,
    }

    pub fn serialize<S: Serializer>(mig: &Option<(u32, u32)>, s: S) -> Result<S::Ok, S::Error> {
        mig.map(|(gpu_instance, compute_instance)| Mig { gpu_instance, compute_instance }).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(u32, u32)>, D::Error> {
        Ok(Option::<Mig>::deserialize(d)?.map(|m| (m.gpu_instance, m.compute_instance)))
    }
}

impl Fault {
    /// The CamelCase condition reason (the record's `kind` too).
    pub fn reason(&self) -> &'static str {
        match self {
            Fault::Lost => "GpuLost",
            Fault::Missing { .. } => "GpuMissing",
            Fault::BelowExpected { .. } => "GpuCountBelowExpected",
            Fault::Recovery { .. } => "GpuRecoveryActionRequired",
            Fault::Inforom => "InforomCorrupted",
            Fault::RemappedRowsFailure => "RemappedRowsFailure",
            Fault::DoubleBitEcc => "DoubleBitEccError",
            Fault::UncorrectedEcc { .. } => "UncorrectedEccErrors",
            Fault::Xid { .. } => "XidCriticalError",
            Fault::RemappedRowsPending => "RemappedRowsPending",
            Fault::RetiredPagesPending => "RetiredPagesPending",
            Fault::NvlinkInactive { .. } => "NvlinkInactive",
        }
    }

    /// How bad it is when faults are combined: lower is worse (the worst names the condition's
    /// reason).
    pub fn rank(&self) -> usize {
        match self {
            Fault::Lost => 0,
            Fault::Missing { .. } => 1,
            Fault::BelowExpected { .. } => 2,
            Fault::Recovery { .. } => 3,
            Fault::Inforom => 4,
            Fault::RemappedRowsFailure => 5,
            Fault::DoubleBitEcc => 6,
            Fault::UncorrectedEcc { .. } => 7,
            Fault::Xid { .. } => 8,
            Fault::RemappedRowsPending => 9,
            Fault::RetiredPagesPending => 10,
            Fault::NvlinkInactive { .. } => 11,
        }
    }

    /// The recommended action.
    pub fn action(&self) -> Action {
        match self {
            Fault::Lost | Fault::Missing { .. } | Fault::BelowExpected { .. } => Action::Reboot,
            // The store of the GPU's settings and error records is damaged: NVIDIA replaces
            // (or reflashes) it; nothing on the node repairs it.
            Fault::RemappedRowsFailure | Fault::Inforom => Action::Replace,
            Fault::Recovery { action, .. } | Fault::Xid { action: Some(action), .. } => *action,
            // A record from before the catalog: the rule of its time (the device plugin's
            // application Xids were only faults by the operator's choice).
            Fault::Xid { xid: 13 | 31 | 43 | 45 | 68 | 109, .. } => Action::CheckWorkload,
            // 79: fallen off the bus; 95: uncontained ECC error; 119/120: GSP firmware stuck.
            Fault::Xid { xid: 79 | 95 | 119 | 120, .. } => Action::Reboot,
            Fault::Xid { .. }
            | Fault::DoubleBitEcc
            | Fault::UncorrectedEcc { .. }
            | Fault::RemappedRowsPending
            | Fault::RetiredPagesPending
            | Fault::NvlinkInactive { .. } => Action::ResetGpu,
        }
    }

    /// What happened, with its value, as the message says it.
    pub fn describe(&self) -> String {
        match self {
            Fault::Lost => "GPU is lost".into(),
            Fault::Missing { nvml, pci } => {
                format!("NVML sees {nvml} GPUs, the PCI bus has {pci}")
            }
            Fault::BelowExpected { nvml, expected } => {
                format!("NVML sees {nvml} GPUs, the node should have {expected}")
            }
            Fault::RemappedRowsFailure => "row remapping failed".into(),
            Fault::DoubleBitEcc => "double-bit ECC error".into(),
            Fault::UncorrectedEcc { count } => format!("{count} uncorrected ECC errors since reset"),
            Fault::Xid { xid, repeated: Some(t), .. } => format!("Xid {xid} {t}"),
            Fault::Xid { xid, mig: None, .. } => format!("Xid {xid}"),
            Fault::Xid { xid, mig: Some((gi, ci)), .. } => {
                format!("Xid {xid} on MIG device GI {gi} CI {ci}")
            }
            Fault::Recovery { xid: None, .. } => "the driver asks for a recovery action".into(),
            Fault::Recovery { xid: Some(xid), .. } => {
                format!("the driver asks for a recovery action after Xid {xid}")
            }
            Fault::Inforom => "the InfoROM is corrupted".into(),
            Fault::RemappedRowsPending => "row remapping pending".into(),
            Fault::RetiredPagesPending => "page retirement pending".into(),
            Fault::NvlinkInactive { link } => format!("NVLink {link} went inactive"),
        }
    }
}

/// A fault found: of a GPU, or of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The GPU's index; `None` for the node's own (GPUs missing or fewer than expected).
    pub gpu: Option<u32>,
    /// The fault.
    pub fault: Fault,
}

/// What to do about a fault, least drastic first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Action {
    /// Drain the GPU's work and look at what ran there: the fault is one only because the operator
    /// chose so (an Xid the catalog calls an application's, made fatal by `--health-fatal-xids`),
    /// which says nothing about the hardware, so nothing more drastic is recommended.
    CheckWorkload,
    /// Nobody can say: an Xid the catalog does not know, or one it sends to support or to a
    /// workflow; drain the GPU's work and look at the driver's logs.
    Investigate,
    /// The driver asks for peer-to-peer traffic to the GPU to be drained.
    DrainP2p,
    /// Drain the GPU's work and reset it (`nvidia-smi -r`), or reboot.
    ResetGpu,
    /// The driver asks for peer-to-peer traffic to be drained and the GPU reset.
    DrainAndReset,
    /// The driver asks for the GPU's IMEX domain (multi-node NVLink) to be recovered.
    RecoverImexDomain,
    /// Drain and reboot the node.
    #[serde(rename = "RebootNode")]
    Reboot,
    /// Drain the node and have the GPU replaced.
    #[serde(rename = "ReplaceGpu")]
    Replace,
}

impl Action {
    /// The recommendation as the condition message says it.
    pub fn text(self) -> &'static str {
        match self {
            Action::CheckWorkload => "check the workload on this GPU",
            Action::Investigate => "investigate (drain the GPU, read the driver's log)",
            Action::DrainP2p => "drain peer-to-peer work from the GPU",
            Action::ResetGpu => "reset the GPU",
            Action::DrainAndReset => "drain peer-to-peer work and reset the GPU",
            Action::RecoverImexDomain => "recover the GPU's IMEX domain",
            Action::Reboot => "reboot the node",
            Action::Replace => "replace the GPU",
        }
    }

    /// What a fault that keeps coming back asks for: one step up from what it asked before (a
    /// GPU that keeps needing resets needs replacing).
    pub fn escalate(self) -> Action {
        match self {
            Action::CheckWorkload => Action::Investigate,
            Action::Investigate | Action::DrainP2p => Action::ResetGpu,
            Action::ResetGpu | Action::DrainAndReset | Action::RecoverImexDomain => Action::Replace,
            Action::Reboot | Action::Replace => Action::Replace,
        }
    }

    /// The driver's recovery action (`nvmlDeviceGpuRecoveryAction_t`), `None` for "none".
    /// Values a newer driver adds are a fault nobody here can name: investigate.
    pub fn from_driver(value: u64) -> Option<Action> {
        match value {
            0 => None,
            1 | 6 => Some(Action::ResetGpu), // 6: reset the GPU's PCIe bus
            2 | 7 => Some(Action::Reboot),   // 7: reboot the system
            3 => Some(Action::DrainP2p),
            4 => Some(Action::DrainAndReset),
            5 => Some(Action::RecoverImexDomain),
            _ => Some(Action::Investigate),
        }
    }
}

/// COUNT times on one GPU within WINDOW.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Threshold {
    /// How many times (at least 2: once is `--health-fatal-xids`).
    pub count: u32,
    /// Within how long, spelled in the record as a Go duration (`1m`, `1m30s`).
    #[serde(with = "go_text")]
    pub window: Duration,
}

/// The thresholds by Xid.
pub type Thresholds = BTreeMap<u64, Threshold>;

impl std::fmt::Display for Threshold {
    /// As the condition's message says it: `3 times in 1m`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} times in {}", self.count, duration_text(self.window))
    }
}

/// A duration as nvlabel's flags spell it (Go's units, no zero parts): `1h`, `1m30s`, `1.5s`,
/// `500ms`. [`crate::duration::parse_go_duration`] reads it back exactly.
pub fn duration_text(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s, nanos) = (secs / 3600, secs / 60 % 60, secs % 60, d.subsec_nanos());
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    match (s, nanos) {
        (0, 0) if !out.is_empty() => {}
        (0, n) if n % 1_000_000 == 0 && n > 0 && out.is_empty() => {
            out.push_str(&format!("{}ms", n / 1_000_000))
        }
        (s, 0) => out.push_str(&format!("{s}s")),
        (s, n) => out.push_str(&format!("{s}.{}s", format!("{n:09}").trim_end_matches('0'))),
    }
    out
}

/// The window's serde form: its [`duration_text`].
mod go_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::duration_text(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        crate::duration::parse_go_duration(&text).map_err(serde::de::Error::custom)
    }
}
