//! Kubernetes API errors as one line a person can act on: what was attempted, on which object,
//! the status code, the server's message once (cut to a short excerpt, whatever the server sent),
//! and the fix where one is known.

use std::fmt;

/// The longest excerpt of a server's message or an error chain put into a log line.
pub const EXCERPT: usize = 300;

/// `text` cut to [`EXCERPT`] characters, on a character boundary, marked when cut.
pub fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT) {
        Some((at, _)) => format!("{}… ({} bytes in all)", &text[..at], text.len()),
        None => text.to_string(),
    }
}

/// The API server this process talks to, named in every answer it refused: a transport error
/// names it already (the limit layer's doing), a status does not. One per process, as nvlabel
/// builds one client; set by [`super::client`].
static SERVER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Remembers the API server's address for the error lines (the first one set stays).
pub(super) fn remember_server(url: &str) {
    let _ = SERVER.set(url.trim_end_matches('/').to_string());
}

/// The API server's address for a log line (`unknown` before a client was built).
pub fn server() -> &'static str {
    SERVER.get().map_or("unknown", String::as_str)
}

/// A kube error on one line without Debug dumps: the status code and the server's message (with
/// the server's address, once known), or the transport error's causes, each once.
pub struct Short<'a>(pub &'a kube::Error);

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        short(f, self.0, SERVER.get().map(String::as_str))
    }
}

/// [`Short`] with the server given.
fn short(f: &mut fmt::Formatter<'_>, error: &kube::Error, server: Option<&str>) -> fmt::Result {
    match error {
        kube::Error::Api(status) => {
            let message = status.message.split(": Failed to parse error data").next().unwrap_or_default();
            if let Some(server) = server {
                write!(f, "{server}: ")?;
            }
            write!(f, "{} {}", status.code, excerpt(message))
        }
        // kube's own wrapper ("ServiceError: ...") says nothing a person needs.
        kube::Error::Service(e) => f.write_str(&excerpt(&crate::logging::error_chain(e.as_ref()))),
        other => f.write_str(&excerpt(&crate::logging::error_chain(other))),
    }
}

/// Resources only GPU health writes: a 403 on them is most often nvlabel's image in the GPU
/// Operator's pod with health on, whose RBAC the Operator owns and grants nothing for health.
const HEALTH_ONLY: [&str; 2] = ["nodes/status", "events.events.k8s.io"];

/// Where health's grants are: the chart's, and the manifest for the Operator's ServiceAccount.
const HEALTH_RBAC: &str =
    "deploy/; in the GPU Operator's pod, docs/migration.md, \"GPU health in the Operator's pod\"";

/// One failed API request: what was attempted, on which object, why, and the fix.
#[derive(Debug)]
pub struct ApiFailure {
    /// What was attempted (`apply labels to`, `read`, `create`).
    pub action: &'static str,
    /// The object (`Node gpu-1`, `NodeFeature gpu-operator/nvidia-features-for-gpu-1`).
    pub object: String,
    /// The RBAC verb and resource of the request, for the hint on a 403.
    pub verb: &'static str,
    /// The resource (plural), with its group when not core.
    pub resource: &'static str,
    /// The error.
    pub source: kube::Error,
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot {} {}: {}", self.action, self.object, Short(&self.source))?;
        match &self.source {
            // OwnerReferencesPermissionEnforcement (OpenShift's default): changing an object's
            // owner needs `delete` on it, whatever verb the request itself was.
            kube::Error::Api(s) if s.code == 403 && s.message.contains("cannot set an ownerRef") => write!(
                f,
                " (RBAC: changing the owner of {} needs the `delete` verb on {} where the OwnerReferencesPermissionEnforcement admission plugin runs; see deploy/)",
                self.object, self.resource
            ),
            kube::Error::Api(s) if s.code == 403 => write!(
                f,
                " (RBAC: nvlabel's ServiceAccount needs the `{}` verb on {}; see {})",
                self.verb,
                self.resource,
                if HEALTH_ONLY.contains(&self.resource) { HEALTH_RBAC } else { "deploy/" }
            ),
            kube::Error::Api(s) if s.code == 404 && s.message.contains("namespaces") => {
                f.write_str(" (the namespace does not exist: create it, or set --namespace)")
            }
            kube::Error::Api(s) if s.code == 404 && self.resource.starts_with("nodefeatures") => f.write_str(
                " (the NodeFeature CRD nodefeatures.nfd.k8s-sigs.io is not installed: install NFD or its CRDs, or run with --use-node-feature-api=false)",
            ),
            _ => Ok(()),
        }
    }
}

// No `source()`: the message carries the error's causes already, each once; a source would add
// kube's `ServiceError: ...` wrapper to the one line a second time.
impl std::error::Error for ApiFailure {}

impl crate::exit::Classify for ApiFailure {
    /// An API server's refusal is the cluster's, even where its fix is a flag (a namespace that
    /// does not exist, NFD's CRD not installed).
    fn is_bad_configuration(&self) -> bool {
        false
    }
}

impl ApiFailure {
    /// The HTTP status, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match &self.source {
            kube::Error::Api(s) => Some(s.code),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure(message, "").with_code(code)))
    }

    fn failure(resource: &'static str, source: kube::Error) -> String {
        ApiFailure { action: "update", object: "NodeFeature ns/x".into(), verb: "update", resource, source }
            .to_string()
    }

    #[test]
    fn a_missing_crd_names_the_fix() {
        let text = failure(
            "nodefeatures.nfd.k8s-sigs.io",
            status(
                404,
                "404 page not found\n: Failed to parse error data (Status { status: Some(Failure) })",
            ),
        );
        assert_eq!(
            text,
            "cannot update NodeFeature ns/x: 404 404 page not found (the NodeFeature CRD nodefeatures.nfd.k8s-sigs.io is not installed: install NFD or its CRDs, or run with --use-node-feature-api=false)"
        );
    }

    #[test]
    fn a_403_names_the_missing_verb_once() {
        let text = failure(
            "nodefeatures.nfd.k8s-sigs.io",
            status(403, "nodefeatures is forbidden: User \"x\" cannot update"),
        );
        assert_eq!(
            text,
            "cannot update NodeFeature ns/x: 403 nodefeatures is forbidden: User \"x\" cannot update (RBAC: nvlabel's ServiceAccount needs the `update` verb on nodefeatures.nfd.k8s-sigs.io; see deploy/)"
        );
    }

    #[test]
    fn a_refused_owner_change_names_delete_not_the_requests_verb() {
        // What a kube-apiserver with OwnerReferencesPermissionEnforcement answers.
        let said = "nodefeatures.nfd.k8s-sigs.io \"x\" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>";
        let text = failure("nodefeatures.nfd.k8s-sigs.io", status(403, said));
        assert!(text.ends_with("(RBAC: changing the owner of NodeFeature ns/x needs the `delete` verb on nodefeatures.nfd.k8s-sigs.io where the OwnerReferencesPermissionEnforcement admission plugin runs; see deploy/)"), "{text}");
    }

    #[test]
    fn a_403_on_what_only_health_writes_points_to_health_under_the_gpu_operator() {
        for resource in HEALTH_ONLY {
            let text = failure(resource, status(403, "forbidden"));
            assert!(text.ends_with("; see deploy/; in the GPU Operator's pod, docs/migration.md, \"GPU health in the Operator's pod\")"), "{text}");
        }
        assert!(failure("nodes", status(403, "forbidden")).ends_with("; see deploy/)"));
    }

    #[test]
    fn a_refusal_names_the_server_that_answered() {
        struct With<'a>(&'a kube::Error);
        impl fmt::Display for With<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                short(f, self.0, Some("https://10.0.0.1:443"))
            }
        }
        let text = With(&status(503, "the server is currently unable to handle the request")).to_string();
        assert_eq!(text, "https://10.0.0.1:443: 503 the server is currently unable to handle the request");
    }

    #[test]
    fn a_huge_message_is_cut_to_an_excerpt() {
        let text = Short(&status(500, &"x".repeat(100_000))).to_string();
        assert!(text.len() < EXCERPT + 40, "{}", text.len());
        assert!(text.ends_with("(100000 bytes in all)"), "{text}");
    }
}
