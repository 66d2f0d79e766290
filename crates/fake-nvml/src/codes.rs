//! NVML return codes: their lower-case fixture names and their `nvmlErrorString` texts.

/// `(code, fixture name, nvmlErrorString text)`; the texts are NUL-terminated for C.
const CODES: &[(u32, &str, &str)] = &[
    (0, "success", "Success\0"),
    (1, "uninitialized", "Uninitialized\0"),
    (2, "invalid_argument", "Invalid Argument\0"),
    (3, "not_supported", "Not Supported\0"),
    (4, "no_permission", "Insufficient Permissions\0"),
    (5, "already_initialized", "Already Initialized\0"),
    (6, "not_found", "Not Found\0"),
    (7, "insufficient_size", "Insufficient Size\0"),
    (8, "insufficient_power", "Insufficient External Power\0"),
    (9, "driver_not_loaded", "Driver Not Loaded\0"),
    (10, "timeout", "Timeout\0"),
    (11, "irq_issue", "Interrupt Request Issue\0"),
    (12, "library_not_found", "NVML Shared Library Not Found\0"),
    (13, "function_not_found", "Function Not Found\0"),
    (14, "corrupted_inforom", "Corrupted infoROM\0"),
    (15, "gpu_is_lost", "GPU is lost\0"),
    (16, "reset_required", "GPU requires restart\0"),
    (17, "operating_system", "The operating system has blocked the request.\0"),
    (18, "lib_rm_version_mismatch", "RM has detected an NVML/RM version mismatch.\0"),
    (19, "in_use", "In use by another client\0"),
    (20, "memory", "Insufficient Memory\0"),
    (21, "no_data", "No data\0"),
    (22, "vgpu_ecc_not_supported", "Requested vgpu operation is not supported with ECC enabled\0"),
    (23, "insufficient_resources", "Insufficient resources\0"),
    (24, "freq_not_supported", "Frequency not supported\0"),
    (25, "argument_version_mismatch", "Argument version mismatch\0"),
    (26, "deprecated", "Deprecated\0"),
    (27, "not_ready", "Not ready\0"),
    (28, "gpu_not_found", "GPU not found\0"),
    (29, "invalid_state", "Invalid state\0"),
    (999, "unknown", "Unknown Error\0"),
];

/// The code for a fixture name such as `gpu_is_lost`.
pub fn by_name(name: &str) -> Option<u32> {
    CODES.iter().find(|(_, n, _)| *n == name).map(|(c, _, _)| *c)
}

/// The NUL-terminated `nvmlErrorString` text for a code.
pub fn text(code: u32) -> &'static str {
    CODES.iter().find(|(c, _, _)| *c == code).map(|(_, _, t)| *t).unwrap_or("Unknown Error\0")
}

/// `NVML_SUCCESS`.
pub const SUCCESS: u32 = 0;
/// `NVML_ERROR_UNINITIALIZED`.
pub const UNINITIALIZED: u32 = 1;
/// `NVML_ERROR_INVALID_ARGUMENT`.
pub const INVALID_ARGUMENT: u32 = 2;
/// `NVML_ERROR_NOT_SUPPORTED`.
pub const NOT_SUPPORTED: u32 = 3;
/// `NVML_ERROR_NOT_FOUND`.
pub const NOT_FOUND: u32 = 6;
/// `NVML_ERROR_INSUFFICIENT_SIZE`.
pub const INSUFFICIENT_SIZE: u32 = 7;
/// `NVML_ERROR_DRIVER_NOT_LOADED`.
pub const DRIVER_NOT_LOADED: u32 = 9;
/// `NVML_ERROR_GPU_IS_LOST`.
pub const GPU_IS_LOST: u32 = 15;
/// `NVML_ERROR_CORRUPTED_INFOROM`.
pub const CORRUPTED_INFOROM: u32 = 14;
/// `NVML_ERROR_TIMEOUT`.
pub const TIMEOUT: u32 = 10;
/// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`.
pub const ARGUMENT_VERSION_MISMATCH: u32 = 25;
/// `NVML_ERROR_UNKNOWN`.
pub const UNKNOWN: u32 = 999;
