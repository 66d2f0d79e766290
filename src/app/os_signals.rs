//! The signals a daemon obeys, forwarded to its loop as [`Control`] messages.

use crate::daemon::Control;

/// SIGHUP reloads; SIGTERM (what Kubernetes sends), SIGINT and SIGQUIT stop cleanly. A pass is
/// abandoned for a signal; one that arrives during a refresh or repair waits in the channel, so
/// none is lost.
pub fn install() -> std::io::Result<tokio::sync::mpsc::Receiver<Control>> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut quit = signal(SignalKind::quit())?;
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                _ = hup.recv() => Control::Reload,
                _ = term.recv() => Control::Shutdown,
                _ = int.recv() => Control::Shutdown,
                _ = quit.recv() => Control::Shutdown,
            };
            if tx.send(message).await.is_err() || message == Control::Shutdown {
                return;
            }
        }
    });
    Ok(rx)
}
