//! One deployment of nvlabel among several (a Helm release): `--instance NAME`, its
//! ServiceAccount in `--namespace`. Two releases side by side each write health under a field
//! manager of their own, so one release's uninstall (`nvlabel prune --health-only --all-nodes
//! --instance NAME`) removes exactly what its own daemons wrote and nothing of the other's. Those
//! daemons still run while the uninstall's hook does: before removing anything, the prune marks
//! the ServiceAccount ([`RETIRED_ANNOTATION`]), which the daemons read before and after each write
//! of theirs, so none of them writes health back. The mark goes with the ServiceAccount when the
//! release is deleted, and a new install starts unmarked.

use crate::health::values::instance::Instance;
use crate::kubeapi::errors::ApiFailure;
use crate::publish::ApiCall;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams};

/// The target of this file's log lines: the module it was before health had rooms, so no
/// line an operator reads or filters on changed with the move.
const LOG: &str = "nvlabel::health::instance";

/// The annotation `nvlabel prune --instance` puts on the instance's ServiceAccount: its daemons
/// write no health after it (the value is when it was set).
pub const RETIRED_ANNOTATION: &str = "nvidia.com/gpu-health-retired";
/// What a daemon of an instance adds to health's calls: a read of its ServiceAccount before and
/// after it writes (never on a pass that writes nothing).
pub const DAEMON_CALLS: &[ApiCall] =
    &[ApiCall { namespaced: true, group: "", resource: "serviceaccounts", verb: "get" }];
/// What `nvlabel prune --health-only --instance` adds: the mark on the ServiceAccount.
pub const PRUNE_CALLS: &[ApiCall] =
    &[ApiCall { namespaced: true, group: "", resource: "serviceaccounts", verb: "patch" }];

/// Whether an instance's daemons must write no more health, read from its ServiceAccount.
pub struct Retirement {
    api: Api<ServiceAccount>,
    instance: Instance,
    /// Once seen, for good: the instance is being uninstalled.
    retired: bool,
    /// A read failure in force, said once.
    failing: bool,
}

impl Retirement {
    /// The check for `instance`.
    pub fn new(client: kube::Client, instance: Instance) -> Retirement {
        Retirement {
            api: Api::namespaced(client, &instance.namespace),
            instance,
            retired: false,
            failing: false,
        }
    }

    /// Whether the instance was found retired already (asks nothing).
    pub fn known(&self) -> bool {
        self.retired
    }

    /// Whether the instance is retired: its ServiceAccount is marked, being deleted or gone.
    /// Another failure to read it does not stop health (said once while it lasts).
    pub async fn retired(&mut self) -> bool {
        if self.retired {
            return true;
        }
        let why = match self.api.get(&self.instance.name).await {
            Ok(sa)
                if sa.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(RETIRED_ANNOTATION)) =>
            {
                "its ServiceAccount is marked by nvlabel prune (an uninstall)"
            }
            Ok(sa) if sa.metadata.deletion_timestamp.is_some() => "its ServiceAccount is being deleted",
            Ok(_) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!(target: LOG, instance = %self.instance, "the instance's ServiceAccount is readable again");
                }
                return false;
            }
            Err(kube::Error::Api(s)) if s.code == 404 => "its ServiceAccount is gone",
            Err(e) => {
                if !std::mem::replace(&mut self.failing, true) {
                    let failure = ApiFailure {
                        action: "read",
                        object: format!("ServiceAccount {}", self.instance),
                        verb: "get",
                        resource: "serviceaccounts",
                        source: e,
                    };
                    tracing::warn!(target: LOG, error = %failure, "cannot tell whether this instance is being uninstalled; health goes on");
                }
                return false;
            }
        };
        tracing::info!(target: LOG, instance = %self.instance, reason = why, "GPU health retired: this instance is being uninstalled, so nothing more of health is written");
        self.retired = true;
        true
    }
}

/// Marks `instance` retired (before its health is pruned); `false` where its ServiceAccount is
/// already gone (no daemon of it can write then).
pub async fn retire(client: &kube::Client, instance: &Instance) -> Result<bool, ApiFailure> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &instance.namespace);
    let now = crate::health::timestamp().to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {RETIRED_ANNOTATION: now}}});
    match api.patch(&instance.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(source) => Err(ApiFailure {
            action: "mark retired",
            object: format!("ServiceAccount {instance}"),
            verb: "patch",
            resource: "serviceaccounts",
            source,
        }),
    }
}
