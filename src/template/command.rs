//! `nvlabel template` as a command: the pool's GPUs from a snapshot, the catalogue or the
//! cluster's nodes, its template, and the form asked for; what a template leaves out is said on
//! stderr, each key once with why, so stdout stays what the autoscaler reads.

use super::catalogue::{self, CatalogueError};
use super::cluster::{self, ClusterError};
use super::forms::{self, Form, FormError};
use super::{of_snapshot, Pins, Template};
use crate::labels::LabelConfig;
use crate::snapshot::{Snapshot, SnapshotError};
use std::path::PathBuf;

/// Where the pool's GPUs come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolSource {
    /// `--snapshot FILE`: one node of the kind, as `nvlabel probe` saw it.
    Snapshot(PathBuf),
    /// `--gpu NAME --count N [--mig-layout PROFILES]`: the built-in catalogue.
    Catalogue {
        /// The NVML name, `gpu.model` or PCI device id.
        gpu: String,
        /// GPUs per node.
        count: u32,
        /// Each GPU's MIG profiles (`all-1g.10gb`, or comma-separated); MIG off without.
        layout: Option<String>,
    },
    /// `--from-cluster --pool-label KEY [--pool NAME]`: the labels the pool's nodes carry.
    Cluster {
        /// The label whose value names a node's pool.
        pool_label: String,
        /// The one pool to print; every pool without.
        pool: Option<String>,
    },
}

/// What `nvlabel template` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateConfig {
    /// The pool's GPUs.
    pub source: PoolSource,
    /// The labelers' configuration (the sharing config the pool's nodes select, the MIG
    /// strategy, extended labels, the allocation mode).
    pub labels: LabelConfig,
    /// The driver and machine type the pool pins.
    pub pins: Pins,
    /// `--format`.
    pub form: Form,
    /// `--name`: the NodePool's (or slice's node's) name.
    pub name: Option<String>,
}

/// Why no template was printed.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The snapshot could not be read.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The catalogue could not make the node.
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    /// The form cannot hold the template.
    #[error(transparent)]
    Form(#[from] FormError),
    /// The nodes could not be listed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// No API client.
    #[error(transparent)]
    Client(#[from] crate::kubeapi::ClientError),
    /// `--pool` names a pool no node is in.
    #[error("--pool {pool}: no node has {pool_label}={pool}; the pools are: {}", if known.is_empty() { "(none)".to_string() } else { known.join(", ") })]
    NoSuchPool {
        /// `--pool-label`.
        pool_label: String,
        /// `--pool`.
        pool: String,
        /// The pools there are.
        known: Vec<String>,
    },
    /// No node has the pool label at all.
    #[error("--pool-label {0}: no node carries it, so there is no pool to learn")]
    NoPools(String),
}

impl crate::exit::Classify for TemplateError {
    /// The input named on the command line, but for the API's own failures.
    fn is_bad_configuration(&self) -> bool {
        match self {
            TemplateError::Snapshot(e) => e.is_bad_configuration(),
            TemplateError::Catalogue(e) => e.is_bad_configuration(),
            TemplateError::Form(e) => e.is_bad_configuration(),
            TemplateError::Cluster(e) => e.is_bad_configuration(),
            TemplateError::Client(e) => e.is_bad_configuration(),
            TemplateError::NoSuchPool { .. } | TemplateError::NoPools(_) => true,
        }
    }
}

/// The templates `config` asks for, each with its pool's name, every one made before any is
/// printed; `connect` is awaited only for `--from-cluster`.
pub async fn templates<F>(
    config: &TemplateConfig,
    connect: F,
) -> Result<Vec<(String, Template)>, TemplateError>
where
    F: std::future::Future<Output = Result<kube::Client, crate::kubeapi::ClientError>>,
{
    let one = |node: Snapshot| {
        vec![(config.name.clone().unwrap_or_else(|| "gpu".into()), of_snapshot(&node, &config.labels))]
    };
    Ok(match &config.source {
        PoolSource::Snapshot(path) => one(config.pins.apply(Snapshot::load(path)?)),
        PoolSource::Catalogue { gpu, count, layout } => {
            let entry = catalogue::find(gpu)?;
            let mut made = one(config.pins.apply(entry.node(*count, layout.as_deref())?));
            made[0].1.warnings.extend(entry.memory_note());
            if config.labels.extended {
                let why = "a node's topology (NVLink, PCIe, NUMA, GPUDirect) is known from its snapshot only";
                made[0]
                    .1
                    .left_out
                    .push(super::LeftOut { key: "the topology labels".into(), why: why.into() });
            }
            made
        }
        PoolSource::Cluster { pool_label, pool } => {
            let nodes = cluster::list(connect.await?, pool_label).await?;
            let mut pools = cluster::pools(&nodes, pool_label);
            if pools.is_empty() {
                return Err(TemplateError::NoPools(pool_label.clone()));
            }
            if let Some(p) = pool {
                let known = pools.keys().cloned().collect();
                let Some(one) = pools.remove(p) else {
                    return Err(TemplateError::NoSuchPool {
                        pool_label: pool_label.clone(),
                        pool: p.clone(),
                        known,
                    });
                };
                pools = [(p.clone(), one)].into();
            }
            pools.into_iter().map(|(name, p)| (name, p.template())).collect()
        }
    })
}

/// `nvlabel template`: the text to print. What each template leaves out is logged, by pool.
pub async fn run<F>(config: &TemplateConfig, connect: F) -> Result<String, TemplateError>
where
    F: std::future::Future<Output = Result<kube::Client, crate::kubeapi::ClientError>>,
{
    let all = templates(config, connect).await?;
    let name = match &config.source {
        PoolSource::Cluster { pool: None, .. } => None,
        _ => config.name.as_deref(),
    };
    let text = forms::render_all(&all, config.form, name)?;
    for (pool, t) in &all {
        if config.form == Form::ClusterApi && t.capacity.len() > 1 {
            // Its provider reads one GPU type: the others are said, never dropped in silence.
            let carried = forms::capi_gpu(t).map(|(r, _)| r.clone()).unwrap_or_default();
            let others: Vec<String> =
                t.capacity.iter().filter(|(r, _)| **r != carried).map(|(r, n)| format!("{r}={n}")).collect();
            tracing::warn!(%pool, gpu_type = %carried, "cluster-api's annotations carry one GPU resource; not carried: {}", others.join(", "));
        }
        for l in &t.left_out {
            tracing::warn!(%pool, key = %l.key, "left out of the template: {}", l.why);
        }
        for w in &t.warnings {
            tracing::warn!(%pool, "{w}");
        }
    }
    Ok(text)
}
