//! The sharing cross-check in the daemon: what the published labels promise against what the
//! device plugin made allocatable on the Node.

use super::metrics::{Metrics, Resource};
use crate::labels::Labels;
use crate::sharing::Sharing;
use crate::sharing_check::{self, Finding, SharingCheck};
use std::collections::BTreeMap;
use std::time::Duration;

/// The Node's allocatable resources as the node watch last saw them, and the check's memory
/// (made with the grace period in force when it first ran).
#[derive(Default)]
pub struct CrossCheck {
    watched: Option<BTreeMap<String, String>>,
    check: Option<SharingCheck>,
}

/// What one cross-check compares.
pub struct Against<'a> {
    /// `--sharing-check-grace`, where `--extended-labels` asks for the check.
    pub grace: Option<Duration>,
    /// The labels last published.
    pub published: Option<&'a Labels>,
    /// The Node's allocatable resources as the writer last read them.
    pub from_writer: Option<BTreeMap<String, String>>,
    /// The sharing configuration the labels were made with.
    pub sharing: &'a Sharing,
}

impl CrossCheck {
    /// The node watch saw these allocatable resources.
    pub fn saw(&mut self, allocatable: BTreeMap<String, String>) {
        self.watched = Some(allocatable);
    }

    /// When a mismatch outlasts its grace period (the check is due then).
    pub fn due(&self) -> Option<tokio::time::Instant> {
        self.check.as_ref()?.due().map(tokio::time::Instant::from_std)
    }

    /// With `--extended-labels`: compares what the published labels promise with the Node's
    /// allocatable resources, from the writer's read of the Node or the node watch; warns of a
    /// mismatch after the grace period and says when it ends.
    pub fn run(&mut self, with: Against<'_>, metrics: &Metrics) {
        let Some(grace) = with.grace else { return };
        let (Some(labels), Some(allocatable)) = (with.published, with.from_writer.or(self.watched.clone()))
        else {
            // Nothing to compare: no mismatch is due, or its timer would fire for nothing.
            if let Some(check) = self.check.as_mut() {
                check.forget_pending();
            }
            return;
        };
        let promised = sharing_check::promised(labels, with.sharing);
        for resource in promised.keys() {
            // Present at 0 from the first check, so alerts see the series.
            let _ = metrics.sharing_mismatch.get_or_create(&Resource { resource: resource.clone() });
        }
        let check = self.check.get_or_insert_with(|| SharingCheck::new(grace));
        check.set_grace(grace);
        for finding in check.check(&promised, &allocatable, tokio::time::Instant::now().into_std()) {
            match finding {
                Finding::Mismatch { resource, promised, allocatable } => {
                    let shown = allocatable.map_or("none".to_string(), |a| a.to_string());
                    tracing::warn!(
                        %resource,
                        promised,
                        allocatable = %shown,
                        "the sharing labels promise {promised} {resource}, the node has {shown} allocatable; labels unchanged"
                    );
                    metrics.sharing_mismatch.get_or_create(&Resource { resource }).set(1);
                }
                Finding::Cleared { resource } => {
                    tracing::info!(%resource, "resolved: the sharing labels and the node's allocatable agree");
                    metrics.sharing_mismatch.get_or_create(&Resource { resource }).set(0);
                }
            }
        }
    }
}
