//! Where labels go. Two traits: [`Writer`], what every run asks of a writer, and [`DaemonWriter`]
//! on top, what only the daemon reads (the watched object's changes, drift, the Node's
//! allocatable); one file per writer, which also says what the writer is before it is built
//! ([`WriterPlan`]: its name, API calls, failure reasons, builders), picked by
//! [`Target::plan`], the one match on [`Target`]. A writer publishes only what changed and never removes what
//! it published when the process stops; `prune` removes it on request.

mod feature_file;
pub mod node;
pub mod nodefeature;
pub mod nodefeature_object;
pub mod render;
pub mod rival;
mod stdout;

/// Where labels are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sink {
    /// As GFD: a NodeFeature object with `--use-node-feature-api`, else the feature file or stdout.
    Gfd,
    /// This Node's labels, by server-side apply.
    Node,
}

impl Sink {
    /// From its flag spelling (`gfd`, `node`).
    pub fn parse(s: &str) -> Option<Sink> {
        <Sink as clap::ValueEnum>::from_str(s, false).ok()
    }
}

/// How printed labels look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `key=value` lines, NFD's feature-file format.
    Text,
    /// One JSON object, keys sorted.
    Json,
}

impl Format {
    /// From its flag spelling (`text`, `json`).
    pub fn parse(s: &str) -> Option<Format> {
        <Format as clap::ValueEnum>::from_str(s, false).ok()
    }
}

pub use feature_file::prune as prune_file;
pub use feature_file::{FeatureFile, PruneFileError, MARKER};
pub use node::NodeLabels;
pub use nodefeature::NodeFeature;
pub use stdout::Stdout;

use crate::exit::Classify;
use crate::labels::Labels;
use futures::future::BoxFuture;

/// Why a publish failed; the daemon retries and keeps going.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Writing the feature file failed.
    #[error(transparent)]
    File(#[from] render::OutputError),
    /// Writing stdout failed.
    #[error("cannot write labels to stdout: {0}")]
    Stdout(#[source] std::io::Error),
    /// The Kubernetes API refused or could not be reached (after retries).
    #[error(transparent)]
    Api(#[from] crate::kubeapi::errors::ApiFailure),
    /// `nvlabel prune` left a feature file in place (someone else's) or could not remove it.
    #[error(transparent)]
    Prune(#[from] PruneFileError),
    /// Our Node does not exist; it is never created by us.
    #[error("node {0:?} not found; its labels are not written (a deleted Node is never re-created)")]
    NodeMissing(String),
    /// The publish did not finish within the daemon's publish deadline (60 s) and was abandoned.
    #[error("publishing did not finish within {}s and was abandoned; the next attempt backs off", .0.as_secs())]
    Timeout(std::time::Duration),
}

impl Classify for PublishError {
    /// A writer that fails is the node's (a file that cannot be written) or the API's: its
    /// configuration was checked when it was set up ([`SetupError`]).
    fn is_bad_configuration(&self) -> bool {
        match self {
            PublishError::File(e) => e.is_bad_configuration(),
            PublishError::Api(e) => e.is_bad_configuration(),
            PublishError::Prune(e) => e.is_bad_configuration(),
            PublishError::Stdout(_) | PublishError::NodeMissing(_) | PublishError::Timeout(_) => false,
        }
    }
}

/// Why a publish failed, as the failure metric's `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureReason {
    /// Writing the feature file.
    File,
    /// Writing stdout.
    Stdout,
    /// 409 from the API server.
    Conflict,
    /// 429 from the API server.
    Throttled,
    /// 5xx from the API server.
    Server,
    /// Any other refusal (403, 404, 422).
    Refused,
    /// The API server could not be reached, or its answer was cut off.
    Connection,
    /// Our Node does not exist.
    NodeMissing,
    /// The publish overran its deadline.
    Timeout,
    /// No writer could be built.
    Setup,
}

impl FailureReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::File => "file",
            FailureReason::Stdout => "stdout",
            FailureReason::Conflict => "conflict",
            FailureReason::Throttled => "throttled",
            FailureReason::Server => "server",
            FailureReason::Refused => "refused",
            FailureReason::Connection => "connection",
            FailureReason::NodeMissing => "node-missing",
            FailureReason::Timeout => "timeout",
            FailureReason::Setup => "setup",
        }
    }
}

impl PublishError {
    /// The reason for the publish-failure metric.
    pub fn reason(&self) -> FailureReason {
        match self {
            PublishError::File(_) | PublishError::Prune(_) => FailureReason::File,
            PublishError::Stdout(_) => FailureReason::Stdout,
            PublishError::Api(a) => match a.code() {
                Some(409) => FailureReason::Conflict,
                Some(429) => FailureReason::Throttled,
                Some(500..) => FailureReason::Server,
                Some(_) => FailureReason::Refused,
                None => FailureReason::Connection,
            },
            PublishError::NodeMissing(_) => FailureReason::NodeMissing,
            PublishError::Timeout(_) => FailureReason::Timeout,
        }
    }
}

pub use crate::kubeapi::ApiCall;

/// Why no writer could be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// An API writer needs the node name.
    #[error("required flag node-name not set (--node-name or NODE_NAME)")]
    NodeName,
    /// The NodeFeature writer needs the node name, and `--output-file ""` says stdout was meant.
    #[error("required flag node-name not set (--node-name or NODE_NAME); to print the labels, add --use-node-feature-api=false: GFD's default publishes a NodeFeature object, --output-file \"\" or not")]
    NodeNameToPrint,
    /// The NodeFeature writer needs a namespace.
    #[error("required flag namespace not set (--namespace or NAMESPACE)")]
    Namespace,
    /// No Kubernetes client could be built.
    #[error(transparent)]
    Client(#[from] crate::kubeapi::ClientError),
    /// An API writer was built without a client (a caller's mistake, not the user's).
    #[error("no Kubernetes client was configured for the {0} writer")]
    NoClient(&'static str),
}

impl Classify for SetupError {
    /// A writer without the flag it requires; a client that cannot be built is the client's to
    /// say; a writer without a client is a caller's mistake, not the operator's.
    fn is_bad_configuration(&self) -> bool {
        match self {
            SetupError::NodeName | SetupError::NodeNameToPrint | SetupError::Namespace => true,
            SetupError::Client(e) => e.is_bad_configuration(),
            SetupError::NoClient(_) => false,
        }
    }
}

/// Which writer the settings ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// stdout (`--output-file ""`).
    Stdout(Format),
    /// The feature file.
    File(std::path::PathBuf, Option<std::time::Duration>),
    /// A NodeFeature object.
    NodeFeature {
        /// Its namespace.
        namespace: String,
        /// The node.
        node: String,
        /// Our pod, for the owner lookup.
        pod: Option<String>,
    },
    /// The Node's labels.
    Node(String),
}

impl Target {
    /// Its writer's plan: the one place a target becomes its writer (a new writer is its file,
    /// a variant and this arm).
    pub fn plan(&self) -> Box<dyn WriterPlan + '_> {
        match self {
            Target::Stdout(format) => Box::new(stdout::StdoutPlan { format: *format }),
            Target::File(path, expiry) => Box::new(feature_file::FilePlan { path, expiry: *expiry }),
            Target::NodeFeature { namespace, node, pod } => {
                Box::new(nodefeature::NodeFeaturePlan { namespace, node, pod: pod.as_deref() })
            }
            Target::Node(node) => Box::new(node::NodePlan { node }),
        }
    }

    /// The name its writer has in logs and metrics.
    pub fn writer_name(&self) -> &'static str {
        self.plan().name()
    }

    /// Every API request this target's writer makes (its RBAC must grant exactly these).
    /// `daemon`: the long-running labeler, which also watches its object.
    pub fn api_calls(&self, daemon: bool) -> Vec<ApiCall> {
        let calls = self.plan().api_calls();
        calls.each.iter().chain(calls.watch.iter().filter(|_| daemon)).copied().collect()
    }

    /// Every failure reason its writer can have (the metric exports exactly these, at 0 first).
    pub fn failure_reasons(&self) -> &'static [FailureReason] {
        self.plan().failure_reasons()
    }

    /// Whether this target talks to the Kubernetes API: whether its writer makes API calls.
    pub fn needs_client(&self) -> bool {
        !self.plan().api_calls().each.is_empty()
    }

    /// Builds the writer (an API writer gets `client`; the owner lookup happens here). It reads
    /// its object on every publish: the one-shot run and `nvlabel prune`.
    pub async fn build(&self, client: Option<&kube::Client>) -> Result<Box<dyn Writer>, SetupError> {
        self.plan().build(client).await
    }

    /// Builds the writer `nvlabel prune` removes with: as [`Target::build`], but a NodeFeature
    /// object is only deleted, so its owner (the pod, `POD_NAME`) is not looked up or spoken of.
    pub async fn build_to_prune(&self, client: Option<&kube::Client>) -> Result<Box<dyn Writer>, SetupError> {
        self.plan().build_to_prune(client).await
    }

    /// Builds the daemon's writer; with [`Watches::On`] the API writers decide from watches
    /// instead of reads (the Node writer from the daemon's one watch of its Node; the NodeFeature
    /// writer from a watch of its object), so a pass that changes nothing sends nothing.
    pub async fn build_daemon(
        &self,
        client: Option<&kube::Client>,
        watches: &Watches,
    ) -> Result<Box<dyn DaemonWriter>, SetupError> {
        self.plan().build_daemon(client, watches).await
    }
}

/// The API requests a writer makes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiCalls {
    /// Every run's.
    pub each: &'static [ApiCall],
    /// What the daemon adds to watch its object.
    pub watch: &'static [ApiCall],
}

/// A writer being built: what its builder's future gives.
pub type Building<'a, W> = BoxFuture<'a, Result<Box<W>, SetupError>>;

/// A label writer before it is built, said once in the writer's file: its name, API calls,
/// failure reasons and how it is built. [`Target::plan`] picks it.
pub trait WriterPlan: Send + Sync {
    /// Its name in logs and metrics.
    fn name(&self) -> &'static str;

    /// The API requests it makes (RBAC is checked against them); none for a local writer.
    fn api_calls(&self) -> ApiCalls {
        ApiCalls::default()
    }

    /// Every failure reason it can have (the metric exports exactly these, at 0 first).
    fn failure_reasons(&self) -> &'static [FailureReason];

    /// Builds the daemon's writer, deciding from `watches` where it keeps one.
    fn build_daemon<'a>(
        &'a self,
        client: Option<&'a kube::Client>,
        watches: &'a Watches,
    ) -> Building<'a, dyn DaemonWriter>;

    /// Builds the one-shot run's writer: the daemon's without watches unless it says otherwise.
    fn build<'a>(&'a self, client: Option<&'a kube::Client>) -> Building<'a, dyn Writer> {
        Box::pin(async move {
            let off = Watches::Off;
            let writer: Box<dyn Writer> = self.build_daemon(client, &off).await?;
            Ok(writer)
        })
    }

    /// Builds `nvlabel prune`'s writer: the one-shot run's unless it says otherwise.
    fn build_to_prune<'a>(&'a self, client: Option<&'a kube::Client>) -> Building<'a, dyn Writer> {
        self.build(client)
    }
}

/// The client an API writer called `writer` needs.
fn client_for(client: Option<&kube::Client>, writer: &'static str) -> Result<kube::Client, SetupError> {
    client.cloned().ok_or(SetupError::NoClient(writer))
}

/// Whether the API writers decide from watches.
#[derive(Clone, Default)]
pub enum Watches {
    /// They read their object on every publish.
    #[default]
    Off,
    /// They decide from watches; the Node writer from this Node's one watch, if there is one.
    On(Option<crate::kubeapi::object_watch::ObjectWatch<k8s_openapi::api::core::v1::Node>>),
}

/// A label sink.
pub trait Writer: Send + Sync {
    /// Its name in logs and metrics.
    fn name(&self) -> &'static str;

    /// Publishes `labels`; `Ok(true)` when something was written.
    fn publish<'a>(&'a mut self, labels: &'a Labels) -> BoxFuture<'a, Result<bool, PublishError>>;

    /// How long until what was published must be written again even if nothing changed (the
    /// feature file's expiry); `None` when never.
    fn refresh_in(&self) -> Option<std::time::Duration> {
        None
    }

    /// Removes what this writer's target holds of ours (`nvlabel prune`); nothing to do for stdout.
    fn prune(&mut self) -> BoxFuture<'_, Result<(), PublishError>> {
        Box::pin(async { Ok(()) })
    }
}

/// What the daemon reads of a writer besides publishing: the watch of its object, drift, and
/// the Node's allocatable. The one-shot run and `nvlabel prune` use plain [`Writer`]s.
pub trait DaemonWriter: Writer {
    /// The changes of the watched object this writer publishes into (the Node, or its
    /// NodeFeature object); `None` when it keeps no watch.
    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// Whether the watched object no longer carries what this writer last published there
    /// (someone removed or changed one of our labels): drift to repair.
    fn drifted(&self) -> bool {
        false
    }

    /// The Node's `status.allocatable` as last read, for writers that read the Node.
    fn node_allocatable(&self) -> Option<std::collections::BTreeMap<String, String>> {
        None
    }

    /// The other field manager(s) writing what this writer published, as the watched object's
    /// `managedFields` name them (for the one line that reports a fight).
    fn rival(&self) -> Option<String> {
        None
    }
}

impl DaemonWriter for Stdout {}
