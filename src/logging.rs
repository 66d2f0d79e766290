//! tracing setup: logs go to stderr (stdout carries labels), text or JSON, `RUST_LOG` filters.

use tracing_subscriber::EnvFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The filter without `RUST_LOG`: `info`, except the file-watch library's own log lines below
/// `error`. It reports races it resolves itself (a watch removed twice when a watched directory
/// goes away) at `info`, as a Debug dump (`Os { code: 22, ... }`); nvlabel says what matters
/// (the config file is gone) itself. The same for the Kubernetes client's own lines: on an answer
/// it cannot parse it warns with the whole body (megabytes, from a hostile or broken server),
/// while nvlabel logs every API failure itself, once, with a short excerpt. The Kubernetes
/// client's stack (kube, hyper, rustls, tower, h2) is off altogether: during an API server outage
/// it logs every failed connection (`failed with error client error (Connect)`, no address) and a
/// `close_notify` warning on every restart, lines nobody can act on, while nvlabel's own lines
/// name the server, what failed and when it retries. A `RUST_LOG` that names one of them turns
/// it back on; one that does not (`RUST_LOG=warn`) keeps them as here.
pub const DEFAULT_FILTER: &str =
    "info,notify=error,kube=off,kube_client=off,hyper=off,hyper_util=off,rustls=off,tower=off,h2=off";

/// `RUST_LOG`'s directives, then [`DEFAULT_FILTER`]'s for each library they do not name.
pub fn filter_with(rust_log: &str) -> String {
    let names = |target: &str| {
        rust_log.split(',').any(|d| {
            let t = d.split(['=', '[']).next().unwrap_or_default().trim();
            t == target || t.starts_with(&format!("{target}::"))
        })
    };
    let quiet = DEFAULT_FILTER.split(',').skip(1).filter(|d| !names(d.split('=').next().unwrap_or_default()));
    std::iter::once(rust_log).chain(quiet).filter(|d| !d.is_empty()).collect::<Vec<_>>().join(",")
}

/// Installs the global subscriber: [`filter_with`] `RUST_LOG`, or [`DEFAULT_FILTER`].
pub fn init(format: LogFormat) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(user) => EnvFilter::try_new(filter_with(&user)).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER)),
        Err(_) => EnvFilter::new(DEFAULT_FILTER),
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// An error and its causes on one line, each cause once: messages here often quote their source
/// already, and printing the chain after them would say the same thing twice.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}

/// Reports the error that ends the process, with what to do about it when known: a JSON log
/// line with `--log-format json`, else one `nvlabel: error: ...` line on stderr.
pub fn fatal(format: LogFormat, error: &(dyn std::error::Error + 'static), hint: Option<&str>) {
    let text = error_chain(error);
    match (format, hint) {
        (LogFormat::Json, Some(hint)) => tracing::error!(error = %text, hint, "nvlabel stopped"),
        (LogFormat::Json, None) => tracing::error!(error = %text, "nvlabel stopped"),
        (LogFormat::Text, Some(hint)) => eprintln!("nvlabel: error: {text} ({hint})"),
        (LogFormat::Text, None) => eprintln!("nvlabel: error: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_keeps_the_client_stack_off_unless_it_names_it() {
        assert_eq!(
            filter_with("warn"),
            "warn,notify=error,kube=off,kube_client=off,hyper=off,hyper_util=off,rustls=off,tower=off,h2=off"
        );
        assert_eq!(
            filter_with("debug,kube_client::client=debug,hyper=info"),
            "debug,kube_client::client=debug,hyper=info,notify=error,kube=off,hyper_util=off,rustls=off,tower=off,h2=off"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("unable to load config file /x: {source}")]
    struct Quoting {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Plain(#[source] std::io::Error);

    #[test]
    fn the_client_stacks_lines_are_off_by_default_nvlabels_are_on() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        use tracing_subscriber::layer::SubscriberExt;
        struct Count(Arc<AtomicUsize>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Count {
            fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let seen = Arc::new(AtomicUsize::new(0));
        let subscriber =
            tracing_subscriber::registry().with(EnvFilter::new(DEFAULT_FILTER)).with(Count(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "kube_client::client", "failed with error client error (Connect)");
            tracing::warn!(target: "rustls::conn", "Sending warning alert CloseNotify");
            tracing::error!(target: "hyper_util::client", "connect error");
            tracing::warn!(target: "tower::buffer", "closed");
            assert_eq!(seen.load(Ordering::Relaxed), 0, "the client stack's lines are off");
            tracing::info!(target: "nvlabel::kubeapi::object_watch", "the watch failed");
            assert_eq!(seen.load(Ordering::Relaxed), 1, "nvlabel's own are on");
        });
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = || std::io::Error::from_raw_os_error(2);
        assert_eq!(
            error_chain(&Quoting { source: io() }),
            "unable to load config file /x: No such file or directory (os error 2)"
        );
        assert_eq!(error_chain(&Plain(io())), "outer: No such file or directory (os error 2)");
    }
}
