//! What the settings ask of the rest of nvlabel: where the probe reads, where labels go, what the
//! labelers are told.

use super::settings::Settings;
use crate::publish::Sink;

impl Settings {
    /// Where the probe reads: the options its rows wrote, reading the topology facts only for
    /// the extended labels, which alone use them.
    pub fn probe_options(&self) -> crate::probe::ProbeOptions {
        crate::probe::ProbeOptions { topology: self.extended_labels, ..self.probe.clone() }
    }

    /// Where labels go, as these settings ask.
    pub fn target(&self) -> Result<crate::publish::Target, crate::publish::SetupError> {
        use crate::publish::{SetupError, Target};
        let node = || self.node_name.clone().ok_or(SetupError::NodeName);
        Ok(match self.sink {
            Sink::Node => Target::Node(node()?),
            Sink::Gfd if self.use_node_feature_api => {
                if self.namespace.is_empty() {
                    return Err(SetupError::Namespace);
                }
                // `-o ""` without `--use-node-feature-api=false` is the commonest first slip.
                let to_print = self.output_file.is_empty();
                Target::NodeFeature {
                    namespace: self.namespace.clone(),
                    node: node().map_err(|e| if to_print { SetupError::NodeNameToPrint } else { e })?,
                    pod: self.pod_name.clone(),
                }
            }
            Sink::Gfd if self.output_file.is_empty() => Target::Stdout(self.format),
            Sink::Gfd => Target::File(self.output_file.clone().into(), self.expiry),
        })
    }

    /// Whether `--expiry`, if given, means something: only the feature file expires.
    pub(super) fn expiry_applies(&self) -> bool {
        self.expiry.is_none() || matches!(self.target(), Ok(crate::publish::Target::File(..)))
    }

    /// The labelers' configuration for `sharing` and a config-load `timestamp`.
    pub fn label_config(
        &self,
        sharing: crate::sharing::Sharing,
        timestamp: Option<u64>,
    ) -> crate::labels::LabelConfig {
        crate::labels::LabelConfig {
            mig_strategy: self.mig_strategy,
            sharing,
            timestamp,
            extended: self.extended_labels,
            profile: self.allocation_mode.fixed().unwrap_or_default(),
        }
    }
}
