//! Health's Events on the Node: a `GpusRecovered` when a reboot cleared recorded faults, a
//! `GpuFaultCleared` for each fault cleared in place, a `ClearedByAdmin` naming the faults a
//! person cleared by hand, a Warning for each new fault, one for each warning episode that
//! began, and one naming another writer that overwrote the condition.

use super::{Target, Writer};
use crate::health::values::report::Report;
use crate::health::values::verdict::CLEARED_BY_ADMIN;
use crate::health::writing::api_failures::Call;
use crate::health::writing::events::{EventType, NodeEvents};
use futures::future::BoxFuture;

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::writers::events";

/// Sends the Events.
pub struct EventWriter {
    events: NodeEvents,
    /// Failed sends, said once, then at most once a minute, then resolved.
    failures: Call,
}

impl EventWriter {
    /// Events about Node `node`, reported by `instance`.
    pub fn new(client: kube::Client, node: &str, instance: &str) -> EventWriter {
        EventWriter {
            events: NodeEvents::new(client, node, instance, Default::default()),
            failures: Call::new("cannot send a GPU health Event", "GPU health Events are sent again"),
        }
    }

    /// Sends one Event about the Node whose UID is `uid`.
    async fn send(&mut self, kind: EventType, reason: &str, about: &str, note: &str, uid: Option<&str>) {
        let sent = self.events.send_asked(kind, reason, about, note, uid).await;
        self.failures.said(sent);
    }
}

impl Writer for EventWriter {
    fn write<'a>(&'a mut self, report: &'a Report, to: &'a Target<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let uid = to.node_uid.as_deref();
            if let Some(cleared) = &report.cleared {
                let (boot, faults) = (&cleared.boot_id, cleared.faults.join("; "));
                tracing::info!(target: LOG, boot_id = %boot, cleared = %faults, "the node rebooted: recorded GPU faults are cleared");
                let note =
                    format!("The node rebooted (boot id {boot}); earlier GPU faults are cleared: {faults}");
                self.send(EventType::Normal, "GpusRecovered", boot.as_str(), &note, uid).await;
            }
            if let Some(admin) = report.admin.as_ref().filter(|a| !a.faults.is_empty()) {
                let faults: Vec<&str> = admin.faults.iter().map(|e| e.text.as_str()).collect();
                let note = format!("GPU faults cleared by hand: {}", faults.join("; "));
                self.send(EventType::Normal, CLEARED_BY_ADMIN, &note, &note, uid).await;
            }
            for gone in &report.recovered {
                let about = &gone.entry.text;
                self.send(EventType::Normal, "GpuFaultCleared", about, &gone.text(), uid).await;
            }
            for entry in &report.new_faults {
                let reason = entry.recorded.fault.reason();
                self.send(EventType::Warning, reason, &entry.text, &entry.text, uid).await;
            }
            for warning in &report.warnings {
                let reason = warning.signal.reason();
                self.send(EventType::Warning, reason, &warning.gpu(), &warning.text(), uid).await;
            }
            if let Some(over) = &report.overwritten {
                let kind = &to.config.settings.condition_type;
                let note = format!(
                    "{} set the {kind} condition to {} ({}) over nvlabel's verdict; nvlabel writes its verdict back. Give the other writer a condition type of its own",
                    over.by, over.status, over.reason
                );
                self.send(EventType::Warning, "GpuHealthConditionOverwritten", &over.by, &note, uid).await;
            }
        })
    }
}
