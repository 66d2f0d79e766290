//! The settings turned into each room's own configuration: health's [`HealthConfig`], the
//! pass's [`PassConfig`] and the labelling loop's [`LoopConfig`] (with [`DaemonInputs`], the
//! loop's [`Inputs`]). The rooms define these types and never read [`Settings`]; a reload hands
//! them new values made here.

use super::settings::Settings;
use super::source::{ConfigSource, ConfigState, Loaded};
use crate::daemon::config::{Inputs, LoopConfig, Rejected};
use crate::duration::Interval;
use crate::health::config::HealthConfig;
use crate::pass::PassConfig;
use std::time::Duration;

/// Health's time between readings when labelling never repeats: health must still be looked at.
const HEALTH_EVERY_WITHOUT_INTERVAL: Duration = Duration::from_secs(60);

impl Settings {
    /// Health's configuration.
    pub fn health_config(&self) -> HealthConfig {
        let h = &self.health;
        HealthConfig {
            settings: h.clone(),
            node: self.node_name.clone(),
            pod: self.pod_name.clone(),
            instance: h.instance.clone().map(|name| crate::health::values::instance::Instance {
                namespace: self.namespace.clone(),
                name,
            }),
            taints_devices: self.allocation_mode != crate::labels::AllocationMode::DevicePlugin,
            probe: self.probe_options(),
            every: match self.sleep_interval {
                Interval::Every(d) => d.max(Duration::from_secs(1)),
                Interval::Infinite => HEALTH_EVERY_WITHOUT_INTERVAL,
            },
        }
    }

    /// Whether these settings need this node's ResourceSlices: `--allocation-mode auto` decides
    /// by them, and health in `dra` or `auto` taints their devices.
    pub fn slices_wanted(&self) -> bool {
        use crate::labels::AllocationMode;
        self.node_name.is_some()
            && match self.allocation_mode {
                AllocationMode::Auto => true,
                AllocationMode::Dra => self.health.enabled,
                AllocationMode::DevicePlugin => false,
            }
    }

    /// The pass's configuration with the config file's `sharing` and its load `timestamp`.
    pub fn pass_config(&self, sharing: crate::sharing::Sharing, timestamp: Option<u64>) -> PassConfig {
        PassConfig {
            snapshot: self.snapshot.clone(),
            probe: self.probe_options(),
            fail_on_init_error: self.fail_on_init_error,
            labels: self.label_config(sharing, timestamp),
        }
    }
}

impl Loaded {
    /// The pass's configuration for what is loaded.
    pub fn pass_config(&self) -> PassConfig {
        self.settings.pass_config(self.config.sharing.clone(), self.timestamp)
    }

    /// The labelling loop's configuration for what is loaded.
    pub fn loop_config(&self) -> LoopConfig {
        let s = &self.settings;
        LoopConfig {
            pass: self.pass_config(),
            allocation: s.allocation_mode,
            node: s.node_name.clone(),
            target: s.target().map_err(std::sync::Arc::new),
            interval: s.sleep_interval,
            nvml_timeout: s.health.nvml_timeout,
            sharing_check: s.extended_labels.then_some(s.sharing_check_grace),
            notes: s.notes.clone(),
            health: s.health_config(),
        }
    }
}

/// The configuration state as the labelling loop reads it: the loop's values, made again after
/// every change.
pub struct DaemonInputs {
    state: ConfigState,
    current: LoopConfig,
}

impl DaemonInputs {
    /// The loop's inputs from `state`.
    pub fn new(state: ConfigState) -> DaemonInputs {
        DaemonInputs { current: state.loaded().loop_config(), state }
    }
}

impl Inputs for DaemonInputs {
    fn current(&self) -> &LoopConfig {
        &self.current
    }

    fn reload(&mut self, force: bool) -> Result<bool, Rejected> {
        let changed = self.state.reload(force)?;
        if changed {
            self.current = self.state.loaded().loop_config();
        }
        Ok(changed)
    }

    fn set_label(&mut self, label: Option<String>) -> bool {
        self.state.set_label(label)
    }

    fn follows_label(&self) -> bool {
        matches!(self.state.source(), ConfigSource::Dir { .. })
    }

    fn watched_dirs(&self) -> Vec<std::path::PathBuf> {
        self.state.watched_dirs()
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::config::{HealthSettings, Judging};

    fn settings(args: &[&str]) -> Settings {
        let cli = crate::config::Cli::try_from_args(args.iter().copied()).unwrap();
        Settings::resolve(&cli, &|_| None).unwrap()
    }

    /// Every flag health takes arrives in its configuration.
    #[test]
    fn each_health_flag_arrives_in_health_config() {
        let s = settings(&[
            "nvlabel",
            "--health",
            "--node-name=n1",
            "--pod-name=p1",
            "--namespace=gpu",
            "--instance=vfio-nvlabel",
            "--health-condition-type=AcceleratedHardwareReady",
            "--health-ignore-xids=13,79",
            "--health-fatal-xids=31",
            "--health-xid-thresholds=43:3/1m",
            "--health-expected-gpus=8",
            "--boot-id-file=/b",
            "--health-taint-effect=NoExecute",
            "--allocation-mode=dra",
            "--health-nvml-timeout=7s",
            "--health-recovery-hold=30s",
            "--sysfs-root=/s",
            "--sleep-interval=5s",
        ]);
        let c = s.health_config();
        let want = HealthConfig {
            settings: HealthSettings {
                enabled: true,
                condition_type: "AcceleratedHardwareReady".into(),
                judging: Judging {
                    ignored_xids: [13, 79].into(),
                    fatal_xids: [31].into(),
                    expected_gpus: Some(8),
                    xid_thresholds: crate::health::judging::thresholds::parse("43:3/1m").unwrap(),
                },
                boot_id_file: "/b".into(),
                instance: Some("vfio-nvlabel".into()),
                taint_effect: crate::health::config::TaintEffect::NoExecute,
                nvml_timeout: Duration::from_secs(7),
                recovery_hold: Duration::from_secs(30),
            },
            node: Some("n1".into()),
            pod: Some("p1".into()),
            instance: Some(crate::health::values::instance::Instance {
                namespace: "gpu".into(),
                name: "vfio-nvlabel".into(),
            }),
            taints_devices: true,
            probe: s.probe_options(),
            every: Duration::from_secs(5),
        };
        assert_eq!(c, want);
        assert_eq!(c.probe.sysfs_root, std::path::PathBuf::from("/s"));
        let plain = settings(&["nvlabel", "--sleep-interval=infinite"]).health_config();
        assert!(!plain.settings.enabled && !plain.taints_devices);
        assert_eq!(plain.every, HEALTH_EVERY_WITHOUT_INTERVAL);
        assert_eq!(
            settings(&["nvlabel", "--sleep-interval=0s"]).health_config().every,
            Duration::from_secs(1)
        );
    }

    /// Every flag the pass takes arrives in its configuration.
    #[test]
    fn each_pass_flag_arrives_in_pass_config() {
        let s = settings(&[
            "nvlabel",
            "--snapshot=/snap.yaml",
            "--fail-on-init-error=false",
            "--extended-labels",
        ]);
        let c = s.pass_config(Default::default(), Some(7));
        assert_eq!(c.snapshot, Some("/snap.yaml".into()));
        assert!(!c.fail_on_init_error && c.labels.extended && c.probe.topology);
        assert_eq!(c.labels.timestamp, Some(7));
        assert_eq!(c.probe, s.probe_options());
    }
}
