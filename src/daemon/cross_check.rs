//! The sharing cross-check in the daemon: what the published labels promise against what the
//! device plugin made allocatable on the Node.

use super::metrics::Resource;
use super::Daemon;
use crate::sharing_check::{self, Finding, SharingCheck};

impl Daemon {
    /// With `--extended-labels`: compares what the published labels promise with the Node's
    /// allocatable resources, from the writer's read of the Node or the node watch.
    pub(super) fn cross_check(&mut self) {
        let Some(grace) = self.config().sharing_check else { return };
        let from_writer = self.publisher.node_allocatable();
        let (Some(labels), Some(allocatable)) =
            (self.publisher.published(), from_writer.or(self.watched_allocatable.clone()))
        else {
            return;
        };
        let promised = sharing_check::promised(labels, &self.config().pass.labels.sharing);
        for resource in promised.keys() {
            // Present at 0 from the first check, so alerts see the series.
            let _ = self.metrics.sharing_mismatch.get_or_create(&Resource { resource: resource.clone() });
        }
        let check = self.sharing_check.get_or_insert_with(|| SharingCheck::new(grace));
        for finding in check.check(&promised, &allocatable, std::time::Instant::now()) {
            match finding {
                Finding::Mismatch { resource, promised, allocatable } => {
                    let shown = allocatable.map_or("none".to_string(), |a| a.to_string());
                    tracing::warn!(
                        %resource,
                        promised,
                        allocatable = %shown,
                        "the sharing labels promise {promised} {resource}, the node has {shown} allocatable; labels unchanged"
                    );
                    self.metrics.sharing_mismatch.get_or_create(&Resource { resource }).set(1);
                }
                Finding::Cleared { resource } => {
                    tracing::info!(%resource, "resolved: the sharing labels and the node's allocatable agree");
                    self.metrics.sharing_mismatch.get_or_create(&Resource { resource }).set(0);
                }
            }
        }
    }
}
