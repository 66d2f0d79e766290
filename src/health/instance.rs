//! One deployment of nvlabel among several (a Helm release): `--instance NAME`, its
//! ServiceAccount in `--namespace`. Two releases side by side each write health under a field
//! manager of their own, so one release's uninstall (`nvlabel prune --health-only --all-nodes
//! --instance NAME`) removes exactly what its own daemons wrote and nothing of the other's. Those
//! daemons still run while the uninstall's hook does: before removing anything, the prune marks
//! the ServiceAccount ([`RETIRED_ANNOTATION`]), which the daemons read before and after each write
//! of theirs, so none of them writes health back. The mark goes with the ServiceAccount when the
//! release is deleted, and a new install starts unmarked.

use crate::kubeapi::errors::ApiFailure;
use crate::kubeapi::FIELD_MANAGER;
use crate::publish::ApiCall;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, Patch, PatchParams};

/// The annotation `nvlabel prune --instance` puts on the instance's ServiceAccount: its daemons
/// write no health after it (the value is when it was set).
pub const RETIRED_ANNOTATION: &str = "nvidia.com/gpu-health-retired";
/// How the field managers of instances begin (`nvlabel/<namespace>/<name>`).
const MANAGER_PREFIX: &str = "nvlabel/";
/// The longest field manager the API server stores.
const MANAGER_MAX: usize = 128;

/// What a daemon of an instance adds to health's calls: a read of its ServiceAccount before and
/// after it writes (never on a pass that writes nothing).
pub const DAEMON_CALLS: &[ApiCall] =
    &[ApiCall { namespaced: true, group: "", resource: "serviceaccounts", verb: "get" }];
/// What `nvlabel prune --health-only --instance` adds: the mark on the ServiceAccount.
pub const PRUNE_CALLS: &[ApiCall] =
    &[ApiCall { namespaced: true, group: "", resource: "serviceaccounts", verb: "patch" }];

/// A deployment of nvlabel: its ServiceAccount `name` in `namespace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Where the deployment runs (`--namespace`).
    pub namespace: String,
    /// Its ServiceAccount's name (`--instance`).
    pub name: String,
}

impl Instance {
    /// The field manager its health is written under: `nvlabel/<namespace>/<name>`, or a hash of
    /// both where that would be longer than the API server stores.
    pub fn manager(&self) -> String {
        let full = format!("{MANAGER_PREFIX}{}/{}", self.namespace, self.name);
        if full.len() <= MANAGER_MAX {
            return full;
        }
        // FNV-1a: stable across builds and platforms, unlike std's hasher.
        let hash = full
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        format!("{MANAGER_PREFIX}{hash:016x}")
    }
}

impl std::fmt::Display for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The field manager health writes under: the instance's, else nvlabel's own (as before
/// instances existed).
pub fn manager_of(instance: Option<&Instance>) -> String {
    instance.map_or_else(|| FIELD_MANAGER.to_string(), Instance::manager)
}

/// Whether `manager` is one health writes under (nvlabel's own or an instance's).
pub fn is_health_manager(manager: &str) -> bool {
    manager == FIELD_MANAGER || manager.starts_with(MANAGER_PREFIX)
}

/// An instance name: a ServiceAccount's name (a DNS subdomain).
pub fn name(text: &str) -> Result<Option<String>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if text.len() > 253 || !text.split('.').all(label_ok) {
        return Err("use the name of the deployment's ServiceAccount (lower-case letters, digits, '-' and '.'), such as nvlabel".into());
    }
    Ok(Some(text.to_string()))
}

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
                    tracing::info!(instance = %self.instance, "the instance's ServiceAccount is readable again");
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
                    tracing::warn!(error = %failure, "cannot tell whether this instance is being uninstalled; health goes on");
                }
                return false;
            }
        };
        tracing::info!(instance = %self.instance, reason = why, "GPU health retired: this instance is being uninstalled, so nothing more of health is written");
        self.retired = true;
        true
    }
}

/// Marks `instance` retired (before its health is pruned); `false` where its ServiceAccount is
/// already gone (no daemon of it can write then).
pub async fn retire(client: &kube::Client, instance: &Instance) -> Result<bool, ApiFailure> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &instance.namespace);
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_are_the_instances_own_and_fit_the_api_servers_limit() {
        let i = Instance { namespace: "gpu".into(), name: "vfio-nvlabel".into() };
        assert_eq!(i.manager(), "nvlabel/gpu/vfio-nvlabel");
        assert_eq!(manager_of(None), "nvlabel");
        let long = Instance { namespace: "n".repeat(63), name: "x".repeat(100) };
        assert!(long.manager().len() <= MANAGER_MAX && long.manager().starts_with(MANAGER_PREFIX));
        assert_ne!(long.manager(), Instance { name: "y".repeat(100), ..long.clone() }.manager());
        assert!(is_health_manager("nvlabel") && is_health_manager(&i.manager()));
        assert!(!is_health_manager("nvlabel-prune") && !is_health_manager("kubectl"));
    }

    #[test]
    fn instance_names_are_service_account_names() {
        assert_eq!(name("nvlabel").unwrap().as_deref(), Some("nvlabel"));
        assert_eq!(name("").unwrap(), None);
        for bad in ["Nvlabel", "a_b", "-a", "a..b", &"a".repeat(254)] {
            assert!(name(bad).is_err(), "{bad}");
        }
    }
}
