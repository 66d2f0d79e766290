//! One exported call: the `export!` macro every `cu*` symbol is defined with, what each call does
//! before its body runs (take the lock, count itself; `cuInit` also blocks while a `hang` line
//! holds it), and how it writes its answers.

use crate::codes::{self, CUresult};
use crate::fixture::{Cuda, Device};
use crate::state::{lock, Global};
use std::ffi::{c_char, c_int};
use std::sync::MutexGuard;

/// One exported call in progress: the lock, and the function name that faults are matched on.
pub(crate) struct Call {
    pub(crate) g: MutexGuard<'static, Global>,
    name: &'static str,
}

impl Call {
    /// Starts an exported call: takes the lock and counts the call.
    pub(crate) fn begin(name: &'static str) -> Call {
        let mut g = lock();
        g.count(name);
        Call { g, name }
    }

    /// The machine, after a successful `cuInit`, applying faults aimed at every call.
    pub(crate) fn cuda(&mut self) -> Result<&Cuda, CUresult> {
        self.g.checked(self.name, None)
    }

    /// The device with ordinal `dev`, after a successful `cuInit`, applying faults aimed at it.
    pub(crate) fn device(&mut self, dev: c_int) -> Result<&Device, CUresult> {
        let cuda = self.g.checked(self.name, Some(dev))?;
        // `checked` has bounded `dev` already; a miss here would be our bug, not the caller's.
        usize::try_from(dev).ok().and_then(|d| cuda.devices.get(d)).ok_or(codes::UNKNOWN)
    }

    /// For the calls that answer before `cuInit`: only the faults.
    pub(crate) fn any_time(&mut self) -> Result<(), CUresult> {
        self.g.any_time(self.name)
    }

    /// Blocks while a `hang` line of the event file holds this call (`cuInit`), with the lock
    /// released so that every other call (other threads' `cuGetErrorName`, say) goes on meanwhile;
    /// then takes the lock again.
    pub(crate) fn hang(self) -> Call {
        let Call { g, name } = self;
        drop(g);
        crate::hang::wait();
        Call { g: lock(), name }
    }
}

/// Writes `v` through a caller's pointer.
///
/// # Safety
/// `p` must be null or valid for a write of `T`.
pub(crate) unsafe fn out<T>(p: *mut T, v: T) -> Result<(), CUresult> {
    if p.is_null() {
        return Err(codes::INVALID_VALUE);
    }
    p.write_unaligned(v);
    Ok(())
}

/// Copies at most `len - 1` bytes of `s` and a NUL into a caller's buffer, as `cuDeviceGetName`
/// does: a short buffer truncates the name, it is no error.
///
/// # Safety
/// `buf` must be null or valid for `len` bytes.
pub(crate) unsafe fn out_name(buf: *mut c_char, len: c_int, s: &str) -> Result<(), CUresult> {
    let Some(room) = usize::try_from(len).ok().filter(|l| *l > 0) else {
        return Err(codes::INVALID_VALUE);
    };
    if buf.is_null() {
        return Err(codes::INVALID_VALUE);
    }
    let n = s.len().min(room - 1);
    std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
    *buf.add(n) = 0;
    Ok(())
}

/// Hands out a static NUL-terminated text, or NULL and `CUDA_ERROR_INVALID_VALUE` for a code
/// this library cannot name (as the real `cuGetErrorName` does for an unknown code).
///
/// # Safety
/// `p` must be null or valid for a write of a pointer.
pub(crate) unsafe fn out_text(p: *mut *const c_char, text: Option<&'static str>) -> Result<(), CUresult> {
    out(p, text.map_or(std::ptr::null(), |t| t.as_ptr().cast()))?;
    text.map(|_| ()).ok_or(codes::INVALID_VALUE)
}

/// Defines exported functions (`SYMBOLS` lists them), each counted, locked and panic-safe.
macro_rules! export {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) |$c:ident| $body:block)*) => {
        /// Every exported symbol, for checking the functions fixture faults name.
        pub const SYMBOLS: &[&str] = &[$(stringify!($name)),*];
        $(
            /// See `cuda.h`.
            ///
            /// # Safety
            /// Pointer arguments must be null or valid for the write `cuda.h` describes.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::codes::CUresult {
                let run = std::panic::AssertUnwindSafe(|| -> Result<(), $crate::codes::CUresult> {
                    #[allow(unused_mut)]
                    let mut $c = $crate::call::Call::begin(stringify!($name));
                    #[allow(unused_unsafe)]
                    unsafe { $body }
                });
                match std::panic::catch_unwind(run) {
                    Ok(Ok(())) => $crate::codes::SUCCESS,
                    Ok(Err(code)) => code,
                    Err(_) => $crate::codes::UNKNOWN,
                }
            }
        )*
    };
}
pub(crate) use export;
