//! NFD's `NodeFeature` (`nfd.k8s-sigs.io/v1alpha1`) as a typed object: only the fields nvlabel
//! writes are typed; NFD's feature sets are kept as they are, whatever they hold.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The API group.
pub const GROUP: &str = "nfd.k8s-sigs.io";
/// The version.
pub const VERSION: &str = "v1alpha1";
/// The kind.
pub const KIND: &str = "NodeFeature";

/// One NodeFeature object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFeatureObject {
    /// `nfd.k8s-sigs.io/v1alpha1`.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    /// `NodeFeature`.
    #[serde(default)]
    pub kind: String,
    /// Name, namespace, labels, owner.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What nfd-master turns into node labels. A missing spec (someone else's edit) reads as
    /// empty, which is drift to repair, not a watch that cannot parse the object.
    #[serde(default)]
    pub spec: NodeFeatureSpec,
}

/// The spec: labels, and NFD's (here always empty) feature sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFeatureSpec {
    /// The node labels nfd-master applies.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// NFD's raw features; nvlabel publishes none.
    #[serde(default)]
    pub features: Features,
}

/// NFD's three feature sets, kept opaque.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Features {
    /// Flag features.
    #[serde(default)]
    pub flags: BTreeMap<String, serde_json::Value>,
    /// Attribute features.
    #[serde(default)]
    pub attributes: BTreeMap<String, serde_json::Value>,
    /// Instance features.
    #[serde(default)]
    pub instances: BTreeMap<String, serde_json::Value>,
}

impl NodeFeatureObject {
    /// An object named `name` (no namespace: the API it is sent through sets it).
    pub fn new(metadata: ObjectMeta, labels: BTreeMap<String, String>) -> NodeFeatureObject {
        NodeFeatureObject {
            api_version: format!("{GROUP}/{VERSION}"),
            kind: KIND.into(),
            metadata,
            spec: NodeFeatureSpec { labels, features: Features::default() },
        }
    }
}

impl kube::Resource for NodeFeatureObject {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "nodefeatures".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubeapi::object_watch::missing_crd;

    fn not_found() -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("404 page not found", "").with_code(404)))
    }

    #[test]
    fn a_404_on_the_list_names_the_crd_to_install() {
        assert_eq!(
            missing_crd::<NodeFeatureObject>(&not_found()),
            " (the CRD nodefeatures.nfd.k8s-sigs.io is not installed: install NFD or its CRDs)"
        );
        assert_eq!(
            missing_crd::<k8s_openapi::api::core::v1::Node>(&not_found()),
            "",
            "a core resource has no CRD"
        );
    }
}
