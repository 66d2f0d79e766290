//! The checks every set of manifests a user applies must pass, whether it comes from the static
//! files under deploy/ or from the chart rendered with some values: every document read into its
//! k8s-openapi type with unknown fields rejected, the pods locked down, the container's flags
//! and env accepted by nvlabel itself, and the RBAC granting exactly the API calls the code makes.
#![allow(dead_code)]

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PodSpec, SecurityContext, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use nvlabel::config::{Cli, Settings};
use nvlabel::publish::ApiCall;
use serde_json::Value;

#[allow(unused_imports)]
pub use super::policy_checks::check_policy;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Read by the NVIDIA container runtime, not by nvlabel.
const RUNTIME_ENV: [&str; 2] = ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"];

/// The feature file's host directory, the only host path a pod may mount.
pub const FEATURES_D: &str = "/etc/kubernetes/node-feature-discovery/features.d";

/// Deserialises into `T`, failing on any field `T` does not have.
pub fn strict<T: serde::de::DeserializeOwned>(doc: &Value, what: &str) -> T {
    let mut unknown = Vec::new();
    let value: T = serde_ignored::deserialize(doc, |path| unknown.push(path.to_string()))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(unknown.is_empty(), "{what}: unknown fields {unknown:?}");
    value
}

/// The typed objects of one rendering.
#[derive(Default)]
pub struct Rendered {
    /// (what, namespace, pod spec) of each workload.
    pub pods: Vec<(String, String, PodSpec)>,
    pub namespaces: Vec<Namespace>,
    pub rules: Vec<(String, Option<String>, Vec<PolicyRule>)>,
    pub bindings: Vec<(String, Option<String>, String, Vec<String>)>,
    pub policies: Vec<ValidatingAdmissionPolicy>,
    pub policy_bindings: Vec<ValidatingAdmissionPolicyBinding>,
    pub services: Vec<Service>,
    pub config_maps: Vec<ConfigMap>,
    /// Kinds without a k8s-openapi type (the Prometheus Operator's ServiceMonitor and
    /// PrometheusRule).
    pub others: Vec<Value>,
    /// Helm hooks (`helm.sh/hook`), not part of the release: the uninstall Job and its RBAC.
    pub hooks: Vec<Value>,
}

/// Types every document of `docs` (`label` names the rendering in messages).
pub fn typed(label: &str, docs: &[Value]) -> Rendered {
    let mut r = Rendered::default();
    for doc in docs {
        if doc["metadata"]["annotations"].get("helm.sh/hook").is_some() {
            r.hooks.push(doc.clone());
            continue;
        }
        let kind = doc["kind"].as_str().unwrap().to_string();
        let what = format!("{label}: {kind} {}", doc["metadata"]["name"]);
        let subjects = |subs: Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
            subs.unwrap_or_default()
                .into_iter()
                .map(|s| format!("{}/{}/{}", s.kind, s.namespace.unwrap_or_default(), s.name))
                .collect()
        };
        let ns = doc["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "Namespace" => r.namespaces.push(strict(doc, &what)),
            "ServiceAccount" => drop(strict::<ServiceAccount>(doc, &what)),
            "ConfigMap" => r.config_maps.push(strict(doc, &what)),
            "Service" => r.services.push(strict(doc, &what)),
            "ServiceMonitor" | "PrometheusRule" => r.others.push(doc.clone()),
            "DaemonSet" => {
                let ds: DaemonSet = strict(doc, &what);
                r.pods.push((what, ns, ds.spec.template.spec.unwrap()));
            }
            "Job" => {
                let job: Job = strict(doc, &what);
                r.pods.push((what, ns, job.spec.unwrap().template.spec.unwrap()));
            }
            "ClusterRole" => {
                let cr: ClusterRole = strict(doc, &what);
                r.rules.push((cr.metadata.name.unwrap(), None, cr.rules.unwrap_or_default()));
            }
            "Role" => {
                let role: Role = strict(doc, &what);
                r.rules.push((
                    role.metadata.name.unwrap(),
                    role.metadata.namespace,
                    role.rules.unwrap_or_default(),
                ));
            }
            "ClusterRoleBinding" => {
                let b: ClusterRoleBinding = strict(doc, &what);
                r.bindings.push((b.role_ref.name, None, b.role_ref.kind, subjects(b.subjects)));
            }
            "RoleBinding" => {
                let b: RoleBinding = strict(doc, &what);
                r.bindings.push((
                    b.role_ref.name,
                    b.metadata.namespace,
                    b.role_ref.kind,
                    subjects(b.subjects),
                ));
            }
            "ValidatingAdmissionPolicy" => r.policies.push(strict(doc, &what)),
            "ValidatingAdmissionPolicyBinding" => r.policy_bindings.push(strict(doc, &what)),
            other => panic!("{what}: no check for kind {other}"),
        }
    }
    r
}

/// The container's env as the kubelet would set it for a pod in `namespace`.
pub fn container_env(c: &Container, namespace: &str) -> HashMap<String, String> {
    let mut env = HashMap::new();
    for e in c.env.iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => v.clone(),
            (None, Some(from)) => {
                let path = from.field_ref.as_ref().map(|f| f.field_path.as_str()).unwrap_or_default();
                match path {
                    "spec.nodeName" => "gpu-node-1".into(),
                    "metadata.name" => "nvlabel-abcde".into(),
                    "metadata.namespace" => namespace.into(),
                    other => panic!("unexpected fieldRef {other}"),
                }
            }
            _ => String::new(),
        };
        env.insert(e.name.clone(), value);
    }
    env
}

/// The Pod Security labels (`enforce`, `warn`, `audit`) of a namespace.
pub fn pod_security(ns: &Namespace) -> BTreeMap<String, String> {
    ns.metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("pod-security.kubernetes.io/")?.to_string(), v)))
        .collect()
}

/// The namespace enforces what the pods need, and the pods are locked down: non-root (root
/// without capabilities only for the feature file's root-owned host directory), no privilege,
/// read-only root, the downward-API env, resources, the GPU toleration.
pub fn check_locked_down(label: &str, r: &Rendered) {
    for ns in &r.namespaces {
        let levels = pod_security(ns);
        let file_mode = r.pods.iter().any(|(_, _, p)| !host_paths(p).is_empty());
        if file_mode {
            assert_eq!(levels["enforce"], "privileged", "{label}: a hostPath is refused below privileged");
            assert_eq!(levels["warn"], "restricted", "{label}: warn shows what was given up");
            assert_eq!(levels["audit"], "restricted", "{label}");
        } else {
            assert_eq!(levels["enforce"], "restricted", "{label}");
        }
    }
    for (what, namespace, pod) in &r.pods {
        let file_mode = !host_paths(pod).is_empty();
        let psc = pod.security_context.clone().expect("a pod securityContext");
        if file_mode {
            assert_eq!(psc.run_as_user, Some(0), "{what}: only root owns the root-owned features.d");
            assert_eq!(psc.run_as_non_root, Some(false), "{what}");
        } else {
            assert_eq!(psc.run_as_non_root, Some(true), "{what}");
            assert!(psc.run_as_user.is_some_and(|u| u != 0), "{what}: a non-root UID");
        }
        assert_eq!(psc.seccomp_profile.map(|s| s.type_), Some("RuntimeDefault".into()), "{what}");
        assert_ne!(pod.host_network, Some(true), "{what}");
        assert_ne!(pod.host_pid, Some(true), "{what}");
        assert!(
            pod.tolerations.iter().flatten().any(|t| t.key.as_deref() == Some("nvidia.com/gpu")),
            "{what}"
        );
        let paths = host_paths(pod);
        assert!(paths.iter().all(|p| p == FEATURES_D), "{what}: host paths {paths:?}");
        for c in pod.containers.iter().chain(pod.init_containers.iter().flatten()) {
            let sc = c.security_context.clone().expect("a container securityContext");
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
            assert_ne!(sc.privileged, Some(true), "{what}");
            if !file_mode {
                assert_ne!(sc.run_as_user, Some(0), "{what}");
            }
            let drop: Vec<String> = sc.capabilities.as_ref().and_then(|c| c.drop.clone()).unwrap_or_default();
            assert!(drop.contains(&"ALL".to_string()), "{what}: drop ALL capabilities");
            assert!(adds_nothing(&sc), "{what}");
            let res = c.resources.clone().expect("resources");
            assert!(
                res.requests.is_some_and(|r| r.contains_key("memory") && r.contains_key("cpu")),
                "{what}"
            );
            assert!(res.limits.is_some_and(|l| l.contains_key("memory")), "{what}");
            let env = container_env(c, namespace);
            for name in ["NODE_NAME", "POD_NAME", "POD_NAMESPACE"] {
                assert!(env.contains_key(name), "{what}: {name} from the downward API");
            }
            // Every GPU from the NVIDIA runtime; none on vfio nodes, which have no driver.
            let vfio = c.args.iter().flatten().any(|a| a == "--device-discovery-strategy=vfio");
            assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], if vfio { "void" } else { "all" }, "{what}");
        }
    }
}

fn adds_nothing(sc: &SecurityContext) -> bool {
    sc.capabilities.as_ref().and_then(|c| c.add.as_ref()).is_none_or(|a| a.is_empty())
}

/// The chart's default GPU-node labels, any one of which admits a node: NFD's PCI label for
/// NVIDIA as the GPU Operator's NFD configuration makes it, upstream NFD's default PCI labels
/// (display and 3D controller classes), NFD's CPU vendor label of an NVIDIA SoC (Jetson, IGX,
/// Thor), and the label set by hand.
pub const GPU_NODE_TERMS: [(&str, &str); 5] = [
    ("feature.node.kubernetes.io/pci-10de.present", "true"),
    ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
    ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
    ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
    ("nvidia.com/gpu.present", "true"),
];

/// The GPU Operator's label that is `true` while GPU clients may run on a node.
pub const CLIENT_LABEL: &str = "nvidia.com/gpu.deploy.client";

/// The required node-affinity terms of a pod, each as its expressions other than the arch
/// (`key=v1,v2` for `In`, `key!` for `DoesNotExist`); `[]` without a required node affinity.
pub fn gpu_node_terms(pod: &PodSpec) -> Vec<Vec<String>> {
    let na = pod.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
    let required = na.and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
    let terms = required.map(|r| r.node_selector_terms.as_slice()).unwrap_or_default();
    terms
        .iter()
        .map(|t| {
            let exprs = t.match_expressions.iter().flatten().filter(|e| e.key != "kubernetes.io/arch");
            exprs
                .map(|e| match e.operator.as_str() {
                    "In" => format!("{}={}", e.key, e.values.as_deref().unwrap_or_default().join(",")),
                    "DoesNotExist" => format!("{}!", e.key),
                    op => panic!("{e:?}: operator {op} is not expected"),
                })
                .collect()
        })
        .collect()
}

/// Asserts that the pod's node affinity is exactly the default GPU-node terms, in that order,
/// each twice: with the GPU Operator's client label absent, and with it `true`.
pub fn check_gpu_node_terms(what: &str, pod: &PodSpec) {
    let want: Vec<Vec<String>> = GPU_NODE_TERMS
        .iter()
        .flat_map(|(k, v)| {
            [format!("{CLIENT_LABEL}!"), format!("{CLIENT_LABEL}=true")].map(|c| vec![format!("{k}={v}"), c])
        })
        .collect();
    assert_eq!(gpu_node_terms(pod), want, "{what}: the node affinity admits GPU nodes not paused");
}

/// The host paths a pod mounts.
pub fn host_paths(pod: &PodSpec) -> Vec<String> {
    pod.volumes.iter().flatten().filter_map(|v| v.host_path.as_ref()).map(|h| h.path.clone()).collect()
}

/// The settings the container gets, through nvlabel's own parser and resolver.
pub fn settings_of(what: &str, namespace: &str, c: &Container) -> Settings {
    let args = std::iter::once("nvlabel".to_string()).chain(c.args.clone().unwrap_or_default());
    assert!(c.command.is_none(), "{what}: the image's entrypoint runs nvlabel");
    let cli = Cli::try_from_args(args).unwrap_or_else(|e| panic!("{what}: nvlabel rejects its args: {e}"));
    let env = container_env(c, namespace);
    for name in env.keys() {
        assert!(
            nvlabel::config::flags::env_vars().any(|v| v == name) || RUNTIME_ENV.contains(&name.as_str()),
            "{what}: nvlabel does not read env {name}"
        );
    }
    let (command, cli) = cli.split();
    let lookup = |k: &str| env.get(k).cloned();
    let settings = Settings::resolve(&cli, &lookup).unwrap_or_else(|e| panic!("{what}: {e}"));
    // Nothing accepted and ignored: no flag the binary would refuse, no env it would warn about.
    let warnings = nvlabel::config::modes::check(command, &cli.given, &lookup, &settings)
        .unwrap_or_else(|e| panic!("{what}: nvlabel refuses its args: {e}"));
    assert!(warnings.is_empty(), "{what}: {warnings:?}");
    settings
}

/// (scope, group, resource, verb): scope is `cluster` or the namespace a grant or call is in.
pub type Grant = (String, String, String, String);

/// The grants of a set of rules.
pub fn grants(scope: &str, rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in rules {
        // Only the instance's own ServiceAccount is granted by name (nvlabel reads or marks it by name).
        let resources = rule.resources.clone().unwrap_or_default();
        assert!(
            rule.resource_names.is_none() || resources == ["serviceaccounts"],
            "name-scoped rules are expected on the instance's ServiceAccount only: {resources:?}"
        );
        for g in rule.api_groups.iter().flatten() {
            for r in rule.resources.iter().flatten() {
                for v in &rule.verbs {
                    assert_ne!(v, "*", "no wildcard verbs");
                    out.insert((scope.to_string(), g.clone(), r.clone(), v.clone()));
                }
            }
        }
    }
    out
}

/// What the code calls, a namespaced call placed in `namespace`.
pub fn calls(list: &[ApiCall], namespace: &str) -> BTreeSet<Grant> {
    list.iter()
        .map(|c| {
            let scope = if c.namespaced { namespace } else { "cluster" };
            (scope.to_string(), c.group.to_string(), c.resource.to_string(), c.verb.to_string())
        })
        .collect()
}

/// The calls the rendering's workload makes, as nvlabel resolves its flags and env.
pub fn needed_calls(r: &Rendered) -> BTreeSet<Grant> {
    let (what, namespace, pod) = &r.pods[0];
    let settings = settings_of(what, namespace, &pod.containers[0]);
    let ns = settings.namespace.as_str();
    let mut needed = calls(&settings.target().unwrap().api_calls(!settings.oneshot), ns);
    if settings.config_dir.is_some() && !settings.oneshot {
        needed.extend(calls(nvlabel::kubeapi::node_view::API_CALLS, ns));
    }
    if settings.health.enabled {
        use nvlabel::health::writing::condition::API_CALLS;
        use nvlabel::health::writing::events::EVENTS_NAMESPACE;
        needed.extend(calls(API_CALLS, EVENTS_NAMESPACE));
        if settings.health.instance.is_some() {
            needed.extend(calls(nvlabel::health::writing::retirement::DAEMON_CALLS, ns));
        }
    }
    if settings.slices_wanted() {
        let slices = nvlabel::kubeapi::slices::API_CALLS;
        let used: Vec<_> = slices.iter().filter(|c| c.verb == "list" || !settings.oneshot).cloned().collect();
        needed.extend(calls(&used, ns));
    }
    if settings.health.enabled && settings.allocation_mode != nvlabel::labels::AllocationMode::DevicePlugin {
        needed.extend(calls(nvlabel::health::writing::taints::API_CALLS, ns));
    }
    needed
}

/// The RBAC grants exactly the calls the code makes, in their scope, to the pod's service
/// account only.
pub fn check_rbac_exact(label: &str, r: &Rendered) {
    assert_eq!(r.pods.len(), 1, "{label}: one workload");
    let (_, namespace, pod) = &r.pods[0];
    let sa = format!("ServiceAccount/{namespace}/{}", pod.service_account_name.as_deref().unwrap());
    let mut granted = BTreeSet::new();
    for (role, ns, kind, subjects) in &r.bindings {
        assert_eq!(subjects, &vec![sa.clone()], "{label}: bindings are for the pod's service account only");
        let (_, role_ns, rules) = r
            .rules
            .iter()
            .find(|(n, rns, _)| n == role && (kind == "ClusterRole" || rns == ns))
            .unwrap_or_else(|| panic!("{label}: no {kind} {role}"));
        // A ClusterRoleBinding grants everywhere; a RoleBinding only in its namespace, even
        // when it refers to a ClusterRole.
        let scope = ns.clone().unwrap_or_else(|| "cluster".to_string());
        if kind == "Role" {
            assert_eq!(role_ns, ns, "{label}: a Role is bound in its own namespace");
        }
        granted.extend(grants(&scope, rules));
    }
    assert_eq!(r.rules.len(), r.bindings.len(), "{label}: every role is bound");
    assert_eq!(
        granted,
        needed_calls(r),
        "{label}: RBAC must grant exactly the calls the code makes, in their scope"
    );
}
