//! The condition message as nvlabel wrote it before the fault record existed, when it was the
//! only record: read once after an upgrade from such a version (the next write adds the record).
//! Its form is frozen here, whatever the message says today:
//! `GPU 0 (GPU-a...): XidCriticalError, Xid 79, action: reboot the node; node: GpuMissing, NVML
//! sees 3 GPUs, the PCI bus has 4, action: reboot the node [boot 6f1e...]`.

use crate::health::values::fault::{Action, Fault};
use crate::health::values::record::RecordedFault;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::old_message";

/// Where the condition's message names the boot its faults belong to (`... [boot <id>]`): written
/// by `sticky.rs`, read here from messages of before the record, cut by `nvlabel health`.
pub const BOOT_MARK: &str = " [boot ";

/// The faults an old message recorded for boot `boot_id` (none for another boot, or a message
/// of another form). An entry that cannot be read is skipped with a warning naming it.
pub fn faults(boot_id: &str, message: &str) -> Vec<RecordedFault> {
    let Some((body, tail)) = message.rsplit_once(BOOT_MARK) else { return Vec::new() };
    if tail.strip_suffix(']') != Some(boot_id) {
        return Vec::new();
    }
    body.split("; ")
        .filter(|e| e.starts_with("GPU ") || e.starts_with("node: "))
        .filter_map(|text| {
            let entry = entry(text);
            if entry.is_none() {
                tracing::warn!(target: LOG,
                    entry = text,
                    "a GPU fault in the old condition message cannot be read; it is not kept"
                );
            }
            entry
        })
        .collect()
}

/// What an old message of a boot other than `boot_id` listed (`None` for this boot's, or a
/// message of another form).
pub fn earlier_boot(boot_id: &str, message: &str) -> Option<String> {
    let (body, tail) = message.rsplit_once(BOOT_MARK)?;
    (tail.strip_suffix(']').is_some_and(|b| b != boot_id)).then(|| body.to_string())
}

/// One entry: `<who>: <reason>, <value>, action: <action>`.
fn entry(text: &str) -> Option<RecordedFault> {
    let (who, rest) = text.split_once(": ")?;
    let (gpu, uuid) = match who {
        "node" => (None, None),
        gpu => {
            let gpu = gpu.strip_prefix("GPU ")?;
            match gpu.split_once(" (") {
                Some((index, uuid)) => (Some(index.parse().ok()?), Some(uuid.strip_suffix(')')?.to_string())),
                None => (Some(gpu.parse().ok()?), None),
            }
        }
    };
    let (reason, rest) = rest.split_once(", ").unwrap_or((rest, ""));
    let (value, action) =
        rest.rsplit_once(", action: ").or_else(|| Some(("", rest.strip_prefix("action: ")?)))?;
    let fault = fault(reason, value)?;
    let action = [Action::CheckWorkload, Action::ResetGpu, Action::Reboot, Action::Replace]
        .into_iter()
        .find(|a| a.text() == action)
        .unwrap_or_else(|| fault.action());
    Some(RecordedFault { gpu, uuid, fault, action, recurrences: None })
}

/// The fault of a reason and its value as the old message worded them.
fn fault(reason: &str, value: &str) -> Option<Fault> {
    Some(match reason {
        "GpuLost" => Fault::Lost,
        "GpuMissing" => {
            let (nvml, pci) = value.strip_prefix("NVML sees ")?.split_once(" GPUs, the PCI bus has ")?;
            Fault::Missing { nvml: number(nvml)?, pci: number(pci)? }
        }
        "RemappedRowsFailure" => Fault::RemappedRowsFailure,
        "DoubleBitEccError" => Fault::DoubleBitEcc,
        "UncorrectedEccErrors" => Fault::UncorrectedEcc {
            count: number(value.strip_suffix(" uncorrected ECC errors since reset")?)?,
        },
        "XidCriticalError" => {
            let value = value.strip_prefix("Xid ")?;
            match value.split_once(" on MIG device GI ") {
                Some((xid, mig)) => {
                    let (gi, ci) = mig.split_once(" CI ")?;
                    Fault::Xid {
                        xid: number(xid)?,
                        mig: Some((number(gi)?, number(ci)?)),
                        action: None,
                        repeated: None,
                    }
                }
                None => Fault::Xid { xid: number(value)?, mig: None, action: None, repeated: None },
            }
        }
        "RemappedRowsPending" => Fault::RemappedRowsPending,
        "RetiredPagesPending" => Fault::RetiredPagesPending,
        "NvlinkInactive" => Fault::NvlinkInactive {
            link: number(value.strip_prefix("NVLink ")?.strip_suffix(" went inactive")?)?,
        },
        _ => return None,
    })
}

fn number<T: std::str::FromStr>(text: &str) -> Option<T> {
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages exactly as nvlabel wrote them before the record (copied from its tests and a run).
    #[test]
    fn every_fault_of_the_old_form_is_read_back() {
        let message = "GPU 0 (GPU-a): RetiredPagesPending, page retirement pending, action: reset the GPU; \
             GPU 0: XidCriticalError, Xid 94 on MIG device GI 1 CI 0, action: reset the GPU; \
             GPU 1 (GPU-b): XidCriticalError, Xid 79, action: reboot the node; \
             GPU 2 (GPU-c): RemappedRowsFailure, row remapping failed, action: replace the GPU; \
             GPU 3 (GPU-d): UncorrectedEccErrors, 3 uncorrected ECC errors since reset, action: reset the GPU; \
             GPU 4 (GPU-e): NvlinkInactive, NVLink 2 went inactive, action: reset the GPU; \
             GPU 5 (GPU-f): GpuLost, GPU is lost, action: reboot the node; \
             GPU 6 (GPU-g): DoubleBitEccError, double-bit ECC error, action: reset the GPU; \
             GPU 7 (GPU-h): RemappedRowsPending, row remapping pending, action: reset the GPU; \
             node: GpuMissing, NVML sees 3 GPUs, the PCI bus has 4, action: reboot the node; \
             and 2 more faults [boot boot-a]";
        let got: Vec<(Option<u32>, Option<String>, Fault, Action)> =
            faults("boot-a", message).into_iter().map(|f| (f.gpu, f.uuid, f.fault, f.action)).collect();
        let u = |s: &str| Some(s.to_string());
        assert_eq!(
            got,
            vec![
                (Some(0), u("GPU-a"), Fault::RetiredPagesPending, Action::ResetGpu),
                (
                    Some(0),
                    None,
                    Fault::Xid { xid: 94, mig: Some((1, 0)), action: None, repeated: None },
                    Action::ResetGpu
                ),
                (
                    Some(1),
                    u("GPU-b"),
                    Fault::Xid { xid: 79, mig: None, action: None, repeated: None },
                    Action::Reboot
                ),
                (Some(2), u("GPU-c"), Fault::RemappedRowsFailure, Action::Replace),
                (Some(3), u("GPU-d"), Fault::UncorrectedEcc { count: 3 }, Action::ResetGpu),
                (Some(4), u("GPU-e"), Fault::NvlinkInactive { link: 2 }, Action::ResetGpu),
                (Some(5), u("GPU-f"), Fault::Lost, Action::Reboot),
                (Some(6), u("GPU-g"), Fault::DoubleBitEcc, Action::ResetGpu),
                (Some(7), u("GPU-h"), Fault::RemappedRowsPending, Action::ResetGpu),
                (None, None, Fault::Missing { nvml: 3, pci: 4 }, Action::Reboot),
            ]
        );
        assert!(faults("boot-b", message).is_empty(), "another boot");
        assert!(faults("boot-a", "2 GPUs healthy").is_empty());
        assert!(faults("boot-a", "GPU 0: Overheated, 99 C, action: cool it [boot boot-a]").is_empty());
    }
}
