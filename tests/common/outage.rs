//! A private kube-apiserver a test may break, and nvlabel as an operator runs it against one.
//! The server (`kube-test-server`) writes an audit log, so writes are counted by the server, not
//! by nvlabel. It can be stopped and started again on the same port with its store kept (a
//! restart), or started again with an empty store (behind [`Proxy`], whose address stays).
//! Without `NVLABEL_KUBE_TEST_SERVER` the tests skip with one line.
#![allow(dead_code)]

use super::apiserver::{self, client_from};
use super::proxy::Proxy;
use kube::Client;
use serde_json::Value;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Everything the API server did, at the Metadata level (who, what, on which object).
const AUDIT_POLICY: &str =
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n";

/// A private API server.
pub struct Private {
    dir: tempfile::TempDir,
    script: PathBuf,
    /// In front of the server, for clients that must find it again after a new store.
    pub proxy: Proxy,
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = Command::new(&self.script).arg("stop").arg(self.dir.path()).status();
    }
}

impl Private {
    /// Starts one, or says why not (once) and returns `None`.
    pub async fn start(test: &str) -> Option<Private> {
        let Some(script) = std::env::var_os(apiserver::VAR).filter(|v| !v.is_empty()) else {
            eprintln!("skipping {test}: {} is not set (CI sets it to kube-test-server)", apiserver::VAR);
            return None;
        };
        let dir = tempfile::Builder::new().prefix("nvlabel-outage-").tempdir().unwrap();
        std::fs::write(dir.path().join("audit-policy.yaml"), AUDIT_POLICY).unwrap();
        let private = Private { proxy: Proxy::start("127.0.0.1:1").await, dir, script: script.into() };
        private.kts("start");
        private.proxy.switch(&private.addr());
        Some(private)
    }

    /// Runs the script (`start` or `stop`), the audit log on.
    fn kts(&self, command: &str) {
        let d = self.dir.path().display();
        let audit = format!("--audit-log-path={d}/audit.log --audit-policy-file={d}/audit-policy.yaml");
        let args = format!("{} {audit}", std::env::var("KUBE_TEST_SERVER_ARGS").unwrap_or_default());
        let status = Command::new(&self.script)
            .arg(command)
            .arg(self.dir.path())
            .env("KUBE_TEST_SERVER_ARGS", args)
            .status()
            .unwrap();
        assert!(status.success(), "kube-test-server {command} {d}");
    }

    /// `host:port` of the server now.
    pub fn addr(&self) -> String {
        let url = std::fs::read_to_string(self.dir.path().join("server")).unwrap();
        url.trim().trim_start_matches("https://").to_string()
    }

    /// The administrator's kubeconfig, straight to the server.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// A kubeconfig for `token` (the administrator's when `None`) that goes through the proxy.
    pub fn kubeconfig_via_proxy(&self, name: &str, token: Option<&str>) -> PathBuf {
        let admin = std::fs::read_to_string(self.kubeconfig()).unwrap();
        let mut text = admin.replace(&self.addr(), &self.proxy.addr.to_string());
        if let Some(token) = token {
            let old = std::fs::read_to_string(self.dir.path().join("pki/admin.token")).unwrap();
            text = text.replace(old.trim(), token);
        }
        let path = self.dir.path().join(format!("kubeconfig-{name}"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A cluster-admin client, straight to the server (as it is now).
    pub async fn admin(&self) -> Client {
        client_from(&self.kubeconfig()).await
    }

    /// Stops the API server process (etcd stays), waits `down`, starts it again with the same
    /// command line (so the same port) and returns once it is ready.
    pub async fn restart(&self, down: Duration) -> Instant {
        let pids = std::fs::read_to_string(self.dir.path().join("pids")).unwrap();
        let pid: u32 = pids
            .lines()
            .find_map(|l| l.strip_suffix(" kube-apiserver"))
            .and_then(|p| p.trim().parse().ok())
            .expect("a kube-apiserver pid");
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        // As the kubelet stops it: SIGTERM, and SIGKILL after a grace period (with a client's
        // HTTP/2 watch open, kube-apiserver 1.36 may not finish its own shutdown).
        assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
        let gone = Instant::now();
        while alive(pid) {
            if gone.elapsed() > Duration::from_secs(5) {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
            assert!(gone.elapsed() < Duration::from_secs(30), "kube-apiserver {pid} did not stop");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(down).await;
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("logs/kube-apiserver.log"))
            .unwrap();
        let child = {
            use std::os::unix::process::CommandExt;
            Command::new(&argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .process_group(0)
                .spawn()
                .unwrap()
        };
        // The script's `stop` finds the new process through its pids file.
        let pids = pids.replace(&format!("{pid} kube-apiserver"), &format!("{} kube-apiserver", child.id()));
        std::fs::write(self.dir.path().join("pids"), pids).unwrap();
        self.until_ready().await
    }

    /// Stops etcd and the API server and starts both again with an empty store, on new ports
    /// behind the same proxy address; returns once the server is ready.
    pub async fn wipe(&self) -> Instant {
        self.kts("stop");
        self.kts("start");
        self.proxy.switch(&self.addr());
        self.until_ready().await
    }

    async fn until_ready(&self) -> Instant {
        let start = Instant::now();
        loop {
            let admin = self.admin().await;
            let ready = admin.request_text(http::Request::get("/readyz").body(Vec::new()).unwrap()).await;
            if ready.is_ok_and(|t| t.trim() == "ok") {
                return Instant::now();
            }
            assert!(start.elapsed() < Duration::from_secs(90), "the API server never became ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// nvlabel's writes so far, from the audit log: (verb, resource, name), in order.
    pub fn nvlabel_writes(&self) -> Vec<(String, String, String)> {
        let Ok(text) = std::fs::read_to_string(self.dir.path().join("audit.log")) else { return Vec::new() };
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("nvlabel/")))
            .filter(|e| matches!(e["verb"].as_str(), Some("create" | "update" | "patch" | "delete")))
            .map(|e| {
                let field = |k: &str| e["objectRef"][k].as_str().unwrap_or_default().to_string();
                (e["verb"].as_str().unwrap().to_string(), field("resource"), field("name"))
            })
            .collect()
    }
}

/// Whether `pid` runs (a zombie, which nobody may reap in a container, does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

/// nvlabel running as a process, its JSON log lines collected as they come.
pub struct Process {
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, Value)>>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Starts the binary on the T4 machine with `args`, logging at its default level.
    pub fn start(args: &[&str]) -> Process {
        let mut cmd = super::nvlabel(Some("t4"));
        cmd.env_remove("RUST_LOG").args(["--log-format", "json", "--no-timestamp"]).args(args);
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                sink.lock().unwrap().push((Instant::now(), value));
            }
        });
        Process { child, lines }
    }

    /// The lines logged since `since`.
    pub fn lines_since(&self, since: Instant) -> Vec<Value> {
        self.lines.lock().unwrap().iter().filter(|(at, _)| *at >= since).map(|(_, v)| v.clone()).collect()
    }

    /// Every line, as text (for failure messages).
    pub fn log(&self) -> String {
        self.lines.lock().unwrap().iter().map(|(_, v)| format!("{v}\n")).collect()
    }

    /// Waits (up to 60 s) for a line whose text contains `needle`.
    pub async fn until_line(&self, needle: &str) -> Value {
        let start = Instant::now();
        loop {
            let found =
                self.lines.lock().unwrap().iter().find(|(_, v)| v.to_string().contains(needle)).cloned();
            if let Some((_, v)) = found {
                return v;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no line with {needle:?}:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops it with SIGTERM and returns its exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        super::stop_with(&mut self.child, "-TERM")
    }
}

/// Polls `probe` every 100 ms until it returns true; how long that took after `since`, or a
/// failure naming `what` after `limit`.
pub async fn within<F, Fut>(what: &str, since: Instant, limit: Duration, probe: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if probe().await {
            return since.elapsed();
        }
        assert!(since.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A token of service account `sa` (not bound to a pod: the private server has no policy that
/// asks for one).
pub async fn token(admin: &Client, namespace: &str, sa: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let api: kube::Api<ServiceAccount> = kube::Api::namespaced(admin.clone(), namespace);
    let request: TokenRequest =
        serde_json::from_value(serde_json::json!({"spec": {"expirationSeconds": 3600}})).unwrap();
    let answer = api.create_token_request(sa, &Default::default(), &request).await.unwrap();
    serde_json::to_value(answer).unwrap()["status"]["token"].as_str().unwrap().to_string()
}

/// The status of a plain HTTP GET of `url` (nvlabel's endpoint), or `None`.
pub async fn http_status(url: &str) -> Option<u16> {
    let addr = url.strip_prefix("http://")?.split('/').next()?.to_string();
    let path = url.splitn(4, '/').nth(3).map(|p| format!("/{p}")).unwrap_or_else(|| "/".into());
    let mut stream = tokio::net::TcpStream::connect(&addr).await.ok()?;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await.ok()?.ok()?;
    String::from_utf8_lossy(&answer).split_whitespace().nth(1)?.parse().ok()
}
