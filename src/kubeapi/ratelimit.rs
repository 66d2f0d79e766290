//! `--kube-api-qps` / `--kube-api-burst` as a client-side limit: a tower layer under the kube
//! client that holds each request back until the token bucket (governor) has room. Every request
//! of the process (writes, reads, watch starts and relists) goes through it.

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The layer: `qps` requests per second on average, `burst` at once.
#[derive(Clone)]
pub struct RateLimitLayer {
    limiter: Arc<DefaultDirectRateLimiter>,
}

impl RateLimitLayer {
    /// A limit of `qps` per second with bursts of `burst`; `None` when `qps` is not positive
    /// (no limit, as client-go treats it).
    pub fn new(qps: f64, burst: u32) -> Option<RateLimitLayer> {
        if !qps.is_finite() || qps <= 0.0 {
            return None;
        }
        let burst = NonZeroU32::new(burst.max(1)).expect("at least 1");
        let period = std::time::Duration::from_secs_f64(1.0 / qps);
        let quota = Quota::with_period(period)?.allow_burst(burst);
        Some(RateLimitLayer { limiter: Arc::new(RateLimiter::direct(quota)) })
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited { inner, limiter: self.limiter.clone(), wait: None }
    }
}

/// A service that becomes ready only when the bucket has a token.
pub struct RateLimited<S> {
    inner: S,
    limiter: Arc<DefaultDirectRateLimiter>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S, R> tower::Service<R> for RateLimited<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            match self.limiter.check() {
                Ok(()) => return self.inner.poll_ready(cx),
                Err(not_until) => {
                    let delay = not_until.wait_time_from(DefaultClock::default().now());
                    self.wait = Some(Box::pin(tokio::time::sleep(delay)));
                }
            }
        }
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service};

    /// A service that answers at once, counting calls.
    struct Echo(usize);

    impl Service<()> for Echo {
        type Response = usize;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<usize, Self::Error>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: ()) -> Self::Future {
            self.0 += 1;
            std::future::ready(Ok(self.0))
        }
    }

    async fn ready_call(s: &mut RateLimited<Echo>) {
        std::future::poll_fn(|cx| s.poll_ready(cx)).await.unwrap();
        s.call(()).await.unwrap();
    }

    #[tokio::test]
    async fn a_burst_passes_then_requests_are_spaced_at_the_qps() {
        // Generous bounds: only the order of magnitude is asserted, never machine speed.
        let mut s = RateLimitLayer::new(5.0, 10).unwrap().layer(Echo(0));
        let start = std::time::Instant::now();
        for _ in 0..10 {
            ready_call(&mut s).await;
        }
        assert!(start.elapsed() < std::time::Duration::from_millis(150), "the burst goes through at once");
        let t = std::time::Instant::now();
        for _ in 0..5 {
            ready_call(&mut s).await;
        }
        assert!(t.elapsed() >= std::time::Duration::from_millis(700), "5 more at 5/s: {:?}", t.elapsed());
        assert_eq!(s.inner.0, 15);
    }

    #[test]
    fn no_limit_without_a_positive_qps() {
        assert!(RateLimitLayer::new(0.0, 10).is_none());
        assert!(RateLimitLayer::new(-1.0, 10).is_none());
        assert!(RateLimitLayer::new(f64::NAN, 10).is_none());
    }
}
