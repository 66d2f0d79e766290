//! The resolver: GFD's defaults, precedence, env quirks, value syntax and error origins.
use super::*;
use crate::config::file::FileFlags;
use crate::config::settings::DEFAULT_OUTPUT_FILE;
use crate::duration::Interval;
use crate::labels::MigStrategy;
use std::collections::HashMap;
use std::path::Path;

fn resolve(args: &[&str], env: &[(&str, &str)]) -> Result<Settings, CliError> {
    // A value its flag's parser refuses stops at the command line, named as the resolver names it.
    let cli = Cli::try_from_args(std::iter::once("nvlabel").chain(args.iter().copied()))
        .map_err(|e| invalid_on_command_line(&e).unwrap_or_else(|| panic!("{e}")))?;
    let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Settings::resolve(&cli, &|k| env.get(k).cloned())
}

#[test]
fn gfd_defaults() {
    let s = resolve(&[], &[]).unwrap();
    assert_eq!(s.mig_strategy, MigStrategy::None);
    assert!(s.fail_on_init_error);
    assert!(!s.oneshot);
    assert!(!s.no_timestamp);
    assert!(s.use_node_feature_api);
    assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(60)));
    assert_eq!(s.output_file, DEFAULT_OUTPUT_FILE);
    assert_eq!(s.probe.machine_type_file, PathBuf::from("/sys/class/dmi/id/product_name"));
    assert_eq!(s.namespace, "default");
    assert_eq!((s.kube_api_qps, s.kube_api_burst), (5.0, 10));
    assert_eq!(s.probe.library, PathBuf::from("libnvidia-ml.so.1"));
}

#[test]
fn command_line_beats_env_beats_default() {
    let env = [("GFD_MIG_STRATEGY", "single"), ("MIG_STRATEGY", "mixed")];
    assert_eq!(resolve(&[], &env).unwrap().mig_strategy, MigStrategy::Single);
    assert_eq!(resolve(&[], &env[1..]).unwrap().mig_strategy, MigStrategy::Mixed);
    assert_eq!(resolve(&["--mig-strategy", "none"], &env).unwrap().mig_strategy, MigStrategy::None);
    assert!(!resolve(&["--oneshot=false"], &[("GFD_ONESHOT", "true")]).unwrap().oneshot);
}

#[test]
fn the_first_defined_env_var_wins_even_when_empty() {
    let s = resolve(&[], &[("GFD_FAIL_ON_INIT_ERROR", ""), ("FAIL_ON_INIT_ERROR", "true")]).unwrap();
    assert!(!s.fail_on_init_error, "an empty boolean env var is false");
    let s = resolve(&[], &[("GFD_OUTPUT_FILE", "")]).unwrap();
    assert_eq!(s.output_file, "", "an empty string env var is used verbatim");
}

#[test]
fn booleans_take_flag_and_equals_forms() {
    assert!(resolve(&["--oneshot"], &[]).unwrap().oneshot);
    assert!(resolve(&["--oneshot=True"], &[]).unwrap().oneshot);
    assert!(!resolve(&["--use-node-feature-api=false"], &[]).unwrap().use_node_feature_api);
    assert!(!resolve(&["--fail-on-init-error=0"], &[]).unwrap().fail_on_init_error);
    assert!(resolve(&[], &[("GFD_ONESHOT", "T")]).unwrap().oneshot);
    let err = resolve(&[], &[("GFD_ONESHOT", "yes")]).unwrap_err().to_string();
    assert!(err.contains("GFD_ONESHOT") && err.contains("\"yes\""), "{err}");
}

#[test]
fn output_file_empty_means_stdout() {
    assert_eq!(resolve(&["--output-file", ""], &[]).unwrap().output_file, "");
    assert_eq!(resolve(&["--output-file="], &[]).unwrap().output_file, "");
    assert_eq!(resolve(&["-o", "/tmp/x"], &[]).unwrap().output_file, "/tmp/x");
    assert_eq!(resolve(&["--output", "/tmp/y"], &[]).unwrap().output_file, "/tmp/y");
}

#[test]
fn sleep_interval_syntax() {
    let s = resolve(&[], &[("GFD_SLEEP_INTERVAL", "90")]).unwrap();
    assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(90)));
    assert_eq!(s.notes.len(), 1, "a bare number is logged as seconds");
    assert_eq!(resolve(&["--sleep-interval", "infinite"], &[]).unwrap().sleep_interval, Interval::Infinite);
    let err = resolve(&[], &[("GFD_SLEEP_INTERVAL", "1d")]).unwrap_err().to_string();
    assert!(err.contains("GFD_SLEEP_INTERVAL") && err.contains("\"1d\""), "{err}");
    let s = resolve(&[], &[("GFD_SLEEP_INTERVAL", "")]).unwrap();
    assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(60)), "empty is ignored");
}

#[test]
fn bad_values_name_the_source() {
    let err = resolve(&[], &[("MIG_STRATEGY", "bogus")]).unwrap_err().to_string();
    assert!(err.contains("\"MIG_STRATEGY\"") && err.contains("\"bogus\""), "{err}");
    let err = resolve(&["--device-discovery-strategy", "foo"], &[]).unwrap_err().to_string();
    assert!(err.contains("invalid --device-discovery-strategy option foo"), "{err}");
    assert!(resolve(&[], &[("KUBE_API_QPS", "")]).is_ok(), "empty numbers are ignored");
    assert!(resolve(&[], &[("KUBE_API_QPS", "fast")]).is_err());
}

#[test]
fn machine_type_follows_sysfs_root_unless_set() {
    let s = resolve(&["--sysfs-root", "/fake/sys"], &[]).unwrap();
    assert_eq!(s.probe.machine_type_file, PathBuf::from("/fake/sys/class/dmi/id/product_name"));
    let s = resolve(&["--machine-type-file", ""], &[]).unwrap();
    assert_eq!(s.probe.machine_type_file, PathBuf::from(""));
}

#[test]
fn config_file_flags_sit_between_env_and_default() {
    let file = crate::config::ConfigFile::parse(
        "flags:\n  migStrategy: mixed\n  failOnInitError: false\n  gfd:\n    oneshot: true\n    sleepInterval: 5s\n    outputFile: /x\n",
    )
    .unwrap();
    let cli = Cli::try_from_args(["nvlabel"]).unwrap();
    let path = Path::new("/etc/cfg.yaml");
    let with = |env: &[(&str, &str)]| {
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::resolve_with(&cli, &|k| env.get(k).cloned(), Some((path, &file.flags))).unwrap()
    };
    let s = with(&[]);
    assert_eq!(s.mig_strategy, MigStrategy::Mixed);
    assert!(!s.fail_on_init_error);
    assert!(s.oneshot);
    assert_eq!(s.output_file, "/x");
    assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(5)));
    assert_eq!(with(&[("MIG_STRATEGY", "single")]).mig_strategy, MigStrategy::Single, "env beats file");
    let cli = Cli::try_from_args(["nvlabel", "--mig-strategy", "none"]).unwrap();
    let s = Settings::resolve_with(&cli, &|_| None, Some((path, &file.flags))).unwrap();
    assert_eq!(s.mig_strategy, MigStrategy::None, "command line beats file");
    let bad = crate::config::ConfigFile::parse("flags:\n  migStrategy: yes\n").unwrap();
    let cli = Cli::try_from_args(["nvlabel"]).unwrap();
    let err = Settings::resolve_with(&cli, &|_| None, Some((path, &bad.flags))).unwrap_err().to_string();
    assert!(
        err.contains("flags.migStrategy in config file /etc/cfg.yaml") && err.contains("\"true\""),
        "{err}"
    );
}

#[test]
fn bad_command_line_values_are_rejected_by_the_parser() {
    assert!(Cli::try_from_args(["nvlabel", "--mig-strategy", "bogus"]).is_err());
    assert!(Cli::try_from_args(["nvlabel", "--oneshot=maybe"]).is_err());
}

/// The config file's `flags` for one row's key (`gfd.x` nests).
fn file_with(key: &str, value: &str) -> FileFlags {
    let yaml = match key.split_once('.') {
        Some((outer, inner)) => format!("flags:\n  {outer}:\n    {inner}: '{value}'\n"),
        None => format!("flags:\n  {key}: '{value}'\n"),
    };
    let file = crate::config::ConfigFile::parse(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e:?}"));
    assert!(file.warnings.is_empty(), "{key} is not a key the file reader knows: {:?}", file.warnings);
    file.flags
}

/// Two values for a flag the config file can set: the first is not the default, the second
/// differs from the first.
fn samples(flag: Flag) -> (&'static str, &'static str) {
    match flag {
        Flag::MigStrategy => ("single", "mixed"),
        Flag::FailOnInitError | Flag::UseNodeFeatureApi => ("false", "true"),
        Flag::ExtendedLabels | Flag::Oneshot | Flag::NoTimestamp | Flag::Health => ("true", "false"),
        Flag::HealthConditionType => ("FileGPUHealthy", "EnvGPUHealthy"),
        Flag::HealthIgnoreXids => ("13", "31"),
        Flag::HealthFatalXids => ("94", "43"),
        Flag::HealthXidThresholds => ("43:3/1m", "13:5/10m"),
        Flag::HealthTaintEffect => ("NoExecute", "None"),
        Flag::HealthExpectedGpus => ("8", "4"),
        Flag::HealthNvmlTimeout => ("10s", "1m"),
        Flag::HealthRecoveryHold => ("30s", "5m"),
        Flag::DeviceDiscoveryStrategy => ("nvml", "auto"),
        Flag::AllocationMode => ("dra", "auto"),
        Flag::SleepInterval => ("5s", "7s"),
        Flag::OutputFile => ("/file/out", "/env/out"),
        Flag::MachineTypeFile => ("/file/dmi", "/env/dmi"),
        _ => panic!("--{flag} can be set in the config file: give it two sample values here"),
    }
}

/// The rows with a config-file key: (flag, key).
fn file_keys() -> Vec<(Flag, &'static str)> {
    Flag::ALL.iter().filter_map(|f| Some((*f, row(*f).file?.key))).collect()
}

/// Every flag whose row has a config-file key, from the table: the file beats the default, env
/// beats the file, the command line beats env.
#[test]
fn every_config_file_flag_sits_between_env_and_default() {
    let path = Path::new("/etc/cfg.yaml");
    let defaults = resolve(&[], &[]).unwrap();
    let keys = file_keys();
    assert!(keys.len() >= 18, "{keys:?}");
    for (flag, key) in keys {
        let (in_file, in_env) = samples(flag);
        let env_name = row(flag).env[0];
        let with = |args: &[String], env: &[(&str, &str)]| {
            let cli = Cli::try_from_args(std::iter::once("nvlabel".to_string()).chain(args.iter().cloned()))
                .unwrap();
            let env: HashMap<String, String> =
                env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let flags = file_with(key, in_file);
            Settings::resolve_with(&cli, &|k| env.get(k).cloned(), Some((path, &flags)))
                .unwrap_or_else(|e| panic!("--{flag}: {e}"))
        };
        let flag_is = |v: &str| resolve(&[&format!("--{flag}={v}")], &[]).unwrap();
        let from_file = with(&[], &[]);
        assert_ne!(from_file, defaults, "flags.{key} in the config file is ignored");
        assert_eq!(from_file, flag_is(in_file), "flags.{key}: {in_file} reads as --{flag}={in_file}");
        assert_eq!(with(&[], &[(env_name, in_env)]), flag_is(in_env), "{env_name} beats flags.{key}");
        let cli = [format!("--{flag}={in_file}")];
        assert_eq!(with(&cli, &[(env_name, in_env)]), flag_is(in_file), "--{flag} beats {env_name}");
    }
}

/// The file reader knows exactly the rows' keys and the device plugin's: a field added to
/// [`FileFlags`] without a row naming its key fails to compile here, a row's key that the file
/// reader does not know fails with its warning.
#[test]
fn the_rows_keys_cover_every_field_of_the_file_flags() {
    let mut yaml = String::from("flags:\n  gfd:\n");
    for (flag, key) in file_keys() {
        if let Some(inner) = key.strip_prefix("gfd.") {
            yaml.push_str(&format!("    {inner}: '{}'\n", samples(flag).0));
        }
    }
    for (flag, key) in file_keys().into_iter().filter(|(_, k)| !k.contains('.')) {
        yaml.push_str(&format!("  {key}: '{}'\n", samples(flag).0));
    }
    for key in FileFlags::DEVICE_PLUGIN_KEYS {
        yaml.push_str(&format!("  {key}: 'true'\n"));
    }
    let file = crate::config::ConfigFile::parse(&yaml).unwrap();
    assert!(file.warnings.is_empty(), "{:?}", file.warnings);
    let FileFlags {
        mig_strategy,
        fail_on_init_error,
        mps_root,
        nvidia_driver_root,
        nvidia_dev_root,
        gdrcopy_enabled,
        gds_enabled,
        mofed_enabled,
        use_node_feature_api,
        device_discovery_strategy,
        plugin,
        gfd,
        extended_labels,
        allocation_mode,
        health,
        health_condition_type,
        health_ignore_xids,
        health_fatal_xids,
        health_xid_thresholds,
        health_taint_effect,
        health_expected_gpus,
        health_nvml_timeout,
        health_recovery_hold,
    } = file.flags;
    let crate::config::file::GfdFlags {
        oneshot,
        no_timestamp,
        sleep_interval,
        output_file,
        machine_type_file,
    } = gfd.unwrap();
    let set = [
        mig_strategy.is_some(),
        fail_on_init_error.is_some(),
        mps_root.is_some(),
        nvidia_driver_root.is_some(),
        nvidia_dev_root.is_some(),
        gdrcopy_enabled.is_some(),
        gds_enabled.is_some(),
        mofed_enabled.is_some(),
        use_node_feature_api.is_some(),
        device_discovery_strategy.is_some(),
        plugin.is_some(),
        extended_labels.is_some(),
        allocation_mode.is_some(),
        health.is_some(),
        health_condition_type.is_some(),
        health_ignore_xids.is_some(),
        health_fatal_xids.is_some(),
        health_xid_thresholds.is_some(),
        health_taint_effect.is_some(),
        health_expected_gpus.is_some(),
        health_nvml_timeout.is_some(),
        health_recovery_hold.is_some(),
        oneshot.is_some(),
        no_timestamp.is_some(),
        sleep_interval.is_some(),
        output_file.is_some(),
        machine_type_file.is_some(),
    ];
    assert!(set.iter().all(|s| *s), "{set:?}");
    assert_eq!(set.len(), file_keys().len() + FileFlags::DEVICE_PLUGIN_KEYS.len());
}

/// Defaults are declared on the command line (for `--help`) but applied last: a flag not given
/// parses as unset, so env and the config file can still set it.
#[test]
fn defaults_are_shown_but_not_parsed_as_given() {
    let cli = Cli::try_from_args(["nvlabel"]).unwrap();
    let parsed = format!("{cli:?}");
    assert!(!parsed.contains("Some("), "a default was taken as given: {parsed}");
    let with_defaults =
        crate::config::flags::command().get_arguments().filter(|a| a.get_default_values().len() == 1).count();
    assert!(with_defaults >= 20, "{with_defaults} flags declare a default");
    let env = [("GFD_SLEEP_INTERVAL", "7s"), ("NVLABEL_METRICS_ADDR", ":9090"), ("NVLABEL_SYSFS_ROOT", "/s")];
    let s = resolve(&[], &env).unwrap();
    assert_eq!(s.sleep_interval, Interval::Every(std::time::Duration::from_secs(7)));
    assert_eq!((s.metrics_addr.as_str(), s.probe.sysfs_root.as_path()), (":9090", Path::new("/s")));
    assert_eq!(resolve(&[], &[]).unwrap().metrics_addr, ":8080");
}

/// One parser per flag: a value its clap field refuses on the command line is refused from env
/// with the same reason, and the one-line error names it as the resolver names env's.
#[test]
fn the_command_line_and_env_share_each_flags_parser() {
    let cases = [
        ("health-recovery-hold", "NVLABEL_HEALTH_RECOVERY_HOLD", "bad"),
        ("health-expected-gpus", "NVLABEL_HEALTH_EXPECTED_GPUS", "0"),
        ("device-discovery-strategy", "DEVICE_DISCOVERY_STRATEGY", "tgra"),
        ("sleep-interval", "GFD_SLEEP_INTERVAL", "x"),
    ];
    for (flag, var, value) in cases {
        let reason = |e: CliError| match e {
            CliError::Invalid { reason, .. } => reason,
        };
        let from_env = reason(resolve(&[], &[(var, value)]).unwrap_err());
        let err = Cli::try_from_args(["nvlabel".to_string(), format!("--{flag}={value}")]).unwrap_err();
        let line = crate::config::usage::one_line(&err, &crate::config::flags::command());
        assert_eq!(line, format!("invalid value {value:?} for flag --{flag}: {from_env}"));
    }
}
