//! `nvidia.com/mps.capable`: MPS is configured. GFD exits when MPS meets a MIG-enabled GPU;
//! nvlabel reports `false`, says why, and (in `labels::compute`) drops every sharing claim, since
//! the device plugin cannot share such devices.

use super::{key, Labels};
use crate::sharing::{Sharing, Strategy};
use crate::snapshot::Gpu;

/// The first MIG-enabled GPU when MPS is the configured strategy.
pub fn on_mig<'a>(gpus: &'a [Gpu], sharing: &Sharing) -> Option<&'a Gpu> {
    if sharing.strategy() != Strategy::Mps {
        return None;
    }
    gpus.iter().find(|g| g.mig.as_ref().is_some_and(|m| m.enabled))
}

/// The MPS label.
pub fn labels(gpus: &[Gpu], sharing: &Sharing, warnings: &mut Vec<String>) -> Labels {
    let mut capable = sharing.strategy() == Strategy::Mps;
    if let Some(g) = on_mig(gpus, sharing) {
        warnings.push(format!(
            "MPS sharing is not supported for MIG devices (GPU {} has MIG enabled): nvidia.com/mps.capable=false, and no sharing is labelled",
            g.index
        ));
        capable = false;
    }
    Labels::from([(key("mps.capable"), capable.to_string())])
}
