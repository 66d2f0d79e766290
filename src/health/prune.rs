//! `nvlabel prune`'s part for health: what `--health` left on the Node goes, so that no
//! remediation tool acts on a condition nothing watches any more. The condition is removed, not
//! set `Unknown`: NodeHealthCheck and Karpenter's node repair act on a condition of a type and
//! status they are configured with (NodeHealthCheck's own defaults treat `Ready=Unknown` as
//! unhealthy, and its users copy that for other conditions), while a condition that is absent
//! matches no rule of either.

use super::publish::NodeCondition;
use super::taints::{self, TaintError};
use crate::kubeapi::errors::ApiFailure;

/// Why health's traces could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// The condition and record could not be removed.
    #[error(transparent)]
    Condition(#[from] ApiFailure),
    /// The device taints could not be removed.
    #[error(transparent)]
    Taints(#[from] TaintError),
}

/// Removes this node's GPU health condition (of `--health-condition-type`), its fault record and
/// its device taints, where the command talks to the API.
pub async fn prune(
    settings: &crate::config::Settings,
    client: Option<&kube::Client>,
) -> Result<(), PruneError> {
    let (Some(client), Some(node)) = (client, &settings.node_name) else { return Ok(()) };
    let mut condition = NodeCondition::new(client.clone(), node, &settings.health.condition_type);
    if condition.remove().await? {
        tracing::info!(node = %node, "this node's GPU health condition and fault record removed");
    }
    taints::prune_for(settings, Some(client)).await?;
    Ok(())
}
