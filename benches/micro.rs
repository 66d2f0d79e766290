//! Micro-benchmarks: labels from a snapshot (the largest fixture, mixed strategy, time-slicing),
//! sanitising and product shortening, config parsing.

use criterion::{criterion_group, criterion_main, Criterion};
use nvlabel::config::ConfigFile;
use nvlabel::labels::{compute, value, LabelConfig, MigStrategy};
use nvlabel::sharing::Sharing;
use nvlabel::snapshot::Snapshot;
use std::hint::black_box;
use std::path::Path;

fn repo(p: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn labels(c: &mut Criterion) {
    // 8 x A100 with 56 MIG devices, as the probe sees it (checked by the golden tests).
    let snap = Snapshot::load(&repo("testdata/golden/a100-mig-single.snapshot.yaml")).unwrap();
    let config = LabelConfig {
        mig_strategy: MigStrategy::Mixed,
        sharing: Sharing::time_slicing(&[("nvidia.com/gpu", 2), ("nvidia.com/mig-1g.5gb", 4)]),
        timestamp: Some(1_795_000_000),
        extended: true,
        profile: nvlabel::labels::Profile::DevicePlugin,
    };
    c.bench_function("labels/a100x8-56mig-mixed-timeslicing", |b| {
        b.iter(|| compute(black_box(&snap), &config))
    });
}

fn values(c: &mut Criterion) {
    let long = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition";
    c.bench_function("value/sanitise", |b| b.iter(|| value::sanitise(black_box("NVIDIA TITAN X (Pascal)"))));
    c.bench_function("value/product-shortened", |b| {
        b.iter(|| value::product(black_box(long), &["MIG", "1g.24gb.gfx", "SHARED"]))
    });
}

fn config(c: &mut Criterion) {
    let text = std::fs::read_to_string(repo("testdata/configs/time-slicing-mig-mixed.yaml")).unwrap();
    c.bench_function("config/parse-time-slicing", |b| {
        b.iter(|| ConfigFile::parse(black_box(&text)).unwrap())
    });
}

criterion_group!(benches, labels, values, config);
criterion_main!(benches);
