//! The NVML event API (`nvmlEventSetCreate`, `nvmlDeviceRegisterEvents`, `nvmlEventSetWait*`,
//! ...): it delivers what the `FAKE_NVML_EVENTS` file says happened ([`crate::live`]).

use crate::answers::out;
use crate::call::{export, Call};
use crate::codes::{self, *};
use crate::live::{Set, WAIT_STEP};
use crate::machine::{Handle, Machine};
use crate::state::lock;
use nvml_wrapper_sys::bindings::*;
use std::ffi::{c_uint, c_ulonglong};
use std::time::{Duration, Instant};

/// Event sets get addresses in this table, as device handles do in the state's.
static SET_SLOTS: [std::sync::atomic::AtomicU8; 4096] = [const { std::sync::atomic::AtomicU8::new(0) }; 4096];

/// The event types GPU `g` supports: ECC and unavailability where it has ECC, Xids everywhere.
fn supported(m: &Machine, g: u32) -> u64 {
    let xid = u64::from(nvmlEventTypeXidCriticalError);
    if m.fixture.gpus[g as usize].ecc.is_some() {
        xid | u64::from(
            nvmlEventTypeSingleBitEccError
                | nvmlEventTypeDoubleBitEccError
                | nvmlEventTypeGpuUnavailableError,
        )
    } else {
        xid
    }
}

/// The event set behind an address, or `INVALID_ARGUMENT`.
fn set_mut(c: &mut Call, set: nvmlEventSet_t) -> Result<&mut Set, u32> {
    c.g.initialised()?;
    c.g.live.sets.get_mut(&(set as usize)).ok_or(INVALID_ARGUMENT)
}

export! { EVENT_SYMBOLS = [];
    fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) |c| {
        c.g.initialised()?;
        if set.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let live = &mut c.g.live;
        let addr = (0..SET_SLOTS.len())
            .map(|i| SET_SLOTS.as_ptr() as usize + i)
            .find(|a| !live.sets.contains_key(a))
            .ok_or(codes::by_name("memory").unwrap_or(UNKNOWN))?;
        live.sets.insert(addr, Set::default());
        out(set, addr as nvmlEventSet_t)
    }
    fn nvmlDeviceGetSupportedEventTypes(device: nvmlDevice_t, types: *mut c_ulonglong) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(NOT_SUPPORTED) };
        let mask = supported(m, g);
        out(types, mask)
    }
    fn nvmlDeviceRegisterEvents(device: nvmlDevice_t, types: c_ulonglong, set: nvmlEventSet_t) |c| {
        let (m, h) = c.handle(device)?;
        let Handle::Gpu(g) = h else { return Err(NOT_SUPPORTED) };
        if types & !supported(m, g) != 0 {
            return Err(NOT_SUPPORTED);
        }
        *set_mut(&mut c, set)?.registered.entry(g).or_insert(0) |= types;
        Ok(())
    }
    fn nvmlEventSetFree(set: nvmlEventSet_t) |c| {
        c.g.initialised()?;
        c.g.live.sets.remove(&(set as usize)).map(|_| ()).ok_or(INVALID_ARGUMENT)
    }
}

/// Shared body of `nvmlEventSetWait` and `_v2`: the next event, waiting at most `timeout_ms`
/// without holding the lock, so other threads' calls go on meanwhile. `v2` also fills the GPU-
/// and compute-instance ids (the v1 struct ends before them).
unsafe fn wait(
    name: &'static str,
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
    v2: bool,
) -> u32 {
    // Counted, and held by a `hang` line, like every other call.
    drop(Call::begin(name, &[]));
    let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
    loop {
        let found = {
            let mut c = Call { g: lock(), name };
            c.g.poll_events();
            match set_mut(&mut c, set) {
                Err(code) => return code,
                Ok(s) => {
                    s.queue.pop_front().map(|e| (e, c.g.initialised().map(|m| m.address(Handle::Gpu(e.gpu)))))
                }
            }
        };
        if let Some((e, Ok(device))) = found {
            if data.is_null() {
                return INVALID_ARGUMENT;
            }
            let d = &mut *data;
            d.device = device as nvmlDevice_t;
            d.eventType = e.kind;
            d.eventData = e.data;
            if v2 {
                d.gpuInstanceId = e.gi;
                d.computeInstanceId = e.ci;
            }
            return SUCCESS;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return TIMEOUT;
        }
        std::thread::sleep(left.min(WAIT_STEP));
    }
}

/// `nvmlEventSetWait`: the pre-MIG form.
///
/// # Safety
/// `data` must be null or valid for writing the three fields of the v1 `nvmlEventData_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    std::panic::catch_unwind(|| wait("nvmlEventSetWait", set, data, timeout_ms, false)).unwrap_or(UNKNOWN)
}

/// `nvmlEventSetWait_v2`.
///
/// # Safety
/// `data` must be null or valid for writing an `nvmlEventData_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeout_ms: c_uint,
) -> nvmlReturn_t {
    std::panic::catch_unwind(|| wait("nvmlEventSetWait_v2", set, data, timeout_ms, true)).unwrap_or(UNKNOWN)
}

/// The wait symbols, which are written by hand (they must not hold the lock while waiting).
pub const WAIT_SYMBOLS: &[&str] = &["nvmlEventSetWait", "nvmlEventSetWait_v2"];
