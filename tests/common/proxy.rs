//! A TCP forwarder in front of a test's API server, so a server started again on another port
//! (a new store) is found at the same address.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

/// A TCP forwarder with a stable address whose target can be switched; switching cuts every open
/// connection, as a load balancer in front of a restarted API server does.
pub struct Proxy {
    /// The address clients connect to.
    pub addr: std::net::SocketAddr,
    target: Arc<Mutex<String>>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Proxy {
    /// Forwards to `target` (`host:port`).
    pub async fn start(target: &str) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Arc::new(Mutex::new(target.to_string()));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let to = target.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = to.lock().unwrap().clone();
                let mut cuts = cuts.clone();
                cuts.borrow_and_update();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Proxy { addr, target, cut }
    }

    /// Forwards new connections to `target` and cuts the open ones.
    pub fn switch(&self, target: &str) {
        *self.target.lock().unwrap() = target.to_string();
        self.cut.send_modify(|n| *n += 1);
    }
}
