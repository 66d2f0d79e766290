//! A [`Template`] in the forms autoscalers read: `key=value` lines, JSON, a Karpenter NodePool,
//! Cluster Autoscaler's ASG tags (AWS) and its cluster-api scale-from-zero annotations, and a DRA
//! pool's ResourceSlice ([`super::slice`]). A form
//! that cannot hold all of a template (Karpenter's 100 labels, an EC2 tag's 256 characters) is
//! refused with what does not fit, never printed short.

use super::slice::DRA_DRIVER;
use super::Template;
use serde::Serialize;
use std::collections::BTreeMap;

/// The forms `--format` names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Form {
    /// `key=value`, sorted, one per line.
    #[default]
    Labels,
    /// One JSON object: labels, capacity, what was left out.
    Json,
    /// A `karpenter.sh/v1` NodePool (add its `nodeClassRef`).
    Karpenter,
    /// Cluster Autoscaler's node-template tags of an AWS Auto Scaling group, as one JSON object.
    ClusterAutoscaler,
    /// Cluster Autoscaler's cluster-api scale-from-zero annotations.
    ClusterApi,
    /// The ResourceSlice a node of a DRA pool will publish (`--allocation-mode dra`).
    Resourceslice,
}

/// Why a template does not fit a form.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormError {
    /// More labels than the form holds.
    #[error("--format {form}: {what} holds at most {max} labels, this template has {has}; leave out --extended-labels or split the pool")]
    TooManyLabels {
        /// The form.
        form: &'static str,
        /// What holds them.
        what: &'static str,
        /// Its limit.
        max: usize,
        /// The template's count.
        has: usize,
    },
    /// A ResourceSlice asked of a pool whose GPUs the device plugin hands out.
    #[error("--format resourceslice: a pool publishes ResourceSlices only with --allocation-mode dra")]
    NotDra,
    /// A ResourceSlice asked of a pool known only by its nodes' labels.
    #[error("--format resourceslice: a pool learnt with --from-cluster has labels, not GPUs; give --snapshot or --gpu")]
    NoGpus,
    /// A key or value longer than the form allows.
    #[error("--format {form}: {what} {text:?} is {len} characters, over the {max} {where_} allows")]
    TooLong {
        /// The form.
        form: &'static str,
        /// Key or value.
        what: &'static str,
        /// The text.
        text: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
        /// What sets the limit.
        where_: &'static str,
    },
}

impl crate::exit::Classify for FormError {
    /// The pool's template and the form asked for do not go together: the user's to change.
    fn is_bad_configuration(&self) -> bool {
        true
    }
}

/// Karpenter's NodePool: at most 100 template labels and 100 requirements (its CRD).
const KARPENTER_MAX: usize = 100;
/// EC2: 50 tags per Auto Scaling group, keys of at most 128 characters, values of 256.
const ASG_TAGS: usize = 50;
const TAG_KEY: usize = 128;
const TAG_VALUE: usize = 256;
/// Cluster Autoscaler's tag prefix for the node a group would create.
const CA_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template";
/// cluster-api's scale-from-zero annotations.
const CAPI_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io";
/// Kubernetes: all of an object's annotations together, in bytes.
const ANNOTATIONS_MAX: usize = 256 * 1024;

/// `template` in `form`; `name` names a NodePool.
pub fn render(template: &Template, form: Form, name: &str) -> Result<String, FormError> {
    Ok(match body(template, form, name)? {
        Body::Json(document) => json(&document),
        Body::Text(text) => text,
    })
}

/// What a form prints: a JSON document (so that several pools' go into one object as they are,
/// never printed and read back), or text.
enum Body<'a> {
    /// `json`, `cluster-autoscaler`, `resourceslice`.
    Json(Document<'a>),
    /// `labels`, `karpenter`, `cluster-api`.
    Text(String),
}

/// A JSON form's document.
#[derive(Serialize)]
#[serde(untagged)]
enum Document<'a> {
    /// The template itself.
    Template(Json<'a>),
    /// The ASG tags.
    Tags(BTreeMap<String, String>),
    /// A ResourceSlice.
    Slice(serde_json::Value),
}

/// `template` in `form`, before it is printed.
fn body<'a>(template: &'a Template, form: Form, name: &str) -> Result<Body<'a>, FormError> {
    Ok(match form {
        Form::Labels => Body::Text(template.labels.iter().map(|(k, v)| format!("{k}={v}\n")).collect()),
        Form::Json => Body::Json(Document::Template(Json::of(template))),
        Form::Karpenter => Body::Text(karpenter(template, name)?),
        Form::ClusterAutoscaler => Body::Json(Document::Tags(asg_tags(template)?)),
        Form::ClusterApi => Body::Text(cluster_api(template)?),
        Form::Resourceslice if !template.dra => return Err(FormError::NotDra),
        Form::Resourceslice => match &template.node {
            Some(node) => Body::Json(Document::Slice(super::slice::of(node, name))),
            None => return Err(FormError::NoGpus),
        },
    })
}

/// Every pool of `templates` in `form`, each headed by its name (one pool alone, as [`render`]
/// gives it); `name` names the one pool's NodePool, several are named for their pools.
pub fn render_all(
    templates: &[(String, Template)],
    form: Form,
    name: Option<&str>,
) -> Result<String, FormError> {
    if let [(pool, t)] = templates {
        return render(t, form, name.unwrap_or(pool));
    }
    let mut documents: BTreeMap<&str, Document> = BTreeMap::new();
    let mut texts: Vec<String> = Vec::new();
    for (pool, t) in templates {
        match body(t, form, pool)? {
            Body::Json(document) => {
                documents.insert(pool, document);
            }
            Body::Text(text) if form == Form::Karpenter => texts.push(format!("---\n{text}")),
            Body::Text(text) => texts.push(format!("# pool {pool}\n{text}")),
        }
    }
    // A form's pools are all documents or all texts: the object of the documents, else the texts.
    Ok(match (documents.is_empty(), form) {
        (false, _) => json(&documents),
        (true, Form::Karpenter) => texts.concat(),
        (true, _) => texts.join("\n"),
    })
}

/// The JSON form.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Json<'a> {
    labels: &'a BTreeMap<String, String>,
    capacity: &'a BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dra_driver: Option<&'static str>,
    left_out: BTreeMap<&'a str, &'a str>,
}

impl<'a> Json<'a> {
    fn of(t: &'a Template) -> Json<'a> {
        Json {
            labels: &t.labels,
            capacity: &t.capacity,
            dra_driver: t.dra.then_some(DRA_DRIVER),
            left_out: t.left_out.iter().map(|l| (l.key.as_str(), l.why.as_str())).collect(),
        }
    }
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("plain maps and strings serialise") + "\n"
}

/// A NodePool whose template declares every label, so that a pod selecting any of them is known
/// to fit: in `metadata.labels` (at most 100) and as an `In` requirement (at most 100), the labels
/// that do not fit the first going first into the second; the user adds `nodeClassRef`.
fn karpenter(t: &Template, name: &str) -> Result<String, FormError> {
    if t.labels.len() > 2 * KARPENTER_MAX {
        let (form, max, has) = ("karpenter", 2 * KARPENTER_MAX, t.labels.len());
        return Err(FormError::TooManyLabels {
            form,
            what: "a NodePool's labels and requirements",
            max,
            has,
        });
    }
    let (fit, overflow) = (t.labels.iter().take(KARPENTER_MAX), t.labels.iter().skip(KARPENTER_MAX));
    let requirements: Vec<(&String, &String)> = overflow.chain(t.labels.iter()).take(KARPENTER_MAX).collect();
    let mut out =
        format!("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: {}\n", quoted(name));
    out.push_str("spec:\n  template:\n    metadata:\n      labels:\n");
    for (k, v) in fit {
        out.push_str(&format!("        {k}: {}\n", quoted(v)));
    }
    out.push_str("    spec:\n");
    out.push_str("      # Add the node class of your cloud, e.g. for AWS:\n");
    out.push_str("      # nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n");
    out.push_str("      requirements:\n");
    for (k, v) in requirements {
        out.push_str(&format!(
            "        - key: {k}\n          operator: In\n          values: [{}]\n",
            quoted(v)
        ));
    }
    Ok(out)
}

/// A YAML scalar that stays a string whatever it looks like (`true`, `8`, `12.4`).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// The ASG tags: each label, and each resource's count.
fn asg_tags(t: &Template) -> Result<BTreeMap<String, String>, FormError> {
    let labels = t.labels.iter().map(|(k, v)| (format!("{CA_PREFIX}/label/{k}"), v.clone()));
    let resources = t.capacity.iter().map(|(r, n)| (format!("{CA_PREFIX}/resources/{r}"), n.to_string()));
    let tags: BTreeMap<String, String> = labels.chain(resources).collect();
    let form = "cluster-autoscaler";
    if tags.len() > ASG_TAGS {
        let what = "an Auto Scaling group (its labels and resources as tags)";
        return Err(FormError::TooManyLabels { form, what, max: ASG_TAGS, has: tags.len() });
    }
    for (key, value) in &tags {
        for (what, text, max) in [("tag key", key, TAG_KEY), ("tag value", value, TAG_VALUE)] {
            if text.chars().count() > max {
                let len = text.chars().count();
                return Err(FormError::TooLong { form, what, text: text.clone(), len, max, where_: "EC2" });
            }
        }
    }
    Ok(tags)
}

/// The one GPU resource cluster-api's `gpu-type` names: `nvidia.com/gpu` where the pool has it,
/// else the one it has most of.
pub fn capi_gpu(t: &Template) -> Option<(&String, &u64)> {
    t.capacity.iter().max_by_key(|(r, n)| (r.as_str() == "nvidia.com/gpu", **n))
}

/// The annotations of a MachineDeployment, MachineSet or MachinePool that scales from zero.
fn cluster_api(t: &Template) -> Result<String, FormError> {
    let mut annotations = BTreeMap::new();
    let labels: Vec<String> = t.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    annotations.insert(format!("{CAPI_PREFIX}/labels"), labels.join(","));
    if t.dra {
        annotations.insert(format!("{CAPI_PREFIX}/dra-driver"), DRA_DRIVER.to_string());
        let count = t.labels.get("nvidia.com/gpu.count").cloned().unwrap_or_else(|| "0".into());
        annotations.insert(format!("{CAPI_PREFIX}/gpu-count"), count);
    } else if let Some((resource, count)) = capi_gpu(t) {
        annotations.insert(format!("{CAPI_PREFIX}/gpu-type"), resource.clone());
        annotations.insert(format!("{CAPI_PREFIX}/gpu-count"), count.to_string());
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > ANNOTATIONS_MAX {
        let text = format!("{size} bytes of annotations");
        let (form, what) = ("cluster-api", "the annotations");
        return Err(FormError::TooLong {
            form,
            what,
            text,
            len: size,
            max: ANNOTATIONS_MAX,
            where_: "Kubernetes",
        });
    }
    let mut out = String::from("metadata:\n  annotations:\n");
    for (k, v) in &annotations {
        out.push_str(&format!("    {k}: {}\n", quoted(v)));
    }
    Ok(out)
}
