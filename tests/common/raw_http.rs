//! A misbehaving "API server" on a loopback port, speaking raw HTTP/1.1: it answers never, with a
//! huge body, with a body that stalls after its headers, or with a fixed status, and records every request head. For the faults a mocked
//! tower service cannot show (deadlines, body limits, headers the real client sends).
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How the server answers.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// Accepts the connection and the request, never answers.
    Never,
    /// 200 with a body of this many bytes of `x` (not JSON).
    Huge(usize),
    /// This status with a small Status body.
    Status(u16),
    /// 200 and its headers promising a body, the body's first bytes, then nothing more (the
    /// connection held open).
    StallBody,
}

/// A running server.
pub struct RawServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Every request head received, lower-cased.
    pub heads: Arc<Mutex<Vec<String>>>,
}

impl RawServer {
    /// A kube configuration pointing at it.
    pub fn config(&self) -> kube::Config {
        kube::Config::new(self.url.parse().unwrap())
    }
}

/// Starts a server answering every request with `answer`.
pub async fn start(answer: Answer) -> RawServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            let seen = seen.clone();
            tokio::spawn(async move {
                loop {
                    let Some(head) = read_head(&mut stream).await else { return };
                    seen.lock().unwrap().push(head.to_lowercase());
                    if answer_one(&mut stream, answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    RawServer { url, heads }
}

async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(head)
}

async fn answer_one(stream: &mut tokio::net::TcpStream, answer: Answer) -> std::io::Result<()> {
    match answer {
        Answer::Never => futures::future::pending().await,
        Answer::Huge(size) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            let chunk = vec![b'x'; 64 << 10];
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len());
                stream.write_all(&chunk[..n]).await?;
                left -= n;
            }
            Ok(())
        }
        Answer::StallBody => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4096\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(br#"{"apiVersion":"v1","#).await?;
            stream.flush().await?;
            futures::future::pending().await
        }
        Answer::Status(code) => {
            let body = format!(
                r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"answered {code}","reason":"x","code":{code}}}"#
            );
            let head = format!(
                "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await
        }
    }
}
