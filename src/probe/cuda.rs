//! The CUDA driver API (`libcuda.so.1`), loaded at run time and never linked, so the binary
//! starts on a node without it and says why. Integrated GPUs (Jetson, IGX, Thor) are found this
//! way, as GFD finds them. The library is loaded and `cuInit` called once per process (GFD does
//! both every pass); it is never unloaded, because unloading an initialised driver is unsafe.
//!
//! Every call passes out-pointers to locals of the types `cuda.h` declares; each `unsafe` block
//! says why it is sound (`clippy::undocumented_unsafe_blocks` is denied).
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use crate::exit::Classify;
use std::ffi::{c_char, c_int, c_uint, CStr};
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

/// `CUresult`.
type CuResult = c_int;
/// `CUdevice` (an ordinal).
type CuDevice = c_int;

/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
const ATTR_MAJOR: c_int = 75;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
const ATTR_MINOR: c_int = 76;

/// `CUDA_ERROR_NO_DEVICE`: the driver loaded and found no GPU it may open.
pub const NO_DEVICE: i32 = 100;

/// A failed CUDA call: the function and what the driver answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{function}: {name} ({code}): {text}")]
pub struct CudaError {
    /// The CUDA function.
    pub function: &'static str,
    /// The `CUresult`.
    pub code: i32,
    /// `cuGetErrorName`'s answer (`CUDA_ERROR_NO_DEVICE`), or the number when it has none.
    pub name: String,
    /// `cuGetErrorString`'s answer.
    pub text: String,
}

impl Classify for CudaError {
    fn is_bad_configuration(&self) -> bool {
        false
    }
}

/// Why the CUDA driver could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum CudaOpenError {
    /// The library did not load.
    #[error("cannot load {library}: {}", loader_said(library, source))]
    Load {
        /// The library asked for.
        library: String,
        /// What the loader said.
        source: libloading::Error,
    },
    /// A function the probe needs is not in the library.
    #[error("{library} is not the CUDA driver: {symbol} is missing")]
    Symbol {
        /// The library loaded.
        library: String,
        /// The missing function.
        symbol: &'static str,
    },
    /// `cuInit` failed.
    #[error("{library}: {source}")]
    Init {
        /// The library loaded.
        library: String,
        /// What `cuInit` answered.
        source: CudaError,
    },
}

impl Classify for CudaOpenError {
    fn is_bad_configuration(&self) -> bool {
        match self {
            CudaOpenError::Load { .. } | CudaOpenError::Symbol { .. } => false,
            CudaOpenError::Init { source, .. } => source.is_bad_configuration(),
        }
    }
}

/// The loader's text without the path it starts with, which the message names already.
fn loader_said(library: &str, e: &libloading::Error) -> String {
    let text = e.to_string();
    text.strip_prefix(&format!("{library}: ")).unwrap_or(&text).to_string()
}

type Fn0 = unsafe extern "C" fn(c_uint) -> CuResult;
type FnInt = unsafe extern "C" fn(*mut c_int) -> CuResult;
type FnGet = unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult;
type FnName = unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult;
type FnMem = unsafe extern "C" fn(*mut usize, CuDevice) -> CuResult;
type FnAttr = unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult;
type FnUuid = unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult;
type FnErr = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;

/// An initialised CUDA driver: the library (kept loaded) and the functions the probe calls.
pub struct Cuda {
    library: PathBuf,
    _lib: ManuallyDrop<libloading::Library>,
    driver_get_version: FnInt,
    device_get_count: FnInt,
    device_get: FnGet,
    device_get_name: FnName,
    device_total_mem: FnMem,
    device_get_attribute: FnAttr,
    device_get_uuid: Option<FnUuid>,
    get_error_name: Option<FnErr>,
    get_error_string: Option<FnErr>,
}

impl std::fmt::Debug for Cuda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cuda").field("library", &self.library).finish_non_exhaustive()
    }
}

/// Looks `name` up in `lib` as a function of type `T`.
///
/// # Safety
/// `T` must be the C signature `cuda.h` declares for `name`.
unsafe fn sym<T: Copy>(lib: &libloading::Library, name: &'static str) -> Option<T> {
    // SAFETY: the caller promises `T` is the symbol's type; the pointer is copied out while the
    // library stays loaded for the rest of the process (it is never unloaded).
    unsafe { lib.get::<T>(name.as_bytes()).ok().map(|s| *s) }
}

impl Cuda {
    /// Loads `library` (a name searched as the loader does, or a path) and calls `cuInit(0)`.
    pub fn open(library: &Path) -> Result<Cuda, CudaOpenError> {
        let shown = library.display().to_string();
        // SAFETY: loading runs the library's initialisers; libcuda's are the driver's own, the
        // same ones any CUDA program runs.
        let lib = unsafe { libloading::Library::new(library.as_os_str()) }
            .map_err(|source| CudaOpenError::Load { library: shown.clone(), source })?;
        let need = |symbol: &'static str| CudaOpenError::Symbol { library: shown.clone(), symbol };
        // SAFETY: each type below is cuda.h's declaration of the function it names.
        let (init, cuda) = unsafe {
            let init: Fn0 = sym(&lib, "cuInit").ok_or_else(|| need("cuInit"))?;
            let cuda = Cuda {
                library: library.to_path_buf(),
                driver_get_version: sym(&lib, "cuDriverGetVersion")
                    .ok_or_else(|| need("cuDriverGetVersion"))?,
                device_get_count: sym(&lib, "cuDeviceGetCount").ok_or_else(|| need("cuDeviceGetCount"))?,
                device_get: sym(&lib, "cuDeviceGet").ok_or_else(|| need("cuDeviceGet"))?,
                device_get_name: sym(&lib, "cuDeviceGetName").ok_or_else(|| need("cuDeviceGetName"))?,
                device_total_mem: sym(&lib, "cuDeviceTotalMem_v2")
                    .ok_or_else(|| need("cuDeviceTotalMem_v2"))?,
                device_get_attribute: sym(&lib, "cuDeviceGetAttribute")
                    .ok_or_else(|| need("cuDeviceGetAttribute"))?,
                device_get_uuid: sym(&lib, "cuDeviceGetUuid"),
                get_error_name: sym(&lib, "cuGetErrorName"),
                get_error_string: sym(&lib, "cuGetErrorString"),
                _lib: ManuallyDrop::new(lib),
            };
            (init, cuda)
        };
        // SAFETY: cuInit takes its flags by value; 0 is the only defined value.
        let code = unsafe { init(0) };
        cuda.check("cuInit", code).map_err(|source| CudaOpenError::Init { library: shown, source })?;
        Ok(cuda)
    }

    /// The library this was loaded from.
    pub fn library(&self) -> &Path {
        &self.library
    }

    fn check(&self, function: &'static str, code: CuResult) -> Result<(), CudaError> {
        if code == 0 {
            return Ok(());
        }
        let text = |f: Option<FnErr>| {
            let f = f?;
            let mut out: *const c_char = std::ptr::null();
            // SAFETY: the out-pointer is to a local; on success the driver points it at a static
            // NUL-terminated string, which is copied before anything else is called.
            let ok = unsafe { f(code, &mut out) } == 0 && !out.is_null();
            // SAFETY: as above: a NUL-terminated string the driver keeps for the process.
            ok.then(|| unsafe { CStr::from_ptr(out) }.to_string_lossy().into_owned())
        };
        Err(CudaError {
            function,
            code,
            name: text(self.get_error_name).unwrap_or_else(|| code.to_string()),
            text: text(self.get_error_string).unwrap_or_else(|| "unknown error".into()),
        })
    }

    fn int(&self, function: &'static str, f: FnInt) -> Result<i32, CudaError> {
        let mut v: c_int = 0;
        // SAFETY: the out-pointer is to a local int, as cuda.h declares.
        let code = unsafe { f(&mut v) };
        self.check(function, code).map(|()| v)
    }

    /// `cuDriverGetVersion`: CUDA's integer form (12060 is 12.6).
    pub fn driver_version(&self) -> Result<i32, CudaError> {
        self.int("cuDriverGetVersion", self.driver_get_version)
    }

    /// `cuDeviceGetCount`.
    pub fn device_count(&self) -> Result<u32, CudaError> {
        self.int("cuDeviceGetCount", self.device_get_count).map(|n| n.max(0) as u32)
    }

    /// `cuDeviceGet`: the device of `ordinal`.
    pub fn device(&self, ordinal: u32) -> Result<Device, CudaError> {
        let mut dev: CuDevice = 0;
        // SAFETY: the out-pointer is to a local CUdevice; the ordinal is passed by value.
        let code = unsafe { (self.device_get)(&mut dev, ordinal as c_int) };
        self.check("cuDeviceGet", code).map(|()| Device(dev))
    }

    /// `cuDeviceGetName`.
    pub fn name(&self, dev: Device) -> Result<String, CudaError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer is a local of the length passed; the driver writes at most len - 1
        // bytes and a NUL.
        let code = unsafe { (self.device_get_name)(buf.as_mut_ptr(), buf.len() as c_int, dev.0) };
        self.check("cuDeviceGetName", code)?;
        // The last byte is forced to NUL in case a driver filled the whole buffer.
        buf[buf.len() - 1] = 0;
        // SAFETY: the buffer is NUL-terminated (just ensured) and lives for this call.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// `cuDeviceTotalMem_v2`: total memory in bytes (the legacy call clamps at 4 GiB).
    pub fn total_memory(&self, dev: Device) -> Result<u64, CudaError> {
        let mut bytes: usize = 0;
        // SAFETY: the out-pointer is to a local size_t, as cuda.h declares for the _v2 call.
        let code = unsafe { (self.device_total_mem)(&mut bytes, dev.0) };
        self.check("cuDeviceTotalMem_v2", code).map(|()| bytes as u64)
    }

    /// `cuDeviceGetAttribute` for the compute capability (attributes 75 and 76).
    pub fn compute_capability(&self, dev: Device) -> Result<[i32; 2], CudaError> {
        let attr = |a| {
            let mut v: c_int = 0;
            // SAFETY: the out-pointer is to a local int; attribute and device by value.
            let code = unsafe { (self.device_get_attribute)(&mut v, a, dev.0) };
            self.check("cuDeviceGetAttribute", code).map(|()| v)
        };
        Ok([attr(ATTR_MAJOR)?, attr(ATTR_MINOR)?])
    }

    /// `cuDeviceGetUuid`, formatted as NVML writes a GPU UUID; `None` when the driver lacks it.
    pub fn uuid(&self, dev: Device) -> Option<Result<String, CudaError>> {
        let f = self.device_get_uuid?;
        let mut bytes = [0u8; 16];
        // SAFETY: CUuuid is 16 bytes; the out-pointer is to a local of that size.
        let code = unsafe { f(&mut bytes, dev.0) };
        Some(self.check("cuDeviceGetUuid", code).map(|()| format_uuid(&bytes)))
    }
}

/// A CUDA device handle (`CUdevice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device(CuDevice);

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, NVML's form of the same 16 bytes.
pub fn format_uuid(b: &[u8; 16]) -> String {
    let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_read_as_nvml_writes_them() {
        let b =
            [0x6f, 0xbd, 0x1d, 0xdc, 0x1a, 0x9b, 0x2d, 0x64, 0x5a, 0x2a, 0x1d, 0x3f, 0x8e, 0x9d, 0x0c, 0x11];
        assert_eq!(format_uuid(&b), "GPU-6fbd1ddc-1a9b-2d64-5a2a-1d3f8e9d0c11");
    }

    #[test]
    fn a_missing_library_is_named() {
        let err = Cuda::open(Path::new("/nonexistent/libcuda.so.1")).unwrap_err().to_string();
        assert!(err.starts_with("cannot load /nonexistent/libcuda.so.1: "), "{err}");
    }
}
