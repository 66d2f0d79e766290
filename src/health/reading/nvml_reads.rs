//! Health from NVML: each pass's reading (ECC counts, row remapping, retired pages, NVLink
//! states, lost GPUs, the PCI bus count), and the event thread (Xids, double-bit ECC, GPUs
//! becoming unavailable) that blocks in `nvmlEventSetWait` so the async runtime never does.
//! In the daemon both use its one NVML session; `nvlabel health` opens one of its own.

use crate::health::reading::raw_events::{handle_key, EventSet, RawEvent};
use crate::health::values::reading::{Event, GpuReading, ReadError, Reading, Remapped};
use crate::kubeapi::backoff::FullJitter;
use crate::probe::{calls, ProbeOptions, Session};
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{field_id::*, *};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::nvml";

/// NVML's most links per GPU.
const MAX_LINKS: u32 = 18;
/// How long one wait blocks before the thread looks at the session and the stop flag again.
const WAIT_MS: u32 = 500;

/// Reads the node's health once through `session`. `Err` when NVML cannot answer at all.
pub fn read(session: &Session, opts: &ProbeOptions) -> Result<Reading, ReadError> {
    let nvml = calls::driver("nvmlInit_v2", None, || session.nvml(opts))?;
    let count = calls::driver("nvmlDeviceGetCount_v2", None, || nvml.device_count()).map_err(|e| {
        session.check(&e);
        ReadError::Call { function: "nvmlDeviceGetCount_v2", source: e }
    })?;
    let mut gpus = Vec::with_capacity(count as usize);
    for index in 0..count {
        let mut gpu = GpuReading { index, ..GpuReading::default() };
        match calls::driver("nvmlDeviceGetHandleByIndex_v2", Some(index), || nvml.device_by_index(index)) {
            Ok(dev) => read_gpu(&nvml, &dev, &mut gpu),
            Err(e) => gpu.lost = lost(&e),
        }
        gpus.push(gpu);
    }
    Ok(Reading { gpus, pci_gpus: session.pci_gpus(&opts.sysfs_root) })
}

fn lost(e: &NvmlError) -> bool {
    matches!(e, NvmlError::GpuLost)
}

/// The value the NVML call `function` answers, `None` when the GPU cannot say; marks the GPU
/// lost on `GPU_IS_LOST`.
fn soft<T>(
    gpu: &mut GpuReading,
    function: &'static str,
    call: impl FnOnce() -> Result<T, NvmlError>,
) -> Option<T> {
    match calls::driver(function, Some(gpu.index), call) {
        Ok(v) => Some(v),
        Err(e) => {
            gpu.lost |= lost(&e);
            None
        }
    }
}

fn read_gpu(nvml: &Nvml, dev: &Device, gpu: &mut GpuReading) {
    gpu.uuid = soft(gpu, "nvmlDeviceGetUUID", || dev.uuid());
    let ecc = "nvmlDeviceGetTotalEccErrors";
    gpu.uncorrected_volatile =
        soft(gpu, ecc, || dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile));
    gpu.corrected_volatile =
        soft(gpu, ecc, || dev.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile));
    gpu.retired_pages_pending =
        soft(gpu, "nvmlDeviceGetRetiredPagesPendingStatus", || dev.are_pages_pending_retired());
    let inforom = calls::driver("nvmlDeviceValidateInforom", Some(gpu.index), || dev.validate_info_rom());
    gpu.inforom_corrupted = matches!(inforom, Err(NvmlError::CorruptedInfoROM));
    let ids = [
        NVML_FI_DEV_REMAPPED_COR,
        NVML_FI_DEV_REMAPPED_UNC,
        NVML_FI_DEV_REMAPPED_PENDING,
        NVML_FI_DEV_REMAPPED_FAILURE,
        NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
        NVML_FI_DEV_PCIE_REPLAY_COUNTER,
    ]
    .map(FieldId);
    // One call for every field (a driver without a field answers that entry alone with an error).
    if let Some(values) = soft(gpu, "nvmlDeviceGetFieldValues", || dev.field_values_for(&ids)) {
        let v: Vec<Option<u64>> = values.into_iter().map(field_u64).collect();
        gpu.recovery_action = v.get(4).copied().flatten();
        gpu.pcie_replays = v.get(5).copied().flatten();
        if let [Some(c), Some(u), Some(p), Some(f), ..] = v[..] {
            gpu.remapped =
                Some(Remapped { correctable: c, uncorrectable: u, pending: p != 0, failure: f != 0 });
        }
    }
    gpu.clock_events =
        soft(gpu, "nvmlDeviceGetCurrentClocksEventReasons", || crate::probe::clocks_event_reasons(nvml, dev));
    let mut links = Vec::new();
    for link in 0..MAX_LINKS {
        let state = || dev.link_wrapper_for(link).is_active();
        match calls::driver("nvmlDeviceGetNvLinkState", Some(gpu.index), state) {
            Ok(active) => links.push(active),
            Err(e) => {
                gpu.lost |= lost(&e);
                break;
            }
        }
    }
    gpu.nvlink_active = (!links.is_empty()).then_some(links);
}

fn field_u64(r: Result<FieldValueSample, NvmlError>) -> Option<u64> {
    match r.ok()?.value.ok()? {
        SampleValue::U32(v) => Some(v.into()),
        SampleValue::U64(v) => Some(v),
        SampleValue::I64(v) => u64::try_from(v).ok(),
        SampleValue::F64(_) => None,
    }
}

/// Converts an NVML event; `None` for types health does not watch.
fn convert(set: &EventSet, by_handle: &HashMap<usize, u32>, e: RawEvent) -> Option<Event> {
    // From the registration, since a GPU that became unavailable cannot tell its index any more.
    let index = match by_handle.get(&(e.device as usize)) {
        Some(i) => *i,
        None => set.index_of(e.device).ok()?,
    };
    let mig = (e.gpu_instance != u32::MAX).then_some((e.gpu_instance, e.compute_instance));
    if e.kind & u64::from(nvmlEventTypeXidCriticalError) != 0 {
        Some(Event::Xid { index, xid: e.data, mig })
    } else if e.kind & u64::from(nvmlEventTypeDoubleBitEccError) != 0 {
        Some(Event::DoubleBitEcc { index })
    } else if e.kind & u64::from(nvmlEventTypeGpuUnavailableError) != 0 {
        Some(Event::Lost { index })
    } else {
        None
    }
}

/// The event thread's work: registers every GPU of `session`, waits, and sends each event to
/// `tx`; registers again when the session is reopened, and returns within one wait (half a
/// second) of `stop` being set or the receiver going.
pub fn listen_events(
    session: Session,
    opts: ProbeOptions,
    tx: tokio::sync::mpsc::Sender<Event>,
    stop: Arc<AtomicBool>,
) {
    // The project's one backoff: a node without a driver is not a hot loop.
    let mut backoff = FullJitter::new(Duration::from_secs(1), Duration::from_secs(60));
    while !stop.load(Ordering::Relaxed) && !tx.is_closed() {
        match listen(&session, &opts, &tx, &stop) {
            Ok(()) => backoff.reset(),
            Err(e) => {
                tracing::debug!(target: LOG, error = %e, "NVML events unavailable; trying again");
                sleep_unless_stopped(backoff.next().unwrap_or(Duration::from_secs(60)), &stop);
            }
        }
    }
}

/// Sleeps `d` in steps short enough to notice `stop` within one wait.
fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let until = crate::health::now() + d;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(crate::health::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(u64::from(WAIT_MS))));
    }
}

/// One session's worth of listening; `Ok` when the session changed and listening starts over.
fn listen(
    session: &Session,
    opts: &ProbeOptions,
    tx: &tokio::sync::mpsc::Sender<Event>,
    stop: &AtomicBool,
) -> Result<(), ReadError> {
    let call = |function| move |source| ReadError::Call { function, source };
    let nvml = session.nvml(opts)?;
    let set = EventSet::new(&nvml).map_err(call("nvmlEventSetCreate"))?;
    let count = nvml.device_count().map_err(call("nvmlDeviceGetCount_v2"))?;
    let mut by_handle = HashMap::new();
    for index in 0..count {
        // A lost GPU cannot register; the pass reading reports it.
        let registered = nvml.device_by_index(index).and_then(|d| {
            by_handle.insert(handle_key(&d), index);
            set.register(&d)
        });
        if let Err(e) = registered {
            tracing::debug!(target: LOG, gpu = index, error = %e, "no health events from this GPU");
        }
    }
    while !stop.load(Ordering::Relaxed) {
        match set.wait(WAIT_MS) {
            Ok(raw) => {
                if let Some(event) = convert(&set, &by_handle, raw) {
                    if tx.blocking_send(event).is_err() {
                        return Ok(());
                    }
                }
            }
            Err(NvmlError::Timeout) => {
                if !session.current().is_some_and(|current| Arc::ptr_eq(&current, &nvml)) {
                    return Ok(());
                }
            }
            Err(e) => {
                session.check(&e);
                return Err(ReadError::Call { function: "nvmlEventSetWait_v2", source: e });
            }
        }
    }
    Ok(())
}
