//! `nvidia.com/mig.capable`: whether any GPU supports MIG.

use super::{key, Labels};
use crate::snapshot::Gpu;

/// The MIG-capability label.
pub fn labels(gpus: &[Gpu]) -> Labels {
    Labels::from([(key("mig.capable"), gpus.iter().any(|g| g.mig.is_some()).to_string())])
}
