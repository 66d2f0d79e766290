//! Kubernetes plumbing, below every user of the API (the writers, the Node view, the daemon):
//! client construction (deadlines, size limits, user agent, rate limit), retries with the one
//! backoff, object watches, and the Node view. Nothing here imports the writers or the daemon.

/// The field manager of every write nvlabel makes (labels, the NodeFeature object, health's
/// condition and record): one owner to the API server, whichever writer applied.
pub const FIELD_MANAGER: &str = "nvlabel";

pub mod backoff;
pub mod drift;
pub mod errors;
pub mod limit;
mod list_watch;
pub mod node_view;
pub mod object_watch;
pub mod ratelimit;
pub mod remind;
pub mod retry;
pub mod slices;

use crate::exit::Classify;
use std::time::Duration;

/// The limits every request of a client gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a TCP (and TLS) connection to the API server may take to open.
    pub connect: Duration,
    /// How long one request may take, answer and body together (watches: only until the answer
    /// starts; their stream has the watcher's idle timeout instead).
    pub request: Duration,
    /// The largest body (a watch: the largest line) accepted.
    pub max_body: usize,
}

impl Default for Limits {
    /// 5 s to connect, 20 s per request, 4 MiB per body or watch line.
    fn default() -> Limits {
        Limits {
            connect: Duration::from_secs(5),
            request: Duration::from_secs(20),
            max_body: limit::MAX_BODY,
        }
    }
}

/// One kind of Kubernetes API request a mode makes, for checking RBAC against the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiCall {
    /// Whether the request is made in one namespace (the NodeFeature namespace); otherwise it
    /// is cluster-scoped, and only a ClusterRole can grant it.
    pub namespaced: bool,
    /// API group (`""` for core).
    pub group: &'static str,
    /// Resource (plural).
    pub resource: &'static str,
    /// Verb.
    pub verb: &'static str,
}

/// Why no Kubernetes client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `--kubeconfig` file could not be read.
    #[error("cannot read the kubeconfig {path}: {source}")]
    Read {
        /// The `--kubeconfig` file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The `--kubeconfig` file was read but is not usable.
    #[error("cannot use the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The `--kubeconfig` file.
        path: String,
        /// What is wrong with it.
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig and no in-cluster configuration.
    #[error("cannot find a Kubernetes API server: no --kubeconfig, no KUBECONFIG, no ~/.kube/config, and not in a pod ({source})")]
    Infer {
        /// What the last attempt said.
        source: kube::config::InferConfigError,
    },
    /// The configuration was found but no client could be built from it.
    #[error("cannot create a Kubernetes client for {url}: {source}")]
    Build {
        /// The API server.
        url: String,
        /// Why.
        source: kube::Error,
    },
}

impl Classify for ClientError {
    /// A `--kubeconfig` that cannot be read or used names a file the operator chose (not finding
    /// an API server at all, or a client that cannot be built from a good configuration, is the
    /// node's or the cluster's).
    fn is_bad_configuration(&self) -> bool {
        match self {
            ClientError::Read { .. } | ClientError::Kubeconfig { .. } => true,
            ClientError::Infer { .. } | ClientError::Build { .. } => false,
        }
    }
}

/// The User-Agent every request carries, so audit logs and priority-and-fairness can tell
/// nvlabel apart.
pub fn user_agent() -> String {
    format!("nvlabel/{}", env!("CARGO_PKG_VERSION"))
}

/// A client from `--kubeconfig`, else the usual inference (KUBECONFIG, in-cluster), limited to
/// `qps` requests per second with bursts of `burst` (`--kube-api-qps`, `--kube-api-burst`).
pub async fn client(kubeconfig: Option<&str>, qps: f64, burst: u32) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let fail = |e: kube::config::KubeconfigError| match e {
                kube::config::KubeconfigError::ReadConfig(source, _) => {
                    ClientError::Read { path: path.to_string(), source }
                }
                source => ClientError::Kubeconfig { path: path.to_string(), source },
            };
            // kube reads it with a plain open and no limit: look first, so a FIFO or a device
            // at the path is refused rather than waited on (kube resolves the certificate paths
            // against the file's directory, so it must do the reading itself).
            let size = crate::limits::open(std::path::Path::new(path)).and_then(|f| f.metadata());
            match size.map(|m| m.len()) {
                Ok(len) if len > crate::limits::KUBECONFIG_FILE => {
                    let too_large = format!(
                        "larger than the {}-byte limit for this file",
                        crate::limits::KUBECONFIG_FILE
                    );
                    let source = std::io::Error::new(std::io::ErrorKind::InvalidData, too_large);
                    return Err(ClientError::Read { path: path.to_string(), source });
                }
                Ok(_) => {}
                Err(source) => return Err(ClientError::Read { path: path.to_string(), source }),
            }
            let file = kube::config::Kubeconfig::read_from(path).map_err(fail)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(fail)?
        }
        None => kube::Config::infer().await.map_err(|source| ClientError::Infer { source })?,
    };
    errors::remember_server(&config.cluster_url.to_string());
    client_from(config, qps, burst, Limits::default())
}

/// [`client`] from a configuration already made, with `limits` on every request.
pub fn client_from(
    mut config: kube::Config,
    qps: f64,
    burst: u32,
    limits: Limits,
) -> Result<kube::Client, ClientError> {
    let url = config.cluster_url.to_string();
    config.connect_timeout = Some(limits.connect);
    // Per-read timeouts would cut a quiet watch; the limit layer's deadline covers plain requests
    // and the watcher's idle timeout covers watches.
    config.read_timeout = None;
    config.write_timeout = Some(limits.request);
    // kube's own retry layer would retry inside our deadline without our backoff: one retry rule.
    config.default_retry = false;
    let agent = hyper::header::HeaderValue::from_str(&user_agent()).expect("a valid header value");
    config.headers.push((hyper::header::USER_AGENT, agent));
    let fail = |source: kube::Error| ClientError::Build { url: url.clone(), source };
    let builder = kube::client::ClientBuilder::try_from(config).map_err(fail)?;
    let builder = builder.with_layer(&limit::LimitLayer::new(
        limits.request,
        limits.max_body,
        url.trim_end_matches('/'),
    ));
    Ok(match ratelimit::RateLimitLayer::new(qps, burst) {
        Some(rate) => builder.with_layer(&rate).build(),
        None => builder.build(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named_once_with_the_reason() {
        let Err(error) = client(Some("/nonexistent/kubeconfig"), 5.0, 10).await else {
            panic!("no such file")
        };
        assert_eq!(
            crate::logging::error_chain(&error),
            "cannot read the kubeconfig /nonexistent/kubeconfig: No such file or directory (os error 2)"
        );
    }

    /// kube's own read would wait forever on a FIFO nobody writes; it is refused first.
    #[tokio::test]
    async fn a_kubeconfig_that_is_a_fifo_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("kubeconfig");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let Err(error) = client(fifo.to_str(), 5.0, 10).await else { panic!("a FIFO") };
        assert!(error.is_bad_configuration());
        let text = crate::logging::error_chain(&error);
        assert!(text.ends_with(": a FIFO, not a regular file"), "{text}");
    }

    #[test]
    fn the_user_agent_names_nvlabel_and_its_version() {
        assert_eq!(user_agent(), format!("nvlabel/{}", env!("CARGO_PKG_VERSION")));
    }
}
