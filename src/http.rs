//! The HTTP endpoint: `/healthz` (the labelling loop is not stuck in one pass), `/readyz` (the
//! last publish succeeded, recently enough) and `/metrics` (Prometheus text format).

use crate::exit::Classify;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether the labeler is doing its job.
#[derive(Debug, Default)]
pub struct Liveness {
    state: Mutex<Option<(bool, Instant)>>,
    /// How old a success may be and still count (`None`: any age, for an infinite interval).
    pub fresh_for: Mutex<Option<Duration>>,
    /// Since when the loop has been in a pass (`None` while it waits).
    busy_since: Mutex<Option<Instant>>,
}

/// How long one pass may keep the loop busy before liveness fails: longer than a publish's
/// deadline and any probe, so only a loop that is stuck gets the container restarted.
pub const STUCK_AFTER: Duration = Duration::from_secs(300);

impl Liveness {
    /// Records the outcome of a publish.
    pub fn record(&self, ok: bool) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = Some((ok, Instant::now()));
    }

    /// Marks the loop as in a pass (`true`) or waiting (`false`).
    pub fn busy(&self, yes: bool) {
        let mut busy = self.busy_since.lock().unwrap_or_else(|p| p.into_inner());
        *busy = match (yes, *busy) {
            (true, Some(since)) => Some(since),
            (true, None) => Some(Instant::now()),
            (false, _) => None,
        };
    }

    /// Alive: the loop is not stuck in one pass for longer than `limit`.
    pub fn alive(&self, limit: Duration) -> bool {
        self.busy_since.lock().unwrap_or_else(|p| p.into_inner()).is_none_or(|since| since.elapsed() <= limit)
    }

    /// Ready: the last publish succeeded, and (with a finite interval) not too long ago.
    pub fn ready(&self) -> bool {
        let state = *self.state.lock().unwrap_or_else(|p| p.into_inner());
        let fresh_for = *self.fresh_for.lock().unwrap_or_else(|p| p.into_inner());
        match state {
            Some((true, at)) => fresh_for.is_none_or(|limit| at.elapsed() <= limit),
            _ => false,
        }
    }
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert("content-type", content_type.parse().expect("a valid header value"));
    r
}

/// Answers one request.
pub fn handle(path: &str, liveness: &Liveness, registry: &Registry) -> Response<Full<Bytes>> {
    match path {
        "/healthz" if liveness.alive(STUCK_AFTER) => respond(StatusCode::OK, "text/plain", "ok\n".into()),
        "/healthz" => respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            format!("the labelling loop has been stuck in one pass for over {}s\n", STUCK_AFTER.as_secs()),
        ),
        "/readyz" if liveness.ready() => respond(StatusCode::OK, "text/plain", "ready\n".into()),
        "/readyz" => respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "the last publish did not succeed\n".into(),
        ),
        "/metrics" => {
            let mut text = String::new();
            match prometheus_client::encoding::text::encode(&mut text, registry) {
                Ok(()) => respond(
                    StatusCode::OK,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    text,
                ),
                Err(e) => respond(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", format!("{e}\n")),
            }
        }
        _ => respond(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

/// Parses `host:port`, or Go's `:port` for every address.
pub fn parse_listen_addr(text: &str) -> Result<SocketAddr, ListenAddrError> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.parse().map_err(|source| ListenAddrError { text: text.into(), source })
}

/// A `--metrics-addr` that is not an address.
#[derive(Debug, thiserror::Error)]
#[error("invalid listen address {text:?}: {source} (use host:port or :port)")]
pub struct ListenAddrError {
    /// The flag's value.
    pub text: String,
    /// Why it is not an address.
    pub source: std::net::AddrParseError,
}

impl Classify for ListenAddrError {
    fn is_bad_configuration(&self) -> bool {
        true
    }
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot serve /healthz, /readyz and /metrics on {addr} (--metrics-addr; \"\" turns it off): {source}"
)]
pub struct ServeError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why binding failed.
    pub source: std::io::Error,
}

impl Classify for ServeError {
    /// An address that parses but cannot be bound (in use, not this host's) is the node's state.
    fn is_bad_configuration(&self) -> bool {
        false
    }
}

/// The endpoint being served; dropping it stops serving.
#[derive(Debug)]
pub struct Endpoint {
    /// The address bound (the port chosen, for `:0`).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds `addr` (so a bad address fails at start-up) and serves in the background until the
/// [`Endpoint`] is dropped.
pub async fn serve(
    addr: SocketAddr,
    liveness: Arc<Liveness>,
    registry: Arc<Registry>,
) -> Result<Endpoint, ServeError> {
    let bind_error = |source| ServeError { addr, source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    tracing::info!(addr = %bound, "serving /healthz, /readyz and /metrics");
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    continue;
                }
            };
            let (liveness, registry) = (liveness.clone(), registry.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let response = handle(req.uri().path(), &liveness, &registry);
                    async move { Ok::<_, std::convert::Infallible>(response) }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
            });
        }
    });
    Ok(Endpoint { addr: bound, task })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_last_publish() {
        let h = Liveness::default();
        assert!(!h.ready(), "not ready before the first publish");
        h.record(true);
        assert!(h.ready());
        h.record(false);
        assert!(!h.ready());
        h.record(true);
        *h.fresh_for.lock().unwrap() = Some(Duration::ZERO);
        h.busy(true);
        assert!(h.alive(Duration::from_secs(60)), "a pass in progress is alive");
        std::thread::sleep(Duration::from_millis(5));
        assert!(!h.ready(), "a stale success is not ready");
        assert!(!h.alive(Duration::ZERO), "a loop stuck in a pass is not alive");
        h.busy(false);
        assert!(h.alive(Duration::ZERO), "a waiting loop is alive");
    }

    #[test]
    fn routes() {
        let h = Liveness::default();
        let r = Registry::default();
        assert_eq!(handle("/healthz", &h, &r).status(), StatusCode::OK);
        assert_eq!(handle("/readyz", &h, &r).status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(handle("/metrics", &h, &r).status(), StatusCode::OK);
        assert_eq!(handle("/nope", &h, &r).status(), StatusCode::NOT_FOUND);
    }
}
