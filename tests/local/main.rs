//! The tests that need neither a Kubernetes API server nor an image: the binary, the daemon, the
//! mocked API, the fake NVML, the docs, the chart rendered by Helm (skipped without one). One test
//! binary, so the crate and its dependencies are linked once for all of them (`tests/README.md`).
//! `cargo test --test local` runs them, the quick tier's part of the integration tests.

#[path = "../common/mod.rs"]
mod common;

mod api_faults;
mod api_guards;
mod api_writers;
mod architecture;
mod catalogue;
mod chart;
mod chart_alerts;
mod chart_configs;
mod chart_dra;
mod chart_notes;
mod chart_platforms;
mod chart_refusals;
mod chart_values;
mod cli;
mod daemon;
mod daemon_clock;
mod daemon_process;
mod deploy;
mod device_taints;
mod doc_claims;
mod doc_commands;
mod doc_labels;
mod doc_selectors;
mod exit_status;
mod fault_matrix;
mod feature_file;
mod flag_docs;
mod golden;
mod golden_dra;
mod health;
mod health_api;
mod health_clear_conflict;
mod health_failures;
mod health_judgements;
mod health_nvlink;
mod health_session;
mod hostile;
mod hung_cuda_init;
mod hung_init;
mod hung_nvml;
mod input_errors;
mod log_lines;
mod messages;
mod node_watch;
mod operator;
mod pci_ids_search;
mod platforms;
mod properties;
mod publisher;
mod session;
mod slice_watch;
mod soak;
mod start_only;
mod template;
mod template_gfd;
mod template_list;
mod topology_faults;
mod writers;
