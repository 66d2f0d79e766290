//! GPU health: the `ecc`, `retired_pages_pending`, `remapped_rows`, `recovery_action`,
//! `inforom_valid`, `pcie.replay_counter` and `clock_event_reasons` fixture keys and the NVML
//! calls that read them (ECC mode and counters, retired pages, row remapping, field values,
//! the InfoROM, PCIe replays, clock event reasons). The
//! values are the fixture's, changed from outside by the event file's `dbe`, `sbe` and `set` lines
//! (see [`crate::live`]).

use crate::answers::out;
use crate::call::{export, Call};
use crate::codes::*;
use crate::live::Key;
use crate::machine::Handle;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_int, c_uint, c_ulonglong};

/// The health value `key` of GPU `g` as the fixture and the event file make it now; `None`
/// when the fixture does not have the section it belongs to (the call is `NOT_SUPPORTED`).
fn value(c: &mut Call, g: u32, key: Key) -> Option<u64> {
    let m = c.g.initialised().ok()?;
    let gpu = &m.fixture.gpus[g as usize];
    let base = match key {
        Key::RetiredPagesPending => u64::from(gpu.retired_pages_pending?),
        Key::RemappedPending => u64::from(gpu.remapped_rows.as_ref()?.pending),
        Key::RemappedFailure => u64::from(gpu.remapped_rows.as_ref()?.failure),
        Key::RemappedUncorrectable => u64::from(gpu.remapped_rows.as_ref()?.uncorrectable),
        Key::RemappedCorrectable => u64::from(gpu.remapped_rows.as_ref()?.correctable),
        Key::EccUncorrectedVolatile => gpu.ecc.as_ref()?.uncorrected_volatile,
        Key::EccCorrectedVolatile => gpu.ecc.as_ref()?.corrected_volatile,
        Key::EccUncorrectedAggregate => gpu.ecc.as_ref()?.uncorrected_aggregate,
        Key::EccCorrectedAggregate => gpu.ecc.as_ref()?.corrected_aggregate,
        Key::RecoveryAction => gpu.recovery_action?.value(),
        Key::InforomValid => u64::from(gpu.inforom_valid?),
        Key::PcieReplayCounter => gpu.pcie.as_ref()?.replay_counter?,
        Key::ClockEventReasons => {
            crate::health_fixture::ClockEventReason::mask(gpu.clock_event_reasons.as_ref()?)
        }
        Key::NvlinkActive(_) => return None,
    };
    Some(c.g.live.adjust(g, key, base))
}

/// A physical GPU handle; health calls on MIG devices are not supported, as on the driver.
fn gpu_of(c: &mut Call, device: nvmlDevice_t) -> Result<u32, u32> {
    match c.handle(device)?.1 {
        Handle::Gpu(g) => Ok(g),
        Handle::Mig(..) => Err(NOT_SUPPORTED),
        _ => Err(INVALID_ARGUMENT),
    }
}

/// One `nvmlDeviceGetFieldValues` entry: its return code and unsigned value.
fn field(c: &mut Call, g: u32, id: u32) -> Result<u64, u32> {
    let key = match id {
        field_id::NVML_FI_DEV_RETIRED_PENDING => Key::RetiredPagesPending,
        field_id::NVML_FI_DEV_REMAPPED_COR => Key::RemappedCorrectable,
        field_id::NVML_FI_DEV_REMAPPED_UNC => Key::RemappedUncorrectable,
        field_id::NVML_FI_DEV_REMAPPED_PENDING => Key::RemappedPending,
        field_id::NVML_FI_DEV_REMAPPED_FAILURE => Key::RemappedFailure,
        field_id::NVML_FI_DEV_GET_GPU_RECOVERY_ACTION => Key::RecoveryAction,
        field_id::NVML_FI_DEV_PCIE_REPLAY_COUNTER => Key::PcieReplayCounter,
        _ => return Err(NOT_SUPPORTED),
    };
    value(c, g, key).ok_or(NOT_SUPPORTED)
}

export! { HEALTH_SYMBOLS = [];
    fn nvmlDeviceGetEccMode(device: nvmlDevice_t, current: *mut nvmlEnableState_t, pending: *mut nvmlEnableState_t) |c| {
        let g = gpu_of(&mut c, device)?;
        let m = c.g.initialised()?;
        let ecc = m.fixture.gpus[g as usize].ecc.as_ref().ok_or(NOT_SUPPORTED)?;
        if current.is_null() || pending.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        out(current, ecc.enabled as nvmlEnableState_t)?;
        out(pending, ecc.enabled as nvmlEnableState_t)
    }
    fn nvmlDeviceGetTotalEccErrors(device: nvmlDevice_t, error_type: nvmlMemoryErrorType_t, counter_type: nvmlEccCounterType_t, count: *mut c_ulonglong) |c| {
        let g = gpu_of(&mut c, device)?;
        let key = match (error_type, counter_type) {
            (0, 0) => Key::EccCorrectedVolatile,
            (1, 0) => Key::EccUncorrectedVolatile,
            (0, 1) => Key::EccCorrectedAggregate,
            (1, 1) => Key::EccUncorrectedAggregate,
            _ => return Err(INVALID_ARGUMENT),
        };
        let v = value(&mut c, g, key).ok_or(NOT_SUPPORTED)?;
        out(count, v)
    }
    fn nvmlDeviceValidateInforom(device: nvmlDevice_t) |c| {
        let g = gpu_of(&mut c, device)?;
        match value(&mut c, g, Key::InforomValid).ok_or(NOT_SUPPORTED)? {
            0 => Err(CORRUPTED_INFOROM),
            _ => Ok(()),
        }
    }
    fn nvmlDeviceGetPcieReplayCounter(device: nvmlDevice_t, count: *mut c_uint) |c| {
        let g = gpu_of(&mut c, device)?;
        let v = value(&mut c, g, Key::PcieReplayCounter).ok_or(NOT_SUPPORTED)?;
        out(count, v.min(u64::from(u32::MAX)) as c_uint)
    }
    fn nvmlDeviceGetCurrentClocksEventReasons(device: nvmlDevice_t, reasons: *mut c_ulonglong) |c| {
        let g = gpu_of(&mut c, device)?;
        let v = value(&mut c, g, Key::ClockEventReasons).ok_or(NOT_SUPPORTED)?;
        out(reasons, v)
    }
    fn nvmlDeviceGetRetiredPagesPendingStatus(device: nvmlDevice_t, pending: *mut nvmlEnableState_t) |c| {
        let g = gpu_of(&mut c, device)?;
        let v = value(&mut c, g, Key::RetiredPagesPending).ok_or(NOT_SUPPORTED)?;
        out(pending, (v != 0) as nvmlEnableState_t)
    }
    fn nvmlDeviceGetRemappedRows(device: nvmlDevice_t, corr_rows: *mut c_uint, unc_rows: *mut c_uint, is_pending: *mut c_uint, failure_occurred: *mut c_uint) |c| {
        let g = gpu_of(&mut c, device)?;
        let mut read = |key| value(&mut c, g, key).ok_or(NOT_SUPPORTED).map(|v| v.min(u64::from(u32::MAX)) as c_uint);
        let values = [
            read(Key::RemappedCorrectable)?,
            read(Key::RemappedUncorrectable)?,
            read(Key::RemappedPending)?,
            read(Key::RemappedFailure)?,
        ];
        if [corr_rows, unc_rows, is_pending, failure_occurred].iter().any(|p| p.is_null()) {
            return Err(INVALID_ARGUMENT);
        }
        for (p, v) in [corr_rows, unc_rows, is_pending, failure_occurred].into_iter().zip(values) {
            out(p, v)?;
        }
        Ok(())
    }
    fn nvmlDeviceGetFieldValues(device: nvmlDevice_t, values_count: c_int, values: *mut nvmlFieldValue_t) |c| {
        let g = gpu_of(&mut c, device)?;
        if values_count <= 0 || values.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        for i in 0..values_count as usize {
            let v = &mut *values.add(i);
            v.timestamp = now;
            v.latencyUsec = 0;
            v.valueType = nvmlValueType_enum_NVML_VALUE_TYPE_UNSIGNED_INT;
            match field(&mut c, g, v.fieldId) {
                Ok(n) => {
                    v.nvmlReturn = SUCCESS;
                    v.value = nvmlValue_t { uiVal: n.min(u64::from(u32::MAX)) as c_uint };
                }
                Err(code) => {
                    v.nvmlReturn = code;
                    v.value = nvmlValue_t { ullVal: 0 };
                }
            }
        }
        Ok(())
    }
}
