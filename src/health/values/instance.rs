//! One deployment of nvlabel among several (a Helm release): `--instance NAME`, its
//! ServiceAccount in `--namespace`, and the field manager its health is written under
//! (`nvlabel/<namespace>/<name>`), so two releases side by side each remove only their own.
//! What a release's retirement is, and how a daemon reads it, is [`crate::health::writing::retirement`].

use crate::kubeapi::FIELD_MANAGER;

/// How the field managers of instances begin (`nvlabel/<namespace>/<name>`).
const MANAGER_PREFIX: &str = "nvlabel/";
/// The longest field manager the API server stores.
const MANAGER_MAX: usize = 128;

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
