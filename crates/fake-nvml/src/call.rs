//! One exported call: the `export!` macro every `nvml*` symbol is defined with, and what each
//! call does before its body runs (take the lock, count itself, read the event file).

use crate::machine::{Handle, Machine};
use crate::state::{lock, Global};
use std::sync::MutexGuard;

/// One exported call in progress: the lock, and the function name that faults are matched on.
pub(crate) struct Call {
    pub(crate) g: MutexGuard<'static, Global>,
    pub(crate) name: &'static str,
}

impl Call {
    /// Starts an exported call: takes the lock, counts the call, and applies what the event file
    /// says happened since the last one (so a lost GPU or a changed value shows in this call).
    pub(crate) fn begin(name: &'static str) -> Call {
        let mut c = Call { g: lock(), name };
        c.g.count(name);
        c.g.poll_events();
        c
    }

    /// The machine, applying system-wide faults.
    pub(crate) fn machine(&mut self) -> Result<&mut Machine, u32> {
        self.g.machine(self.name)
    }

    /// The handle `h` stands for, applying faults aimed at it.
    pub(crate) fn handle<T>(&mut self, h: *mut T) -> Result<(&mut Machine, Handle), u32> {
        self.g.handle(self.name, h as usize)
    }
}

/// Defines exported functions (`$symbols` lists them), each counted, locked and panic-safe.
macro_rules! export {
    ($symbols:ident = [$($extra:literal),*]; $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) |$c:ident| $body:block)*) => {
        /// The symbols this file exports.
        pub const $symbols: &[&str] = &[$($extra,)* $(stringify!($name)),*];
        $(
            /// See `nvml.h`.
            ///
            /// # Safety
            /// Pointer arguments must be null or valid for the write `nvml.h` describes;
            /// handles are only looked up, never dereferenced.
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> nvmlReturn_t {
                let run = std::panic::AssertUnwindSafe(|| -> Result<(), u32> {
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
