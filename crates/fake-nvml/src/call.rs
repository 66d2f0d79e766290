//! One exported call: the `export!` macro every `nvml*` symbol is defined with, and what each
//! call does before its body runs (take the lock, count itself, read the event file, and block
//! while a `hang` line holds it).

use crate::live::WAIT_STEP;
use crate::machine::{Handle, Machine};
use crate::state::{lock, Global};
use std::sync::MutexGuard;
use std::time::Instant;

/// One exported call in progress: the lock, and the function name that faults are matched on.
pub(crate) struct Call {
    pub(crate) g: MutexGuard<'static, Global>,
    pub(crate) name: &'static str,
}

impl Call {
    /// Starts an exported call: takes the lock, counts the call, and applies what the event file
    /// says happened since the last one (so a lost GPU or a changed value shows in this call).
    /// A call a `hang` line holds (by its name and the GPU of the first device handle among
    /// `args`) first blocks, without the lock.
    pub(crate) fn begin(name: &'static str, args: &[Option<usize>]) -> Call {
        let mut g = lock();
        g.count(name);
        g.poll_events();
        let gpu = g.gpu_of(args);
        Call { g: hang(g, name, gpu), name }
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

/// Blocks while a `hang` line holds `name` on `gpu`, with the lock released so that every other
/// call (other functions, other GPUs, `nvmlEventSetWait`) goes on; the file is read meanwhile, so
/// `hang <function> 0` ends the wait early.
fn hang(
    mut g: MutexGuard<'static, Global>,
    name: &'static str,
    gpu: Option<u32>,
) -> MutexGuard<'static, Global> {
    let Some(time) = g.live.hang_for(name, gpu) else { return g };
    // Tests wait for this line to know the call is blocked before they go on.
    let on = gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default();
    eprintln!("fake-nvml: {name}{on} hangs for {} s", time.as_secs_f64());
    let started = Instant::now();
    while let Some(time) = g.live.hang_for(name, gpu) {
        let left = time.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        drop(g);
        std::thread::sleep(left.min(WAIT_STEP));
        g = lock();
        g.poll_events();
    }
    g
}

/// An exported function's argument as `Call::begin` sees it: a pointer's address (which may be a
/// device handle), or nothing.
pub(crate) trait Arg {
    /// The address, for a pointer.
    fn address(&self) -> Option<usize>;
}

impl<T> Arg for *mut T {
    fn address(&self) -> Option<usize> {
        Some(*self as usize)
    }
}

impl<T> Arg for *const T {
    fn address(&self) -> Option<usize> {
        Some(*self as usize)
    }
}

/// Numbers are never handles.
macro_rules! not_an_address {
    ($($t:ty),*) => {
        $(impl Arg for $t {
            fn address(&self) -> Option<usize> {
                None
            }
        })*
    };
}
not_an_address!(i32, u32, u64);

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
                    let args: &[Option<usize>] = &[$($crate::call::Arg::address(&$arg)),*];
                    let mut $c = $crate::call::Call::begin(stringify!($name), args);
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
