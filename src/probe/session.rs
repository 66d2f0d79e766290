//! One NVML session for the life of the daemon (with `--health`): events need NVML initialised
//! all along, and passes then reuse it instead of initialising NVML each time. The session is
//! dropped (and the next user opens a new one) when NVML says the driver went away or changed.

use super::{ProbeError, ProbeOptions};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The open session and the library it came from.
static SESSION: Mutex<Option<(PathBuf, Arc<Nvml>)>> = Mutex::new(None);

/// Initialises NVML from `opts.library` (a new session each call).
pub fn open(opts: &ProbeOptions) -> Result<Nvml, ProbeError> {
    let library = opts.library.display().to_string();
    let nvml = Nvml::builder().lib_path(opts.library.as_os_str()).init().map_err(|e| match e {
        NvmlError::LibloadingError(e) => {
            // The loader's text starts with the path again.
            let text = e.to_string();
            let why = text.strip_prefix(&format!("{library}: ")).unwrap_or(&text);
            ProbeError::NoDriver { detail: format!("cannot load {library}: {why}") }
        }
        NvmlError::DriverNotLoaded => {
            ProbeError::NoDriver { detail: format!("{library}: the driver is not loaded") }
        }
        NvmlError::FailedToLoadSymbol(e) => {
            ProbeError::NoDriver { detail: format!("{library} is not NVML: {e}") }
        }
        source => ProbeError::Init { library: library.clone(), source },
    })?;
    super::raw::keep_loaded(&opts.library);
    Ok(nvml)
}

/// The shared session, opened now if there is none (or it is for another library). A failed
/// open is not remembered: NVML that appears later is found by the next call.
pub fn shared(opts: &ProbeOptions) -> Result<Arc<Nvml>, ProbeError> {
    let mut session = SESSION.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((library, nvml)) = session.as_ref() {
        if *library == opts.library {
            return Ok(nvml.clone());
        }
    }
    let nvml = Arc::new(open(opts)?);
    *session = Some((opts.library.clone(), nvml.clone()));
    Ok(nvml)
}

/// Drops the shared session if `e` says the driver went away or changed, so the next user
/// initialises NVML again. Returns whether it did.
pub fn check(e: &NvmlError) -> bool {
    let gone =
        matches!(e, NvmlError::Uninitialized | NvmlError::DriverNotLoaded | NvmlError::LibRmVersionMismatch);
    if gone {
        SESSION.lock().unwrap_or_else(|p| p.into_inner()).take();
        tracing::warn!(error = %e, "NVML says the driver went away or changed; it is initialised again");
    }
    gone
}
