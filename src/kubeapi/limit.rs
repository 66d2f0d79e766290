//! Limits on every Kubernetes API request, as a tower layer under the kube client: a deadline for
//! the answer to start, a deadline for a plain request's whole body, and a size limit on bodies
//! (a watch's on each line, since a watch body is a stream that lasts minutes). A Node is rarely
//! over 100 KiB; [`MAX_BODY`] leaves room for forty times that and keeps a garbage or hostile
//! answer far below the DaemonSet's memory limit.

use bytes::{Buf, Bytes};
use hyper::body::{Body, Frame, SizeHint};
use hyper::{Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// The largest response body (or watch line) accepted: 4 MiB.
pub const MAX_BODY: usize = 4 << 20;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why an answer was cut off.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// The answer did not start in time.
    #[error("the API server did not answer within {}s", .0.as_secs())]
    NoAnswer(Duration),
    /// The body did not arrive in time.
    #[error("the API server's answer did not arrive within {}s", .0.as_secs())]
    SlowBody(Duration),
    /// The request failed below (connection refused, TLS, a cut connection).
    #[error("{server}: {source}")]
    Transport {
        /// The API server's address.
        server: String,
        /// Why.
        source: BoxError,
    },
    /// The body (or a watch line) was too large.
    #[error("the API server's answer exceeded {} MiB, the limit on every answer", .0 >> 20)]
    TooLarge(usize),
}

/// The layer: `timeout` for an answer (and a plain request's body), `max` bytes per body or line.
#[derive(Debug, Clone)]
pub struct LimitLayer {
    timeout: Duration,
    max: usize,
    /// The API server's address, named in transport errors.
    server: std::sync::Arc<str>,
}

impl LimitLayer {
    /// Limits of `timeout` and `max` bytes for requests to `server`.
    pub fn new(timeout: Duration, max: usize, server: &str) -> LimitLayer {
        LimitLayer { timeout, max, server: server.into() }
    }
}

impl<S> tower::Layer<S> for LimitLayer {
    type Service = Limited<S>;

    fn layer(&self, inner: S) -> Limited<S> {
        Limited { inner, limits: self.clone() }
    }
}

/// A service whose answers are limited.
#[derive(Debug, Clone)]
pub struct Limited<S> {
    inner: S,
    limits: LimitLayer,
}

impl<S, ReqB, ResB> tower::Service<Request<ReqB>> for Limited<S>
where
    S: tower::Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    type Response = Response<LimitedBody<ResB>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let watch = request.uri().query().is_some_and(|q| q.split('&').any(|kv| kv == "watch=true"));
        let LimitLayer { timeout, max, server } = self.limits.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            let response = tokio::time::timeout_at(deadline, answer)
                .await
                .map_err(|_| LimitError::NoAnswer(timeout))?
                .map_err(|e| LimitError::Transport { server: server.to_string(), source: e.into() })?;
            Ok(response.map(|body| LimitedBody {
                inner: Box::pin(body),
                max,
                per_line: watch,
                seen: 0,
                deadline: (!watch).then(|| Box::pin(tokio::time::sleep_until(deadline))),
                timeout,
            }))
        })
    }
}

/// A response body cut off at the limits.
pub struct LimitedBody<B> {
    inner: Pin<Box<B>>,
    max: usize,
    /// A watch: the limit is per line, not per body.
    per_line: bool,
    /// Bytes so far (of the body, or of the current line).
    seen: usize,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    timeout: Duration,
}

impl<B> Body for LimitedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(deadline) = self.deadline.as_mut() {
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Some(Err(LimitError::SlowBody(self.timeout).into())));
            }
        }
        let frame = match self.inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(data) = frame.data_ref() {
            let (seen, longest) = measure(self.seen, data.chunk(), self.per_line);
            self.seen = seen;
            if longest > self.max {
                return Poll::Ready(Some(Err(LimitError::TooLarge(self.max).into())));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// After `chunk`: the bytes counted so far (the body's, or the unfinished line's with `per_line`)
/// and the longest run seen, which is what the limit applies to.
fn measure(seen: usize, chunk: &[u8], per_line: bool) -> (usize, usize) {
    if !per_line {
        let total = seen.saturating_add(chunk.len());
        return (total, total);
    }
    let mut run = seen;
    let mut longest = seen;
    for part in chunk.split(|b| *b == b'\n').enumerate() {
        run = if part.0 == 0 { run.saturating_add(part.1.len()) } else { part.1.len() };
        longest = longest.max(run);
    }
    (run, longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_limited_in_total_and_a_watch_per_line() {
        assert_eq!(measure(10, b"abc", false), (13, 13), "a body counts everything");
        assert_eq!(measure(10, b"ab\nc\n", true), (0, 12), "the unfinished line ends at the newline");
        assert_eq!(measure(0, b"a\nbcdef\ngh", true), (2, 5), "the longest line inside a chunk counts");
        assert_eq!(measure(4, b"xy", true), (6, 6), "a line across chunks adds up");
    }

    #[tokio::test]
    async fn an_oversized_or_slow_answer_is_an_error_not_a_hang() {
        use http_body_util::BodyExt;
        use tower::{Layer, Service, ServiceExt};
        let big = tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(http_body_util::Full::new(Bytes::from(vec![
                b'x';
                64
            ]))))
        });
        let mut limited = LimitLayer::new(Duration::from_secs(5), 32, "https://a").layer(big);
        let request = Request::get("/api/v1/nodes/a").body(()).unwrap();
        let response = limited.ready().await.unwrap().call(request).await.unwrap();
        let Err(error) = response.into_body().collect().await else { panic!("not cut off") };
        assert_eq!(error.to_string(), "the API server's answer exceeded 0 MiB, the limit on every answer");

        let never = tower::service_fn(|_: Request<()>| {
            futures::future::pending::<Result<Response<http_body_util::Empty<Bytes>>, std::convert::Infallible>>(
            )
        });
        let mut limited = LimitLayer::new(Duration::from_secs(20), 32, "https://a").layer(never);
        tokio::time::pause();
        let request = Request::get("/api/v1/nodes/a").body(()).unwrap();
        let Err(error) = limited.ready().await.unwrap().call(request).await else { panic!("no deadline") };
        assert_eq!(error.to_string(), "the API server did not answer within 20s");
    }
}
