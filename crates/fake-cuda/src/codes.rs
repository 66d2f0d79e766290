//! CUDA driver result codes: their `cuda.h` names, the texts the real driver's
//! `cuGetErrorString` gives, and their fixture names (the `cuda.h` name in lower case without
//! `CUDA_ERROR_`).

/// The `CUresult` type of `cuda.h`, an `int`-sized enum whose values are all non-negative.
pub type CUresult = u32;

/// `(code, cuda.h name, cuGetErrorString text)`, NUL-terminated because C reads them in place.
/// The codes a device-discovery client can meet; the driver's own texts, word for word, because
/// clients print and sometimes match them.
const CODES: &[(CUresult, &str, &str)] = &[
    (0, "CUDA_SUCCESS\0", "no error\0"),
    (1, "CUDA_ERROR_INVALID_VALUE\0", "invalid argument\0"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY\0", "out of memory\0"),
    (3, "CUDA_ERROR_NOT_INITIALIZED\0", "initialization error\0"),
    (4, "CUDA_ERROR_DEINITIALIZED\0", "driver shutting down\0"),
    (34, "CUDA_ERROR_STUB_LIBRARY\0", "CUDA driver is a stub library\0"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE\0", "CUDA-capable device(s) is/are busy or unavailable\0"),
    (100, "CUDA_ERROR_NO_DEVICE\0", "no CUDA-capable device is detected\0"),
    (101, "CUDA_ERROR_INVALID_DEVICE\0", "invalid device ordinal\0"),
    (102, "CUDA_ERROR_DEVICE_NOT_LICENSED\0", "device doesn't have valid Grid license\0"),
    (201, "CUDA_ERROR_INVALID_CONTEXT\0", "invalid device context\0"),
    (214, "CUDA_ERROR_ECC_UNCORRECTABLE\0", "uncorrectable ECC error encountered\0"),
    (304, "CUDA_ERROR_OPERATING_SYSTEM\0", "OS call failed or operation not supported on this OS\0"),
    (400, "CUDA_ERROR_INVALID_HANDLE\0", "invalid resource handle\0"),
    (401, "CUDA_ERROR_ILLEGAL_STATE\0", "the operation cannot be performed in the present state\0"),
    (500, "CUDA_ERROR_NOT_FOUND\0", "named symbol not found\0"),
    (600, "CUDA_ERROR_NOT_READY\0", "device not ready\0"),
    (800, "CUDA_ERROR_NOT_PERMITTED\0", "operation not permitted\0"),
    (801, "CUDA_ERROR_NOT_SUPPORTED\0", "operation not supported\0"),
    (802, "CUDA_ERROR_SYSTEM_NOT_READY\0", "system not yet initialized\0"),
    (
        803,
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH\0",
        "system has unsupported display driver / cuda driver combination\0",
    ),
    (
        804,
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE\0",
        "forward compatibility was attempted on non supported HW\0",
    ),
    (909, "CUDA_ERROR_TIMEOUT\0", "wait operation timed out\0"),
    (999, "CUDA_ERROR_UNKNOWN\0", "unknown error\0"),
];

/// The error code for a fixture name such as `invalid_device`; `None` for `success` (not an
/// error to inject) and for names this library does not know.
pub fn by_fixture_name(name: &str) -> Option<CUresult> {
    // Fixtures are written in lower case, as the NVML fake's are; `NO_DEVICE` is a typo there.
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let wanted = format!("CUDA_ERROR_{}\0", name.to_ascii_uppercase());
    CODES.iter().find(|(_, n, _)| *n == wanted).map(|(c, _, _)| *c)
}

/// The NUL-terminated `cuda.h` name of a code, as `cuGetErrorName` gives it.
pub fn name(code: CUresult) -> Option<&'static str> {
    CODES.iter().find(|(c, _, _)| *c == code).map(|(_, n, _)| *n)
}

/// The NUL-terminated text of a code, as `cuGetErrorString` gives it.
pub fn text(code: CUresult) -> Option<&'static str> {
    CODES.iter().find(|(c, _, _)| *c == code).map(|(_, _, t)| *t)
}

/// `CUDA_SUCCESS`.
pub const SUCCESS: CUresult = 0;
/// `CUDA_ERROR_INVALID_VALUE`.
pub const INVALID_VALUE: CUresult = 1;
/// `CUDA_ERROR_NOT_INITIALIZED`.
pub const NOT_INITIALIZED: CUresult = 3;
/// `CUDA_ERROR_NO_DEVICE`.
pub const NO_DEVICE: CUresult = 100;
/// `CUDA_ERROR_INVALID_DEVICE`.
pub const INVALID_DEVICE: CUresult = 101;
/// `CUDA_ERROR_UNKNOWN`.
pub const UNKNOWN: CUresult = 999;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_names_are_the_lower_case_tail_of_the_cuda_h_name() {
        assert_eq!(by_fixture_name("no_device"), Some(NO_DEVICE));
        assert_eq!(by_fixture_name("invalid_value"), Some(INVALID_VALUE));
        assert_eq!(by_fixture_name("unknown"), Some(UNKNOWN));
        assert_eq!(by_fixture_name("NO_DEVICE"), None);
        assert_eq!(by_fixture_name("success"), None);
        assert_eq!(by_fixture_name("gpu_is_lost"), None);
    }

    #[test]
    fn every_code_has_a_c_name_and_text() {
        for (code, n, t) in CODES {
            assert!(n.ends_with('\0') && t.ends_with('\0'), "{code}");
            assert_eq!(n.matches('\0').count() + t.matches('\0').count(), 2, "{code}");
        }
    }
}
