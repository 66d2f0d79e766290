//! `nvlabel template`'s command line, and the [`TemplateConfig`] made from it. Its flags are read
//! from the command line alone (no env, no config-file `flags` but the sharing config's own
//! `migStrategy`, `extendedLabels` and `allocationMode`, which the pool's nodes would read): a
//! template is asked for on a workstation or in CI, where the GPU Operator's env means nothing
//! (`row.rs`' `COMMANDS` says so, and no row applies to them). Those it shares with the labeller
//! (the sharing config, the label options, the kubeconfig) are the labeller's own clap fields,
//! flattened; those it does not (`--snapshot`, one node of the pool rather than this node's facts;
//! `--gpu`; `--format`, the forms autoscalers read) are its own.

use super::arg_groups::{parse_bool, ConfigArgs, GpuLabelArgs, KubeconfigArgs};
use super::file::{ConfigError, ConfigFile};
use super::select::{self, SelectError};
use super::value_parsers::{choice, shown};
use crate::labels::{AllocationMode, LabelConfig, MigStrategy, Profile};
use crate::template::command::{PoolSource, TemplateConfig};
use crate::template::forms::Form;
use crate::template::{Pins, VersionError};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// What `nvlabel template --help` says after its flags: where they are read from, and the one
/// value of a shared flag a pool has no use for.
pub const READS: &str = "Every flag is read from this command line alone: no environment variable, and \
no config file `flags` but the sharing config's own migStrategy, extendedLabels and allocationMode, which \
the pool's nodes read (where --mig-strategy, --extended-labels or --allocation-mode is not given, the \
config file's value, then the default). --kubeconfig is read with --from-cluster only; a pool's \
--allocation-mode is device-plugin or dra (auto is decided on a node, by its ResourceSlices).";

/// `nvlabel template`'s flags.
#[derive(Debug, Default, Clone, Args)]
pub struct TemplateArgs {
    /// The pool's GPUs from the snapshot of one of its nodes (`nvlabel probe > node.yaml` there)
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// The pool's GPUs from the built-in catalogue: the NVML name ("NVIDIA H100 80GB HBM3"), the
    /// gpu.model value (h100-80gb-hbm3), the gpu.product value (NVIDIA-H100-80GB-HBM3) or the PCI
    /// device id (2330)
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
    /// With --gpu: GPUs per node, 1 to 64 [default: 1]
    #[arg(long, value_name = "N")]
    pub count: Option<u32>,
    /// With --gpu: each GPU's MIG profiles, comma-separated (3g.40gb,2g.20gb) or all-PROFILE (as
    /// many as fit); without it, MIG is off
    #[arg(long, value_name = "PROFILES")]
    pub mig_layout: Option<String>,
    /// The pools from the labels their nodes carry (a list of Nodes, read-only)
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub from_cluster: Option<bool>,
    /// With --from-cluster: the label whose value names a node's pool (karpenter.sh/nodepool,
    /// eks.amazonaws.com/nodegroup, cloud.google.com/gke-nodepool, node.kubernetes.io/instance-type)
    #[arg(long, value_name = "KEY")]
    pub pool_label: Option<String>,
    /// With --from-cluster: print this pool's template only [default: every pool's]
    #[arg(long, value_name = "NAME")]
    pub pool: Option<String>,
    /// With --from-cluster: the cluster's kubeconfig (the labeller's --kubeconfig).
    #[command(flatten)]
    pub api: KubeconfigArgs,
    /// The sharing config the pool's nodes use (the labeller's --config-file, --config-dir and
    /// --config-default).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Which labels the pool's GPUs get (the labeller's --mig-strategy, --extended-labels and
    /// --allocation-mode); a value not given is the sharing config's, then the default.
    #[command(flatten)]
    pub labels: GpuLabelArgs,
    /// The driver the pool pins (its image or AMI), as 550.54.15; without it (or a snapshot),
    /// the driver labels are left out
    #[arg(long, value_name = "VERSION")]
    pub driver_version: Option<String>,
    /// The CUDA version of that driver, as 12.4
    #[arg(long, value_name = "VERSION")]
    pub cuda_version: Option<String>,
    /// The DMI product name of the pool's machines (gpu.machine); without it (or a snapshot),
    /// gpu.machine is left out
    #[arg(long, value_name = "NAME")]
    pub machine_type: Option<String>,
    /// What to print: labels, json, karpenter, cluster-autoscaler, cluster-api or resourceslice
    #[arg(long, value_enum, default_value = shown(Form::default()), hide_possible_values = true)]
    pub format: Option<Form>,
    /// The NodePool's name (karpenter), or the node's and pool's (resourceslice) [default: the
    /// pool's, or gpu]
    #[arg(long)]
    pub name: Option<String>,
}

/// Why `nvlabel template`'s command line makes no template.
#[derive(Debug, thiserror::Error)]
pub enum TemplateArgsError {
    /// No source of GPUs.
    #[error("nvlabel template needs the pool's GPUs: --snapshot FILE, --gpu NAME --count N, or --from-cluster --pool-label KEY")]
    NoSource,
    /// More than one.
    #[error("{} together: give exactly one of --snapshot, --gpu and --from-cluster", given.join(" and "))]
    Sources {
        /// The ones given.
        given: Vec<&'static str>,
    },
    /// A flag that needs another.
    #[error("{flag} {value}: {why}")]
    Needs {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// What it needs.
        why: &'static str,
    },
    /// The sharing config, and the flag that named it (`--config-file`, or `--config-dir`
    /// with `--config-default`).
    #[error("{flag}: {source}")]
    Config {
        /// The flag.
        flag: &'static str,
        /// What is wrong with the file.
        source: ConfigError,
    },
    /// A value of the sharing config's `flags` the labeller would refuse.
    #[error("invalid value {value:?} for flags.{key} in config file {path}: {why}")]
    FileValue {
        /// The key under `flags`.
        key: &'static str,
        /// Its value.
        value: String,
        /// The file.
        path: String,
        /// What it may be.
        why: String,
    },
    /// The config directory.
    #[error("--config-dir: {0}")]
    Select(#[from] SelectError),
    /// A version flag.
    #[error(transparent)]
    Version(#[from] VersionError),
}

impl crate::exit::Classify for TemplateArgsError {
    /// The command line's, or the files it names.
    fn is_bad_configuration(&self) -> bool {
        match self {
            TemplateArgsError::Config { source, .. } => source.is_bad_configuration(),
            TemplateArgsError::Select(e) => e.is_bad_configuration(),
            TemplateArgsError::Version(e) => e.is_bad_configuration(),
            TemplateArgsError::NoSource
            | TemplateArgsError::Sources { .. }
            | TemplateArgsError::Needs { .. }
            | TemplateArgsError::FileValue { .. } => true,
        }
    }
}

impl TemplateArgs {
    /// The template asked for, every input read and checked.
    pub fn config(&self) -> Result<TemplateConfig, TemplateArgsError> {
        let source = self.source()?;
        let file = self.sharing_config()?;
        let flags = file.as_ref().map(|(_, f)| &f.flags);
        let GpuLabelArgs { mig_strategy, extended_labels, allocation_mode } = self.labels;
        let strategy_of_file: Option<MigStrategy> =
            file_value(file.as_ref(), "migStrategy", flags.and_then(|f| f.mig_strategy.as_ref()))?;
        let mode_of_file: Option<AllocationMode> =
            file_value(file.as_ref(), "allocationMode", flags.and_then(|f| f.allocation_mode.as_ref()))?;
        let mig_strategy = mig_strategy.or(strategy_of_file);
        let extended = extended_labels.or(flags.and_then(|f| f.extended_labels)).unwrap_or(false);
        let profile = match allocation_mode.or(mode_of_file).unwrap_or_default() {
            AllocationMode::DevicePlugin => Profile::DevicePlugin,
            AllocationMode::Dra => Profile::Dra,
            AllocationMode::Auto => {
                let why =
                    "a pool's allocation is device-plugin or dra: auto is decided on a node, by its slices";
                return Err(TemplateArgsError::Needs {
                    flag: "--allocation-mode",
                    value: "auto".into(),
                    why,
                });
            }
        };
        let labels = LabelConfig {
            mig_strategy: mig_strategy.unwrap_or(MigStrategy::None),
            sharing: file.map(|(_, f)| f.sharing).unwrap_or_default(),
            timestamp: None,
            extended,
            profile,
        };
        let pins = Pins::parse(
            self.driver_version.as_deref(),
            self.cuda_version.as_deref(),
            self.machine_type.as_deref(),
        )?;
        Ok(TemplateConfig {
            source,
            labels,
            pins,
            form: self.format.unwrap_or_default(),
            name: self.name.clone(),
        })
    }

    /// The kubeconfig of `--from-cluster`: empty means in-cluster (none), as the flag says in
    /// every command.
    pub fn kubeconfig(&self) -> Option<&str> {
        self.api.kubeconfig.as_deref().filter(|k| !k.is_empty())
    }

    /// Where the GPUs come from: exactly one source, with its own flags only.
    fn source(&self) -> Result<PoolSource, TemplateArgsError> {
        let from_cluster = self.from_cluster.unwrap_or(false);
        let given: Vec<&'static str> = [
            self.snapshot.is_some().then_some("--snapshot"),
            self.gpu.is_some().then_some("--gpu"),
            from_cluster.then_some("--from-cluster"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() > 1 {
            return Err(TemplateArgsError::Sources { given });
        }
        let needs = |flag, value: &dyn std::fmt::Display, why| TemplateArgsError::Needs {
            flag,
            value: value.to_string(),
            why,
        };
        if let (Some(c), None) = (self.count, &self.gpu) {
            return Err(needs("--count", &c, "counts the GPUs of --gpu, which is not given"));
        }
        if let (Some(l), None) = (&self.mig_layout, &self.gpu) {
            return Err(needs(
                "--mig-layout",
                l,
                "lays out the GPUs of --gpu (a snapshot has its own layout)",
            ));
        }
        for (flag, value) in [
            ("--pool-label", &self.pool_label),
            ("--pool", &self.pool),
            ("--kubeconfig", &self.api.kubeconfig),
        ] {
            if let (Some(v), false) = (value, from_cluster) {
                return Err(needs(flag, v, "is read with --from-cluster only"));
            }
        }
        if let (Some(dir), None) = (&self.config.config_dir, &self.config.config_default) {
            return Err(needs(
                "--config-dir",
                &dir.display(),
                "needs --config-default, the key the pool's nodes select",
            ));
        }
        if let Some(path) = &self.snapshot {
            return Ok(PoolSource::Snapshot(path.clone()));
        }
        if let Some(gpu) = &self.gpu {
            return Ok(PoolSource::Catalogue {
                gpu: gpu.clone(),
                count: self.count.unwrap_or(1),
                layout: self.mig_layout.clone(),
            });
        }
        if from_cluster {
            let Some(pool_label) = self.pool_label.clone() else {
                return Err(needs(
                    "--from-cluster",
                    &"true",
                    "needs --pool-label KEY, the label that names a node's pool",
                ));
            };
            return Ok(PoolSource::Cluster { pool_label, pool: self.pool.clone() });
        }
        Err(TemplateArgsError::NoSource)
    }

    /// The sharing config the pool's nodes read, if any, and where it was read.
    fn sharing_config(&self) -> Result<Option<(PathBuf, ConfigFile)>, TemplateArgsError> {
        let ConfigArgs { config_file, config_dir, config_default } = &self.config;
        // Empty is none, as the flag says in every command.
        let (flag, path) = match (config_file.as_deref().filter(|f| !f.is_empty()), config_dir) {
            (Some(f), _) => ("--config-file", Some(PathBuf::from(f))),
            (None, Some(dir)) => ("--config-dir", select::select(dir, None, config_default.as_deref())?),
            (None, None) => return Ok(None),
        };
        match path {
            Some(p) => match ConfigFile::load(&p) {
                Ok(file) => Ok(Some((p, file))),
                Err(source) => Err(TemplateArgsError::Config { flag, source }),
            },
            None => Ok(None),
        }
    }
}

/// A value of the sharing config's `flags` (`key`), read as the labeller reads it: one the
/// labeller would refuse is refused, naming the file, the key and the value.
fn file_value<T: ValueEnum>(
    file: Option<&(PathBuf, ConfigFile)>,
    key: &'static str,
    value: Option<&String>,
) -> Result<Option<T>, TemplateArgsError> {
    let (Some((path, _)), Some(value)) = (file, value) else { return Ok(None) };
    choice(value).map(Some).map_err(|why| TemplateArgsError::FileValue {
        key,
        value: value.clone(),
        path: path.display().to_string(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::flags::Cli;
    use clap::CommandFactory;

    /// Template's flags that share a name with one of the labeller's but mean something else: a
    /// node of the pool's snapshot, the catalogue's GPU, the form printed.
    const OWN: [&str; 3] = ["snapshot", "gpu", "format"];

    /// Every other flag of `nvlabel template` named as one of another command's is that
    /// command's clap field, flattened: its type, parser, default and help said once.
    #[test]
    fn flags_shared_with_the_labeller_are_its_declarations() {
        let top = Cli::command();
        let template = top.find_subcommand("template").unwrap();
        let elsewhere: Vec<&clap::Arg> = top
            .get_arguments()
            .chain(
                top.get_subcommands().filter(|s| s.get_name() != "template").flat_map(|s| s.get_arguments()),
            )
            .collect();
        let shape = |a: &clap::Arg| {
            let values: Vec<String> =
                a.get_possible_values().iter().map(|v| v.get_name().to_string()).collect();
            let defaults: Vec<String> =
                a.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect();
            (a.get_help().map(|h| h.to_string()), a.get_value_names().map(|v| v.to_vec()), values, defaults)
        };
        let mut shared = Vec::new();
        for arg in template.get_arguments().filter(|a| a.get_long().is_some_and(|l| l != "help")) {
            let long = arg.get_long().unwrap();
            let Some(other) = elsewhere.iter().find(|a| a.get_long() == Some(long)) else { continue };
            if OWN.contains(&long) {
                assert_ne!(shape(arg).0, shape(other).0, "--{long} is template's own: its help says so");
                continue;
            }
            assert_eq!(
                shape(arg),
                shape(other),
                "`nvlabel template` --{long} is not the labeller's declaration"
            );
            shared.push(long);
        }
        let want = [
            "kubeconfig",
            "config-file",
            "config-dir",
            "config-default",
            "mig-strategy",
            "extended-labels",
            "allocation-mode",
            "log-format",
        ];
        assert_eq!(shared, want);
    }
}
