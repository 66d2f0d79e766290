//! The DRA device taints of the faulty GPUs' devices ([`crate::health::writing::taints`]), brought in line
//! with the record whenever a report knows it, with the effect the configuration says now.

use super::{Target, Writer};
use crate::health::values::report::Report;
use crate::health::writing::taints::DeviceTaints;
use crate::kubeapi::slices::SliceWatch;
use futures::future::BoxFuture;

/// Writes the device taints.
pub struct TaintWriter {
    taints: DeviceTaints,
    /// The slices that list this node's devices.
    slices: SliceWatch,
}

impl TaintWriter {
    /// Taints the devices `slices` list.
    pub fn new(taints: DeviceTaints, slices: SliceWatch) -> TaintWriter {
        TaintWriter { taints, slices }
    }
}

impl Writer for TaintWriter {
    fn write<'a>(&'a mut self, report: &'a Report, to: &'a Target<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(faulty) = &report.faulty else { return };
            self.taints.set_effect(to.config.settings.taint_effect);
            self.taints.sync(&self.slices.state(), faulty).await;
        })
    }
}
