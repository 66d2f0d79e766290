//! Each flag's environment variables: the one place their names are written. The resolver reads
//! them, `--help` shows them, and `main` reads the log format from them before anything else.

/// Each flag's environment variables, in precedence order (the first one defined wins, even
/// when empty, as urfave/cli does in GFD). The only place env names are written.
pub const FLAG_ENV: &[(&str, &[&str])] = &[
    ("mig-strategy", &["GFD_MIG_STRATEGY", "MIG_STRATEGY"]),
    ("fail-on-init-error", &["GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"]),
    ("oneshot", &["GFD_ONESHOT"]),
    ("no-timestamp", &["GFD_NO_TIMESTAMP"]),
    ("sleep-interval", &["GFD_SLEEP_INTERVAL"]),
    ("output-file", &["GFD_OUTPUT_FILE"]),
    ("machine-type-file", &["GFD_MACHINE_TYPE_FILE"]),
    ("config-file", &["GFD_CONFIG_FILE", "CONFIG_FILE"]),
    ("use-node-feature-api", &["GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"]),
    ("device-discovery-strategy", &["DEVICE_DISCOVERY_STRATEGY"]),
    ("driver-root-ctr-path", &["DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"]),
    ("kubeconfig", &["KUBECONFIG"]),
    ("kube-api-qps", &["KUBE_API_QPS"]),
    ("kube-api-burst", &["KUBE_API_BURST"]),
    // POD_NAMESPACE (what manifests usually pass) after GFD's NAMESPACE.
    ("namespace", &["NAMESPACE", "POD_NAMESPACE"]),
    ("node-name", &["NODE_NAME"]),
    ("pod-name", &["POD_NAME"]),
    ("config-dir", &["NVLABEL_CONFIG_DIR"]),
    ("config-default", &["NVLABEL_CONFIG_DEFAULT"]),
    ("expiry", &["NVLABEL_EXPIRY"]),
    ("sink", &["NVLABEL_SINK"]),
    ("metrics-addr", &["NVLABEL_METRICS_ADDR"]),
    ("format", &["NVLABEL_FORMAT"]),
    ("nvml-library", &["NVLABEL_NVML_LIBRARY"]),
    ("cuda-library", &["NVLABEL_CUDA_LIBRARY"]),
    ("host-root", &["NVLABEL_HOST_ROOT"]),
    ("pci-ids", &["NVLABEL_PCI_IDS"]),
    ("sysfs-root", &["NVLABEL_SYSFS_ROOT"]),
    ("snapshot", &["NVLABEL_SNAPSHOT"]),
    ("log-format", &["NVLABEL_LOG_FORMAT"]),
    ("extended-labels", &["NVLABEL_EXTENDED_LABELS"]),
    ("allocation-mode", &["NVLABEL_ALLOCATION_MODE"]),
    ("sharing-check-grace", &["NVLABEL_SHARING_CHECK_GRACE"]),
    ("health", &["NVLABEL_HEALTH"]),
    ("health-condition-type", &["NVLABEL_HEALTH_CONDITION_TYPE"]),
    ("health-ignore-xids", &["NVLABEL_HEALTH_IGNORE_XIDS"]),
    ("health-fatal-xids", &["NVLABEL_HEALTH_FATAL_XIDS"]),
    ("health-expected-gpus", &["NVLABEL_HEALTH_EXPECTED_GPUS"]),
    ("health-nvml-timeout", &["NVLABEL_HEALTH_NVML_TIMEOUT"]),
    ("boot-id-file", &["NVLABEL_BOOT_ID_FILE"]),
    ("health-taint-effect", &["NVLABEL_HEALTH_TAINT_EFFECT"]),
];

/// The env names of `flag` (its long name).
pub fn env_names(flag: &str) -> &'static [&'static str] {
    FLAG_ENV.iter().find(|(f, _)| *f == flag).map_or(&[], |(_, names)| names)
}

/// Every environment variable nvlabel reads: the flags' and the log filter.
pub fn env_vars() -> impl Iterator<Item = &'static str> {
    FLAG_ENV.iter().flat_map(|(_, names)| names.iter().copied()).chain(["RUST_LOG"])
}
