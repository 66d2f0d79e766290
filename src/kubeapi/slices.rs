//! This node's ResourceSlices of NVIDIA's DRA driver (`gpu.nvidia.com`), listed and then watched
//! with the field selectors `spec.nodeName` and `spec.driver`: whether the node is a DRA node
//! (`--allocation-mode auto`), and which devices those slices publish (device taints).
//!
//! The watch is `list_watch.rs`'s loop, the one the object watches use, with its guards and
//! timings: a watch that the server ends after its timeout is resumed from the last
//! resourceVersion or bookmark; anything else (a resourceVersion going back included) relists
//! after its wait (`[0, 8 s)`), keeping the last set seen meanwhile (a blip of the API server never
//! flips a node's profile). Where the API refuses the list (403: no RBAC) or does not serve
//! ResourceSlices (404), the set is [`SliceState::Unavailable`], said once, and the list is tried
//! again on a backoff growing to five minutes, so a node without DRA costs its API server one
//! request every few minutes.

use super::backoff::FullJitter;
use super::list_watch::{Change, Follower, Say, Spec};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::ListParams;
use kube::Api;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// Every API request the slice watch makes (its RBAC must grant exactly these); a one-shot run
/// only lists.
pub const API_CALLS: &[super::ApiCall] = &[
    super::ApiCall { namespaced: false, group: "resource.k8s.io", resource: "resourceslices", verb: "list" },
    super::ApiCall { namespaced: false, group: "resource.k8s.io", resource: "resourceslices", verb: "watch" },
];

/// NVIDIA's DRA driver.
pub const DRIVER: &str = "gpu.nvidia.com";
/// Lists the API refuses or does not serve: growing to five minutes. Unlike a Node watch's 403
/// (an outage an operator fixes), a refused slice list is usually for good (a chart without the
/// DRA grants, a cluster before 1.34), and every node of a fleet would ask.
const UNAVAILABLE: FullJitter = FullJitter::new(Duration::from_secs(10), Duration::from_secs(300));

/// What is known of this node's slices.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum SliceState {
    /// Not listed yet.
    #[default]
    Unknown,
    /// The API refused the list or does not serve ResourceSlices; the reason.
    Unavailable(String),
    /// The slices by name (empty: this node has none).
    Listed(BTreeMap<String, ResourceSlice>),
}

impl SliceState {
    /// Whether the node has a `gpu.nvidia.com` slice; `None` until the first list.
    pub fn is_dra(&self) -> Option<bool> {
        match self {
            SliceState::Unknown => None,
            SliceState::Unavailable(_) => Some(false),
            SliceState::Listed(slices) => Some(!slices.is_empty()),
        }
    }

    /// Every device of these slices, in slice and device order.
    pub fn devices(&self) -> Vec<SliceDevice> {
        match self {
            SliceState::Listed(slices) => slices.values().flat_map(slice_devices).collect(),
            _ => Vec::new(),
        }
    }
}

/// One device of a slice, as a device taint selects it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SliceDevice {
    /// The slice's pool.
    pub pool: String,
    /// The device's name in the slice (never derived: it differs between driver versions).
    pub device: String,
    /// Its `uuid` attribute (a GPU's or a MIG device's UUID).
    pub uuid: Option<String>,
    /// Its `parentUUID` attribute (a MIG device's GPU).
    pub parent_uuid: Option<String>,
}

/// The devices of one slice.
fn slice_devices(slice: &ResourceSlice) -> Vec<SliceDevice> {
    let attr = |d: &k8s_openapi::api::resource::v1::Device, name: &str| {
        d.attributes.as_ref().and_then(|a| a.get(name)).and_then(|v| v.string.clone())
    };
    let devices = slice.spec.devices.iter().flatten();
    devices
        .map(|d| SliceDevice {
            pool: slice.spec.pool.name.clone(),
            device: d.name.clone(),
            uuid: attr(d, "uuid"),
            parent_uuid: attr(d, "parentUUID"),
        })
        .collect()
}

/// The field selector of this node's slices of [`DRIVER`].
pub fn selector(node: &str) -> String {
    format!("spec.nodeName={node},spec.driver={DRIVER}")
}

/// Lists this node's slices once (the one-shot run's `auto`).
pub async fn list_once(client: kube::Client, node: &str) -> SliceState {
    let api: Api<ResourceSlice> = Api::all(client);
    match api.list(&ListParams::default().fields(&selector(node))).await {
        Ok(list) => SliceState::Listed(by_name(list.items)),
        Err(e) => SliceState::Unavailable(super::errors::Short(&e).to_string()),
    }
}

fn by_name(items: Vec<ResourceSlice>) -> BTreeMap<String, ResourceSlice> {
    items.into_iter().map(|s| (s.metadata.name.clone().unwrap_or_default(), s)).collect()
}

/// This node's slices, kept current by a background task that ends when every handle is dropped.
#[derive(Clone)]
pub struct SliceWatch {
    rx: watch::Receiver<SliceState>,
}

impl SliceWatch {
    /// Watches `node`'s slices through `client`.
    pub fn spawn(client: kube::Client, node: &str) -> SliceWatch {
        let (tx, rx) = watch::channel(SliceState::Unknown);
        let spec = Spec {
            api: Api::all(client),
            fields: selector(node),
            refused: UNAVAILABLE,
            draw: rand::random::<f64>,
            // Nothing cuts the slice watch's waits short.
            kick: Default::default(),
        };
        let follow = Follow { fields: selector(node), tx, set: BTreeMap::new() };
        tokio::spawn(super::list_watch::run(spec, follow));
        SliceWatch { rx }
    }

    /// The slices now.
    pub fn state(&self) -> SliceState {
        self.rx.borrow().clone()
    }

    /// A receiver that sees every change from now on.
    pub fn changes(&self) -> watch::Receiver<SliceState> {
        let mut rx = self.rx.clone();
        rx.borrow_and_update();
        rx
    }
}

/// The watch's own part behind a [`SliceWatch`].
struct Follow {
    fields: String,
    tx: watch::Sender<SliceState>,
    /// The slices as last listed, with the changes seen since.
    set: BTreeMap<String, ResourceSlice>,
}

impl Follow {
    /// Publishes `state` when it differs; false once every handle is gone.
    fn report(&self, state: SliceState) -> bool {
        self.tx.send_if_modified(|s| {
            let changed = *s != state;
            *s = state;
            changed
        });
        !self.tx.is_closed()
    }
}

impl Follower<ResourceSlice> for Follow {
    fn listed(&mut self, items: Vec<ResourceSlice>) -> bool {
        self.set = by_name(items);
        self.report(SliceState::Listed(self.set.clone()))
    }

    fn changed(&mut self, change: Change<ResourceSlice>) -> bool {
        match change {
            Change::Applied(s) => {
                self.set.insert(s.metadata.name.clone().unwrap_or_default(), s);
            }
            Change::Deleted(s) => {
                self.set.remove(s.metadata.name.as_deref().unwrap_or_default());
            }
        }
        self.report(SliceState::Listed(self.set.clone()))
    }

    fn list_failed(&mut self, e: &kube::Error, refused: bool) -> String {
        let error = super::errors::Short(e).to_string();
        if refused {
            self.report(SliceState::Unavailable(error.clone()));
        }
        error
    }

    /// The slices last seen stay: a passing fault never flips the node's profile.
    fn failed(&mut self) {}

    fn say(&self, line: Say<'_>) {
        let (selector, server) = (&self.fields, super::errors::server());
        match line {
            Say::Failing { error, refused, wait } => {
                let what = match refused {
                    true => "ResourceSlices cannot be read here; GPU allocation is taken as the device plugin's and no device is tainted",
                    false => "the ResourceSlice watch failed; listing again within seconds, keeping the slices last seen",
                };
                tracing::warn!(%selector, server, %error, retry_in_ms = wait.as_millis() as u64, "{what}");
            }
            // Said once: a node without DRA access would otherwise say it every few minutes.
            Say::Still { .. } => {}
            Say::Resolved { error, .. } => {
                tracing::info!(%selector, server, %error, "resolved: ResourceSlices are listed again")
            }
        }
    }

    fn closed(&self) -> impl Future<Output = ()> + Send + '_ {
        self.tx.closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, pool: &str, devices: &[(&str, &str, Option<&str>)]) -> ResourceSlice {
        let devices: Vec<serde_json::Value> = devices
            .iter()
            .map(|(d, uuid, parent)| {
                let mut attributes = serde_json::json!({"uuid": {"string": uuid}, "index": {"int": 0}});
                if let Some(p) = parent {
                    attributes["parentUUID"] = serde_json::json!({"string": p});
                }
                serde_json::json!({"name": d, "attributes": attributes})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"driver": DRIVER, "nodeName": pool, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1}, "devices": devices}
        }))
        .unwrap()
    }

    #[test]
    fn devices_carry_their_pool_uuid_and_parent() {
        let s =
            slice("a", "node-1", &[("gpu-7", "GPU-a", None), ("gpu-7-mig-9-0-1", "MIG-b", Some("GPU-a"))]);
        let state = SliceState::Listed(by_name(vec![s]));
        assert_eq!(state.is_dra(), Some(true));
        let d = state.devices();
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].pool.as_str(), d[0].device.as_str(), d[0].uuid.as_deref()),
            ("node-1", "gpu-7", Some("GPU-a"))
        );
        assert_eq!((d[1].uuid.as_deref(), d[1].parent_uuid.as_deref()), (Some("MIG-b"), Some("GPU-a")));
        assert_eq!(SliceState::Listed(BTreeMap::new()).is_dra(), Some(false));
        assert_eq!(SliceState::Unavailable("403".into()).is_dra(), Some(false));
        assert_eq!(SliceState::Unknown.is_dra(), None);
    }

    #[test]
    fn the_selector_names_node_and_driver() {
        assert_eq!(selector("n1"), "spec.nodeName=n1,spec.driver=gpu.nvidia.com");
    }
}
