//! Health's monitor: a reader, a judge and the writers side by side, joined here. The [`Reader`]
//! reads the GPUs (and the [`NodeReader`] what the Node says), the [`Judge`] judges what they
//! read into a [`Report`], and the [`Writers`] write each report (the condition and its record,
//! device taints, Events). All read the one [`HealthConfig`] held here, the very struct the last
//! reload handed over, and the time of each look and event is health's one clock
//! ([`crate::health::now`]). The task that drives the monitor (its
//! timer, the event thread, reloads, shutdown) is [`crate::health::task`].

use super::HealthError;
use crate::health::config::HealthConfig;
use crate::health::judging::judge::{Judge, Look};
use crate::health::judging::outcome::Judged;
use crate::health::metrics::HealthMetrics;
use crate::health::now;
use crate::health::reading::boot::boot_id;
use crate::health::reading::node_said::NodeReader;
use crate::health::reading::reader::Reader;
use crate::health::values::reading::Event;
use crate::health::values::record::BootId;
use crate::health::values::report::{Cleared, Report};
use crate::health::writing::taints::DeviceTaints;
use crate::health::writing::{Recall, Writers};
use crate::kubeapi::object_watch::ObjectWatch;
use crate::kubeapi::slices::SliceWatch;
use crate::probe::{ProbeOptions, Session};
use k8s_openapi::api::core::v1::Node;
use std::sync::Arc;

/// The health state between passes.
pub struct Monitor {
    /// What both sides work by.
    config: Arc<HealthConfig>,
    /// Reads NVML.
    reader: Reader,
    /// Reads what the Node says.
    node: NodeReader,
    /// Judges what is read.
    judge: Judge,
    /// What is counted, the reader's hung calls among it.
    metrics: Arc<HealthMetrics>,
    /// Writes what the judge reports.
    writers: Writers,
}

impl Monitor {
    /// The monitor for `config`, reading NVML through `session` and publishing through
    /// `client`; with `node`, this Node's watch, the expected GPU count comes from its label, and
    /// with `taints`, the faulty GPUs' devices in those slices are tainted.
    pub fn new(
        config: &HealthConfig,
        client: kube::Client,
        session: Session,
        metrics: Arc<HealthMetrics>,
        node: Option<ObjectWatch<Node>>,
        taints: Option<(DeviceTaints, SliceWatch)>,
    ) -> Result<Monitor, HealthError> {
        let name = config.node.clone().ok_or(HealthError::NoApi)?;
        Ok(Monitor {
            reader: Reader::new(session)?,
            node: NodeReader::new(node.clone(), &config.settings.condition_type),
            judge: Judge::new(config, metrics.clone()),
            metrics: metrics.clone(),
            writers: Writers::new(config, &name, client, node, metrics, taints),
            config: Arc::new(config.clone()),
        })
    }

    /// The configuration the monitor works by now.
    pub fn config(&self) -> &Arc<HealthConfig> {
        &self.config
    }

    /// The probe options in force (the event thread's at start).
    pub fn probe_options(&self) -> &ProbeOptions {
        &self.config.probe
    }

    /// Takes up a reloaded configuration, whole: which Xids decide and the expected count (at
    /// the next reading, which says so), the NVML timeout, where NVML and sysfs are, and the
    /// device taints' effect (at the next sync). The condition type, `--health` itself and the
    /// allocation mode are start-only (a reload that changes them is rejected before it gets here).
    pub fn reconfigure(&mut self, config: Arc<HealthConfig>) {
        let (was, now) = (&self.config.settings.judging, &config.settings.judging);
        if was.ignored_xids != now.ignored_xids || was.fatal_xids != now.fatal_xids {
            let list = |xids: &std::collections::BTreeSet<u64>| {
                xids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
            };
            tracing::info!(ignored = %list(&now.ignored_xids), fatal = %list(&now.fatal_xids), "GPU health: the listed Xids changed");
        }
        self.config = config;
    }

    /// One health pass: read NVML, judge it into the record, write what changed.
    pub async fn pass(&mut self) {
        let look = self.look().await;
        self.judge_look(look).await;
    }

    /// Reads NVML once, and what hangs there: the look to judge.
    async fn look(&mut self) -> Look {
        let reading = self.reader.read(&self.config).await;
        let stall = self.reader.stall(&self.metrics, self.config.settings.nvml_timeout);
        self.judge.look(reading, stall, now())
    }

    /// Judges a look into the record and writes what changed; returns whether it was judged
    /// (not while the record is unknown: only its warnings are written then).
    async fn judge_look(&mut self, look: Look) -> bool {
        let judged = self.recall().await;
        let report = match judged {
            true => {
                let said = self.node.said(self.config.settings.judging.expected_gpus);
                self.judge.judge(look, said, &self.config)
            }
            false => look.unjudged(),
        };
        self.writers.export(&report, &self.config).await;
        judged
    }

    /// One NVML event, judged and its judgement said: a fault (new, or known already), no fault
    /// and the rule that says so, or what the driver's recovery action, read at once, decided.
    pub async fn event(&mut self, event: Event) {
        let found = match self.judge.event_fault(&event, &self.config, now()) {
            Judged::Fault(found) => found,
            Judged::NotAFault(why) => return why.log(&event),
            Judged::DriverDecides(xid) => {
                // The driver sets its recovery action with the Xid: read it now, not next pass.
                tracing::info!(%event, "Xid: the driver's recovery action decides; reading it now");
                let look = self.look().await.after(&xid);
                let said = look.driver_said(xid.index);
                let judged = self.judge_look(look).await;
                return said.log(&event, &xid, judged);
            }
        };
        if !self.recall().await {
            // Kept for the next pass, which retries reading the Node.
            tracing::warn!(%event, "GPU fault seen before the Node could be read; kept for the next pass");
            return self.judge.keep(found);
        }
        let report = self.judge.found(found, self.node.clear(), now());
        if report.new_faults.is_empty() {
            tracing::info!(%event, "GPU event that is a fault recorded already");
        }
        self.writers.export(&report, &self.config).await;
    }

    /// The Node changed: another writer's change of the condition is said and written back.
    pub async fn node_changed(&mut self) {
        let Some(over) = self.writers.overwritten() else { return };
        let report = Report { overwritten: Some(over), ..Report::default() };
        self.writers.export(&report, &self.config).await;
    }

    /// How long until a hung NVML call may start or end.
    pub fn stall_in(&self) -> std::time::Duration {
        self.reader.stall_in(self.config.settings.nvml_timeout)
    }

    /// Whether an NVML call started or stopped hanging: the condition written as it is then.
    pub async fn recheck_stall(&mut self) {
        let was = self.reader.stalled();
        let stall = self.reader.stall(&self.metrics, self.config.settings.nvml_timeout);
        if stall.is_some() == was {
            return;
        }
        if let Some(report) = self.judge.stall_changed(stall) {
            self.writers.export(&report, &self.config).await;
        }
    }

    /// When a write of the condition is due: a failed write's retry, a write-back.
    pub fn due(&self) -> Option<std::time::Instant> {
        self.writers.due()
    }

    /// The condition's write that is due now.
    pub async fn write_due(&mut self) {
        self.writers.write_due().await
    }

    /// Brings the device taints in line with the record and the slices (a device that appears
    /// in a slice after its GPU's fault gets its taint here).
    pub async fn sync_taints(&mut self) {
        let Some(faulty) = self.judge.faulty() else { return };
        let report = Report { faulty: Some(faulty), ..Report::default() };
        self.writers.export(&report, &self.config).await;
    }

    /// Whether the record is known now: read back from the Node the first time (a restart
    /// forgets nothing), and cleared when the boot id changed, which is reported at once. Not
    /// while the boot id or the Node cannot be read: nothing is judged then, so a recorded fault
    /// is never overwritten by a guess.
    async fn recall(&mut self) -> bool {
        let Some(boot) = self.boot_id() else { return false };
        let cleared = match self.judge.knows_record() {
            true => self.judge.rebooted(&boot),
            false => match self.writers.recall().await {
                Recall::NotYet => return false,
                Recall::Read(existing) => self.judge.recover(&boot, existing.as_ref()),
            },
        };
        if !cleared.is_empty() {
            // The node rebooted (while nvlabel ran, or while it was not running).
            let cleared = Cleared { boot_id: boot, faults: cleared };
            let report = Report { cleared: Some(cleared), ..Report::default() };
            self.writers.export(&report, &self.config).await;
        }
        true
    }
}

impl Monitor {
    /// This boot's id, from `--boot-id-file`; `None` (said) where it cannot be read: nothing is
    /// judged then, so a recorded fault is never overwritten by a guess.
    fn boot_id(&self) -> Option<BootId> {
        match boot_id(&self.config.settings.boot_id_file) {
            Ok(b) => Some(b),
            Err(e) => {
                // Said under the judge's target, where the line was before the rooms.
                tracing::error!(target: "nvlabel::health::judge", error = %e, "GPU health is not published without the boot id");
                None
            }
        }
    }
}
