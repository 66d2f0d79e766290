//! The real API server tier: the daemon, the chart and health against a real kube-apiserver
//! (`NVLABEL_KUBE_TEST_SERVER`; each test skips with one line without it). One test binary whose
//! files share the servers `common::apiserver` starts, one file at a time (`tests/README.md`).

#[path = "../common/mod.rs"]
mod common;

mod alerts_live;
mod chart_install;
mod chart_releases;
mod dra_real_api;
mod dra_unserved;
mod dra_wiring;
mod fences;
mod health_admin_clear;
mod health_memory;
mod health_overwrite;
mod health_platforms;
mod health_policy;
mod health_real_api;
mod health_recovery;
mod health_signals;
mod health_thresholds;
mod operator_health;
mod real_api;
mod real_api_daemon;
mod real_api_nodefeature;
mod real_api_outages;
mod template_real_api;
