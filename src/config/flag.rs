//! The words the flag table ([`super::rows`]), the resolver and their errors share: each flag by a
//! typed name (a misspelt flag fails to compile), and where a value came from.

/// Declares [`Flag`], one variant per long name.
macro_rules! flags {
    ($($variant:ident = $name:literal,)*) => {
        /// A flag of some command, by its long name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Flag {
            $(#[doc = concat!("`--", $name, "`.")] $variant,)*
        }

        impl Flag {
            /// Every flag, in the table's order (the order flags are resolved and checked in).
            pub const ALL: &'static [Flag] = &[$(Flag::$variant,)*];

            /// Its long name, as written after `--`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Flag::$variant => $name,)*
                }
            }
        }
    };
}

flags! {
    MigStrategy = "mig-strategy",
    NoTimestamp = "no-timestamp",
    ExtendedLabels = "extended-labels",
    HealthOnly = "health-only",
    AllNodes = "all-nodes",
    AllocationMode = "allocation-mode",
    FailOnInitError = "fail-on-init-error",
    MachineTypeFile = "machine-type-file",
    DeviceDiscoveryStrategy = "device-discovery-strategy",
    DriverRootCtrPath = "driver-root-ctr-path",
    ConfigFile = "config-file",
    ConfigDir = "config-dir",
    ConfigDefault = "config-default",
    NodeName = "node-name",
    Namespace = "namespace",
    PodName = "pod-name",
    Kubeconfig = "kubeconfig",
    KubeApiQps = "kube-api-qps",
    KubeApiBurst = "kube-api-burst",
    OutputFile = "output-file",
    UseNodeFeatureApi = "use-node-feature-api",
    Sink = "sink",
    Expiry = "expiry",
    Format = "format",
    Oneshot = "oneshot",
    SleepInterval = "sleep-interval",
    MetricsAddr = "metrics-addr",
    SharingCheckGrace = "sharing-check-grace",
    NvmlLibrary = "nvml-library",
    CudaLibrary = "cuda-library",
    HostRoot = "host-root",
    PciIds = "pci-ids",
    SysfsRoot = "sysfs-root",
    Snapshot = "snapshot",
    LogFormat = "log-format",
    Health = "health",
    HealthConditionType = "health-condition-type",
    HealthIgnoreXids = "health-ignore-xids",
    HealthFatalXids = "health-fatal-xids",
    HealthXidThresholds = "health-xid-thresholds",
    HealthExpectedGpus = "health-expected-gpus",
    HealthNvmlTimeout = "health-nvml-timeout",
    HealthRecoveryHold = "health-recovery-hold",
    HealthTaintEffect = "health-taint-effect",
    BootIdFile = "boot-id-file",
    Instance = "instance",
    Gpu = "gpu",
}

impl Flag {
    /// The flag of a long name (clap's), if it is one.
    pub fn named(long: &str) -> Option<Flag> {
        Flag::ALL.iter().copied().find(|f| f.name() == long)
    }
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a value came from, as errors and notes name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The command line: `flag --x`.
    CommandLine(Flag),
    /// An environment variable: `environment variable "X" (flag --x)`.
    Env {
        /// The variable.
        var: &'static str,
        /// Its flag.
        flag: Flag,
    },
    /// The config file's `flags`: `flags.key in config file PATH`.
    File {
        /// The key under `flags` (`migStrategy`, `gfd.oneshot`).
        key: &'static str,
        /// The file.
        path: String,
    },
    /// The flag's declared default: `the default of --x`.
    Default(Flag),
    /// Two flags whose values contradict each other: `--x and --y`.
    Both(Flag, Flag),
}

impl Origin {
    /// Whether the value was typed on the command line (a slip there is refused; the same from
    /// env, which one environment gives every mode, is only warned about).
    pub fn is_command_line(&self) -> bool {
        matches!(self, Origin::CommandLine(_))
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::CommandLine(flag) => write!(f, "flag --{flag}"),
            Origin::Env { var, flag } => write!(f, "environment variable {var:?} (flag --{flag})"),
            Origin::File { key, path } => write!(f, "flags.{key} in config file {path}"),
            Origin::Default(flag) => write!(f, "the default of --{flag}"),
            Origin::Both(a, b) => write!(f, "--{a} and --{b}"),
        }
    }
}

/// One flag's value, as text, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The text.
    pub value: String,
    /// Where it came from.
    pub origin: Origin,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts errors have always used (tests/local/input_errors.rs and others pin them).
    #[test]
    fn origins_read_as_errors_name_them() {
        let path = "/etc/cfg.yaml".to_string();
        let cases = [
            (Origin::CommandLine(Flag::Sink), "flag --sink"),
            (
                Origin::Env { var: "GFD_ONESHOT", flag: Flag::Oneshot },
                "environment variable \"GFD_ONESHOT\" (flag --oneshot)",
            ),
            (Origin::File { key: "gfd.oneshot", path }, "flags.gfd.oneshot in config file /etc/cfg.yaml"),
            (Origin::Default(Flag::SleepInterval), "the default of --sleep-interval"),
            (
                Origin::Both(Flag::HealthIgnoreXids, Flag::HealthFatalXids),
                "--health-ignore-xids and --health-fatal-xids",
            ),
        ];
        for (origin, text) in cases {
            assert_eq!(origin.to_string(), text);
        }
        assert_eq!(Flag::ALL.iter().filter(|f| Flag::named(f.name()) == Some(**f)).count(), Flag::ALL.len());
    }
}
