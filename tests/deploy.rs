//! Static checks of `deploy/` (no cluster here): every overlay is rendered with a small
//! kustomize equivalent (resources, and JSON6902 patches with a target), every document is read
//! into its k8s-openapi type with unknown fields rejected, the pods are locked down, the
//! container's flags and env are accepted by nvlabel itself, and the RBAC grants exactly the
//! API calls the code makes in that mode.

mod common;

use common::manifests::{deploy, render, MODES};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, PodSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use nvlabel::config::{Cli, Settings};
use nvlabel::publish::ApiCall;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Read by the NVIDIA container runtime, not by nvlabel.
const RUNTIME_ENV: [&str; 2] = ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"];

/// Deserialises into `T`, failing on any field `T` does not have.
fn strict<T: serde::de::DeserializeOwned>(doc: &Value, what: &str) -> T {
    let mut unknown = Vec::new();
    let value: T = serde_ignored::deserialize(doc, |path| unknown.push(path.to_string()))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(unknown.is_empty(), "{what}: unknown fields {unknown:?}");
    value
}

/// The typed objects of one rendered mode.
#[derive(Default)]
struct Rendered {
    pods: Vec<(String, PodSpec)>,
    rules: Vec<(String, Option<String>, Vec<PolicyRule>)>,
    bindings: Vec<(String, Option<String>, String, Vec<String>)>,
    policies: Vec<ValidatingAdmissionPolicy>,
    policy_bindings: Vec<ValidatingAdmissionPolicyBinding>,
}

fn typed(mode: &str) -> Rendered {
    let mut r = Rendered::default();
    for doc in render(&deploy().join(mode)) {
        let kind = doc["kind"].as_str().unwrap().to_string();
        let what = format!("{mode}: {kind} {}", doc["metadata"]["name"]);
        let subjects = |subs: Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
            subs.unwrap_or_default()
                .into_iter()
                .map(|s| format!("{}/{}/{}", s.kind, s.namespace.unwrap_or_default(), s.name))
                .collect()
        };
        match kind.as_str() {
            "Namespace" => drop(strict::<Namespace>(&doc, &what)),
            "ServiceAccount" => drop(strict::<ServiceAccount>(&doc, &what)),
            "ConfigMap" => drop(strict::<ConfigMap>(&doc, &what)),
            "DaemonSet" => {
                let ds: DaemonSet = strict(&doc, &what);
                r.pods.push((what, ds.spec.template.spec.unwrap()));
            }
            "Job" => {
                let job: Job = strict(&doc, &what);
                r.pods.push((what, job.spec.unwrap().template.spec.unwrap()));
            }
            "ClusterRole" => {
                let cr: ClusterRole = strict(&doc, &what);
                r.rules.push((cr.metadata.name.unwrap(), None, cr.rules.unwrap_or_default()));
            }
            "Role" => {
                let role: Role = strict(&doc, &what);
                r.rules.push((
                    role.metadata.name.unwrap(),
                    role.metadata.namespace,
                    role.rules.unwrap_or_default(),
                ));
            }
            "ClusterRoleBinding" => {
                let b: ClusterRoleBinding = strict(&doc, &what);
                r.bindings.push((b.role_ref.name, None, b.role_ref.kind, subjects(b.subjects)));
            }
            "RoleBinding" => {
                let b: RoleBinding = strict(&doc, &what);
                r.bindings.push((
                    b.role_ref.name,
                    b.metadata.namespace,
                    b.role_ref.kind,
                    subjects(b.subjects),
                ));
            }
            "ValidatingAdmissionPolicy" => r.policies.push(strict(&doc, &what)),
            "ValidatingAdmissionPolicyBinding" => r.policy_bindings.push(strict(&doc, &what)),
            other => panic!("{what}: no check for kind {other}"),
        }
    }
    r
}

#[test]
fn every_overlay_renders_into_known_types_without_unknown_fields() {
    for mode in MODES {
        let r = typed(mode);
        assert_eq!(r.pods.len(), 1, "{mode}: one workload");
    }
}

#[test]
fn unknown_fields_are_caught() {
    let mut doc = render(&deploy().join("node")).into_iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always".into();
    let caught = std::panic::catch_unwind(|| drop(strict::<DaemonSet>(&doc, "typo")));
    assert!(caught.is_err(), "a misspelt field must fail the check");
}

fn container_env(c: &Container) -> HashMap<String, String> {
    let mut env = HashMap::new();
    for e in c.env.iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => v.clone(),
            (None, Some(from)) => {
                let path = from.field_ref.as_ref().map(|f| f.field_path.as_str()).unwrap_or_default();
                match path {
                    "spec.nodeName" => "gpu-node-1".into(),
                    "metadata.name" => "nvlabel-abcde".into(),
                    "metadata.namespace" => "nvlabel".into(),
                    other => panic!("unexpected fieldRef {other}"),
                }
            }
            _ => String::new(),
        };
        env.insert(e.name.clone(), value);
    }
    env
}

/// The namespace's Pod Security labels in a rendered mode.
fn pod_security(mode: &str) -> BTreeMap<String, String> {
    let ns =
        render(&deploy().join(mode)).into_iter().find(|d| d["kind"] == "Namespace").expect("a namespace");
    let ns: Namespace = strict(&ns, mode);
    ns.metadata
        .labels
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("pod-security.kubernetes.io/")?.to_string(), v)))
        .collect()
}

#[test]
fn every_pod_is_locked_down() {
    for mode in MODES {
        // Only the feature-file mode has a host path, and with it root and a privileged namespace.
        let file_mode = mode == "nfd-file";
        let levels = pod_security(mode);
        if file_mode {
            assert_eq!(levels["enforce"], "privileged", "{mode}: a hostPath is refused below privileged");
            assert_eq!(levels["warn"], "restricted", "{mode}: warn shows what was given up");
            assert_eq!(levels["audit"], "restricted", "{mode}");
        } else {
            assert_eq!(levels["enforce"], "restricted", "{mode}");
        }
        for (what, pod) in typed(mode).pods {
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
            assert_eq!(pod.service_account_name.as_deref(), Some("nvlabel"), "{what}");
            assert!(
                pod.tolerations.iter().flatten().any(|t| t.key.as_deref() == Some("nvidia.com/gpu")),
                "{what}"
            );
            let host_paths: Vec<&str> = pod
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| v.host_path.as_ref())
                .map(|h| h.path.as_str())
                .collect();
            let expected: &[&str] =
                if file_mode { &["/etc/kubernetes/node-feature-discovery/features.d"] } else { &[] };
            assert_eq!(host_paths, expected, "{what}: host paths");
            for c in pod.containers.iter().chain(pod.init_containers.iter().flatten()) {
                let sc = c.security_context.clone().expect("a container securityContext");
                assert_eq!(sc.allow_privilege_escalation, Some(false), "{what}");
                assert_eq!(sc.read_only_root_filesystem, Some(true), "{what}");
                assert_ne!(sc.privileged, Some(true), "{what}");
                if !file_mode {
                    assert_ne!(sc.run_as_user, Some(0), "{what}");
                }
                let drop: Vec<String> =
                    sc.capabilities.as_ref().and_then(|c| c.drop.clone()).unwrap_or_default();
                assert!(drop.contains(&"ALL".to_string()), "{what}: drop ALL capabilities");
                assert!(sc.capabilities_add_is_empty(), "{what}");
                let res = c.resources.clone().expect("resources");
                assert!(
                    res.requests.is_some_and(|r| r.contains_key("memory") && r.contains_key("cpu")),
                    "{what}"
                );
                assert!(res.limits.is_some_and(|l| l.contains_key("memory")), "{what}");
                let env = container_env(c);
                for name in ["NODE_NAME", "POD_NAME", "POD_NAMESPACE"] {
                    assert!(env.contains_key(name), "{what}: {name} from the downward API");
                }
                assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], "all", "{what}");
            }
        }
    }
}

trait CapabilitiesAdd {
    fn capabilities_add_is_empty(&self) -> bool;
}

impl CapabilitiesAdd for k8s_openapi::api::core::v1::SecurityContext {
    fn capabilities_add_is_empty(&self) -> bool {
        self.capabilities.as_ref().and_then(|c| c.add.as_ref()).is_none_or(|a| a.is_empty())
    }
}

#[test]
fn daemonsets_probe_health_and_run_on_gpu_nodes_only() {
    for mode in ["nfd-file", "nfd-nodefeature", "node"] {
        for (what, pod) in typed(mode).pods {
            let c = &pod.containers[0];
            let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
                p.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone())
            };
            assert_eq!(path(&c.liveness_probe).as_deref(), Some("/healthz"), "{what}");
            assert_eq!(path(&c.readiness_probe).as_deref(), Some("/readyz"), "{what}");
            let terms = pod
                .affinity
                .unwrap()
                .node_affinity
                .unwrap()
                .required_during_scheduling_ignored_during_execution
                .unwrap();
            let keys: Vec<String> = terms
                .node_selector_terms
                .iter()
                .flat_map(|t| t.match_expressions.iter().flatten().map(|e| e.key.clone()))
                .collect();
            assert!(keys.contains(&"feature.node.kubernetes.io/pci-10de.present".to_string()), "{what}");
            assert!(c.args.iter().flatten().any(|a| a == "--config-dir=/etc/nvlabel/configs"), "{what}");
            assert!(
                c.volume_mounts.iter().flatten().any(|m| m.mount_path == "/etc/nvlabel/configs"),
                "{what}"
            );
        }
    }
}

/// The settings the container gets, through nvlabel's own parser and resolver.
fn settings_of(what: &str, c: &Container) -> Settings {
    let args = std::iter::once("nvlabel".to_string()).chain(c.args.clone().unwrap_or_default());
    assert!(c.command.is_none(), "{what}: the image's entrypoint runs nvlabel");
    let cli = Cli::try_from_args(args).unwrap_or_else(|e| panic!("{what}: nvlabel rejects its args: {e}"));
    let env = container_env(c);
    for name in env.keys() {
        assert!(
            nvlabel::config::flags::env_vars().any(|v| v == name) || RUNTIME_ENV.contains(&name.as_str()),
            "{what}: nvlabel does not read env {name}"
        );
    }
    Settings::resolve(&cli, &|k| env.get(k).cloned()).unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[test]
fn flags_and_env_are_ones_nvlabel_accepts() {
    let expect =
        [("nfd-file", "File"), ("nfd-nodefeature", "NodeFeature"), ("node", "Node"), ("job", "Node")];
    for (mode, kind) in expect {
        for (what, pod) in typed(mode).pods {
            let settings = settings_of(&what, &pod.containers[0]);
            let target = settings.target().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(format!("{target:?}").starts_with(kind), "{what}: {target:?}");
            if mode == "nfd-nodefeature" {
                assert_eq!(settings.namespace, "nvlabel", "{what}: the pod's own namespace");
            }
        }
    }
}

/// The (group, resource, verb) triples a set of rules grants.
/// (scope, group, resource, verb): scope is `cluster` or the namespace a grant or call is in.
type Grant = (String, String, String, String);

fn grants(scope: &str, rules: &[PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for rule in rules {
        assert!(rule.resource_names.is_none(), "name-scoped rules are not expected");
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
fn calls(list: &[ApiCall], namespace: &str) -> BTreeSet<Grant> {
    list.iter()
        .map(|c| {
            let scope = if c.namespaced { namespace } else { "cluster" };
            (scope.to_string(), c.group.to_string(), c.resource.to_string(), c.verb.to_string())
        })
        .collect()
}

#[test]
fn rbac_grants_exactly_what_the_code_calls_in_the_right_scope() {
    for mode in MODES {
        let r = typed(mode);
        let (what, pod) = &r.pods[0];
        let settings = settings_of(what, &pod.containers[0]);
        let ns = settings.namespace.as_str();
        let mut needed = calls(&settings.target().unwrap().api_calls(!settings.oneshot), ns);
        if settings.config_dir.is_some() && !settings.oneshot {
            needed.extend(calls(nvlabel::kubeapi::node_view::API_CALLS, ns));
        }
        let sa = "ServiceAccount/nvlabel/nvlabel".to_string();
        let mut granted = BTreeSet::new();
        for (role, namespace, kind, subjects) in &r.bindings {
            assert_eq!(
                subjects,
                &vec![sa.clone()],
                "{mode}: bindings are for nvlabel's service account only"
            );
            let (_, role_ns, rules) = r
                .rules
                .iter()
                .find(|(n, ns, _)| n == role && (kind == "ClusterRole" || ns == namespace))
                .unwrap_or_else(|| panic!("{mode}: no {kind} {role}"));
            // A ClusterRoleBinding grants everywhere; a RoleBinding only in its namespace, even
            // when it refers to a ClusterRole.
            let scope = match namespace {
                None => "cluster".to_string(),
                Some(ns) => ns.clone(),
            };
            if kind == "Role" {
                assert_eq!(role_ns, namespace, "{mode}: a Role is bound in its own namespace");
            }
            granted.extend(grants(&scope, rules));
        }
        assert_eq!(r.rules.len(), r.bindings.len(), "{mode}: every role is bound");
        assert_eq!(
            granted, needed,
            "{mode}: RBAC must grant exactly the calls the code makes, in their scope"
        );
    }
}

#[test]
fn node_writers_are_fenced_by_the_admission_policy() {
    for mode in ["node", "job"] {
        let r = typed(mode);
        assert_eq!(r.policies.len(), 1, "{mode}");
        let policy = &r.policies[0];
        let spec = policy.spec.as_ref().unwrap();
        let condition = &spec.match_conditions.as_ref().unwrap()[0].expression;
        assert!(
            condition.contains("system:serviceaccount:nvlabel:nvlabel"),
            "{mode}: scoped to our service account"
        );
        let validations: Vec<&str> =
            spec.validations.iter().flatten().map(|v| v.expression.as_str()).collect();
        assert!(validations.iter().any(|v| v.contains("authentication.kubernetes.io/node-name")), "{mode}");
        assert!(validations.iter().any(|v| v.contains("nvidia.com/")), "{mode}");
        let binding = &r.policy_bindings[0];
        let bspec = &binding.spec;
        assert_eq!(Some(bspec.policy_name.as_str()), policy.metadata.name.as_deref());
        assert_eq!(bspec.validation_actions, vec!["Deny".to_string()]);
    }
    for mode in ["nfd-file", "nfd-nodefeature"] {
        assert!(typed(mode).policies.is_empty(), "{mode} cannot write nodes at all");
    }
}
