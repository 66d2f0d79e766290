//! `nvidia.com/mps.capable`: MPS is configured. GFD exits when MPS meets a MIG-enabled GPU;
//! nvlabel reports `false` and says why.

use super::{key, Labels};
use crate::sharing::{Sharing, Strategy};
use crate::snapshot::Gpu;

/// The MPS label.
pub fn labels(gpus: &[Gpu], sharing: &Sharing, warnings: &mut Vec<String>) -> Labels {
    let mut capable = sharing.strategy() == Strategy::Mps;
    if capable {
        if let Some(g) = gpus.iter().find(|g| g.mig.as_ref().is_some_and(|m| m.enabled)) {
            warnings.push(format!(
                "MPS sharing is not supported for mig devices (GPU {} has MIG enabled): nvidia.com/mps.capable=false",
                g.index
            ));
            capable = false;
        }
    }
    Labels::from([(key("mps.capable"), capable.to_string())])
}
