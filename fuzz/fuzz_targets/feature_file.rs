//! The feature-file writer's input: any snapshot text that parses is labelled, and every line of
//! the rendered file is a valid `key=value` NFD reads back unchanged.
#![no_main]

use nvlabel::labels::{compute, value, LabelConfig, MigStrategy};
use nvlabel::sharing::Sharing;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(snapshot) = nvlabel::snapshot::Snapshot::from_yaml(text) else { return };
    for mig_strategy in [MigStrategy::None, MigStrategy::Single, MigStrategy::Mixed] {
        let config = LabelConfig {
            mig_strategy,
            sharing: Sharing::time_slicing(&[("nvidia.com/gpu", 2)]),
            timestamp: None,
            extended: true,
        };
        let labels = compute(&snapshot, &config).labels;
        let file = nvlabel::publish::render::render_text(&labels);
        assert!(file.len() <= nvlabel::publish::render::NFD_MAX_FILE || labels.len() > 500);
        for line in file.lines() {
            let (k, v) = line.split_once('=').expect("key=value");
            assert!(value::is_valid_key(k) && value::is_valid_value(v), "{line}");
            assert_eq!(labels.get(k).map(String::as_str), Some(v));
        }
    }
});
