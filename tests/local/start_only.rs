//! A reload that changes what only a restart can change is rejected whole, with one line naming
//! the key and both values; the last good configuration stays. What may change (the ignored Xids)
//! is taken up.

use nvlabel::config::{Cli, ConfigSource, ConfigState};

fn state(file: &std::path::Path) -> ConfigState {
    let cli = Cli::try_from_args(["nvlabel", "--config-file", file.to_str().unwrap()]).unwrap();
    ConfigState::load(cli, Default::default(), ConfigSource::File(file.into()), None).unwrap()
}

#[test]
fn a_reload_changing_a_start_only_setting_is_rejected_and_the_rest_applies() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, "version: v1\nflags:\n  healthConditionType: GPUHealthy\n").unwrap();
    let mut config = state(&file);

    std::fs::write(&file, "version: v1\nflags:\n  healthConditionType: AcceleratedHardwareReady\n").unwrap();
    let e = config.reload(false).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "config file {}: flags.healthConditionType cannot change while nvlabel runs (it is \"GPUHealthy\", the file asks for \"AcceleratedHardwareReady\"); restart nvlabel to change it",
            file.display()
        )
    );
    assert_eq!(config.loaded().settings.health.condition_type, "GPUHealthy", "the last good one stays");

    std::fs::write(
        &file,
        "version: v1\nflags:\n  healthConditionType: GPUHealthy\n  healthIgnoreXids: \"13,79\"\n",
    )
    .unwrap();
    assert!(config.reload(false).unwrap(), "a change health can take up is applied");
    assert_eq!(config.loaded().settings.health.judging.ignored_xids, [13, 79].into_iter().collect());

    std::fs::write(&file, "version: v1\nflags:\n  health: true\n  healthIgnoreXids: \"13,79\"\n").unwrap();
    let e = config.reload(false).unwrap_err().to_string();
    assert!(e.contains("flags.health cannot change while nvlabel runs"), "{e}");
    assert!(!config.loaded().settings.health.enabled);
}
