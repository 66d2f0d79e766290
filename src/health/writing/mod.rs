//! Health's writers, every API write of health's: what takes the judge's [`Report`] to the API,
//! as node-problem-detector's exporters take its problem monitors' status, each engine beside its
//! writer ([`condition`] and [`condition_writer`], [`taints`] and [`taint_writer`], [`events`]
//! and [`event_writer`]). Nothing here reads NVML or judges. The Node condition with its fault
//! record comes first ([`condition_writer`]; it is also where the record is read back at start,
//! and again after a clear by hand the judge obeyed), then each other
//! [`Writer`] in the order [`Writers::new`] lists them: the DRA device taints, then the Events
//! (after the condition, so a slow Event API does not hold it back). Once this instance is found
//! being uninstalled ([`crate::health::writing::retirement`]) nothing more is written.

mod after_failure;
mod api_failures;
pub mod condition;
pub mod condition_writer;
pub mod event_writer;
pub mod events;
pub mod guard;
pub mod retirement;
pub mod taint_api;
pub mod taint_names;
pub mod taint_spec;
pub mod taint_writer;
pub mod taints;

use crate::health::config::HealthConfig;
use crate::health::metrics::HealthMetrics;
use crate::health::values::report::Report;
use crate::health::writing::retirement::Retirement;
use crate::health::writing::taints::DeviceTaints;
use crate::kubeapi::object_watch::ObjectWatch;
use crate::kubeapi::slices::SliceWatch;
pub use condition_writer::{ConditionWriter, Recall};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use std::sync::Arc;
use std::time::Instant;

/// One way health's findings reach the API besides the condition.
pub trait Writer: Send {
    /// Writes this writer's part of `report` (an empty part writes nothing).
    fn write<'a>(&'a mut self, report: &'a Report, to: &'a Target<'a>) -> BoxFuture<'a, ()>;
}

/// What a writer is told besides the report.
pub struct Target<'a> {
    /// The Node's UID, once read (an Event names it).
    pub node_uid: Option<String>,
    /// The configuration in force (the struct the last reload handed over).
    pub config: &'a HealthConfig,
}

/// Every writer of health's, and whether this instance still writes.
pub struct Writers {
    /// The condition and its record.
    condition: ConditionWriter,
    /// With `--instance`: whether it is being uninstalled (then nothing more is written).
    retirement: Option<Retirement>,
    /// The other writers, in the order they write.
    others: Vec<Box<dyn Writer>>,
}

impl Writers {
    /// The writers for Node `node` as `config` says, through `client`; with `watch`, that
    /// Node's watch, another writer's change of the condition is written back over; with
    /// `taints`, the faulty GPUs' devices in those slices are tainted.
    pub fn new(
        config: &HealthConfig,
        node: &str,
        client: kube::Client,
        watch: Option<ObjectWatch<Node>>,
        metrics: Arc<HealthMetrics>,
        taints: Option<(DeviceTaints, SliceWatch)>,
    ) -> Writers {
        let others: Vec<Box<dyn Writer>> = [
            taints.map(|(taints, slices)| boxed(taint_writer::TaintWriter::new(taints, slices))),
            Some(boxed(event_writer::EventWriter::new(client.clone(), node, &config.event_instance(node)))),
        ]
        .into_iter()
        .flatten()
        .collect();
        Writers {
            condition: ConditionWriter::new(client.clone(), node, config, watch, metrics),
            retirement: config.instance.clone().map(|i| Retirement::new(client, i)),
            others,
        }
    }

    /// The record as the Node has it (see [`ConditionWriter::recall`]).
    pub async fn recall(&mut self) -> Recall {
        self.condition.recall().await
    }

    /// When a write of the condition is due (see [`ConditionWriter::due`]).
    pub fn due(&self) -> Option<Instant> {
        self.condition.due()
    }

    /// The condition's write that is due now.
    pub async fn write_due(&mut self) {
        self.condition.write_due(&mut self.retirement).await
    }

    /// Another writer's change of the condition the Node watch shows, once (its write-back is
    /// then due).
    pub fn overwritten(&mut self) -> Option<guard::Overwrite> {
        self.condition.overwritten()
    }

    /// Writes `report`: the condition where it changed, then each other writer's part.
    pub async fn export(&mut self, report: &Report, config: &HealthConfig) {
        if report.admin.is_some() && !self.retirement.as_ref().is_some_and(Retirement::known) {
            // A person wrote the condition: what it shows now is read again, not remembered.
            self.condition.refresh().await;
        }
        if let Some(verdict) = &report.verdict {
            self.condition.publish(verdict, &mut self.retirement).await;
        }
        // Only the condition's write asks the API whether the instance is retired.
        if self.retirement.as_ref().is_some_and(Retirement::known) {
            return;
        }
        let to = Target { node_uid: self.condition.uid(), config };
        for writer in &mut self.others {
            writer.write(report, &to).await;
        }
    }
}

fn boxed(writer: impl Writer + 'static) -> Box<dyn Writer> {
    Box::new(writer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer that notes what it was handed, under its name.
    struct Noting(&'static str, Arc<Mutex<Vec<String>>>);

    impl Writer for Noting {
        fn write<'a>(&'a mut self, report: &'a Report, to: &'a Target<'a>) -> BoxFuture<'a, ()> {
            let seen = format!("{}: {:?} on {}", self.0, report.faulty, to.config.settings.condition_type);
            self.1.lock().unwrap().push(seen);
            Box::pin(async {})
        }
    }

    /// A new writer is one more entry in the list: it gets every report, after those before it.
    #[tokio::test]
    async fn each_writer_gets_the_report_in_the_order_listed() {
        let mut config = HealthConfig::for_tests(Default::default());
        config.settings.boot_id_file = "/b".into();
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let mut writers = Writers::new(&config, "n1", client, None, Default::default(), None);
        let seen = Arc::new(Mutex::new(Vec::new()));
        writers.others = vec![boxed(Noting("first", seen.clone())), boxed(Noting("second", seen.clone()))];
        // No verdict: the condition writer asks nothing of the (unreachable) API.
        let report = Report { faulty: Some([("GPU-a".to_string(), "GpuLost")].into()), ..Report::default() };
        writers.export(&report, &config).await;
        let want = [
            "first: Some({\"GPU-a\": \"GpuLost\"}) on GPUHealthy",
            "second: Some({\"GPU-a\": \"GpuLost\"}) on GPUHealthy",
        ];
        assert_eq!(*seen.lock().unwrap(), want);
    }
}
