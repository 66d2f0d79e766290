//! The process's exit status for the error that ended it: one status for every bad
//! configuration, wherever it was found, so a script or a pod's restart policy can tell "fix the
//! configuration" from "the node or the API failed".
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done (a daemon stopped by a signal too) |
//! | 1 | a failure of the node or the API: no driver, a file that cannot be written, an API error |
//! | 2 | a bad configuration: a flag, environment variable or config file nvlabel cannot use |
//!
//! A configuration that turns bad on a reload never ends the process: it is a rejected reload.

use crate::config::modes::NoEffectError;
use crate::config::source::ReloadError;
use crate::config::{CliError, ConfigError};
use crate::daemon::DaemonError;
use crate::health::prune::PruneError;
use crate::health::task::HealthError;
use crate::kubeapi::ClientError;
use crate::publish::SetupError;

/// The status of a bad configuration (the same as a usage error's).
pub const BAD_CONFIGURATION: i32 = crate::config::usage::EXIT;

/// The status of any other failure.
pub const FAILURE: i32 = 1;

/// The exit status for `e` (see the module's table).
pub fn code(e: &anyhow::Error) -> i32 {
    if is_bad_configuration(e) {
        BAD_CONFIGURATION
    } else {
        FAILURE
    }
}

/// Whether `e` is a configuration nvlabel cannot use, however deep the daemon wrapped it.
pub fn is_bad_configuration(e: &anyhow::Error) -> bool {
    let daemon = e.downcast_ref::<DaemonError>();
    let reload = e.downcast_ref::<ReloadError>();
    let setup = e.downcast_ref::<SetupError>().or(match daemon {
        Some(DaemonError::Setup(s)) => Some(s),
        _ => None,
    });
    let client = e
        .downcast_ref::<ClientError>()
        .or(match daemon {
            Some(DaemonError::Client(c)) => Some(c),
            _ => None,
        })
        .or(match setup {
            Some(SetupError::Client(c)) => Some(c),
            _ => None,
        })
        .or(match e.downcast_ref::<PruneError>() {
            Some(PruneError::Client(c)) => Some(c),
            _ => None,
        });
    reload.is_some()
        // A --kubeconfig that cannot be read or used.
        || client.is_some_and(ClientError::is_bad_configuration)
        || e.downcast_ref::<CliError>().is_some()
        || e.downcast_ref::<ConfigError>().is_some()
        || e.downcast_ref::<NoEffectError>().is_some()
        || matches!(daemon, Some(DaemonError::ListenAddr(_)))
        // --health where labels go nowhere health could write its condition.
        || matches!(daemon, Some(DaemonError::Health(HealthError::NoApi)))
        || matches!(e.downcast_ref::<HealthError>(), Some(HealthError::NoApi))
        || matches!(e.downcast_ref::<PruneError>(), Some(PruneError::NoNodes | PruneError::AllNodesAlone))
        // A writer that lacks a required flag; a client that cannot be built is the node's.
        || matches!(setup, Some(SetupError::NodeName | SetupError::NodeNameToPrint | SetupError::Namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid() -> ConfigError {
        ConfigError::Invalid { path: "/c.yaml".into(), field: "sharing.x".into(), message: "bad".into() }
    }

    #[test]
    fn every_bad_configuration_is_one_status_however_it_is_wrapped() {
        let cases: Vec<(&str, anyhow::Error)> = vec![
            ("file at start", ReloadError::Config(invalid()).into()),
            ("both sources", ReloadError::BothSources.into()),
            ("file alone", invalid().into()),
            (
                "flag value",
                CliError::Invalid {
                    origin: crate::config::flag::Origin::CommandLine(crate::config::Flag::Sink),
                    value: "v".into(),
                    reason: "r".into(),
                }
                .into(),
            ),
            ("listen address", DaemonError::ListenAddr("bogus".into()).into()),
            ("required flag", DaemonError::Setup(SetupError::NodeName).into()),
            (
                "kubeconfig",
                ClientError::Read { path: "/k".into(), source: std::io::ErrorKind::NotFound.into() }.into(),
            ),
            (
                "kubeconfig in the daemon",
                DaemonError::Client(ClientError::Kubeconfig {
                    path: "/k".into(),
                    reason: "no context".into(),
                })
                .into(),
            ),
            (
                "kubeconfig for a writer",
                SetupError::Client(ClientError::Read {
                    path: "/k".into(),
                    source: std::io::ErrorKind::NotFound.into(),
                })
                .into(),
            ),
            (
                "kubeconfig for prune",
                PruneError::Client(ClientError::Read {
                    path: "/k".into(),
                    source: std::io::ErrorKind::NotFound.into(),
                })
                .into(),
            ),
            ("required flag alone", SetupError::Namespace.into()),
            ("required flag, stdout meant", SetupError::NodeNameToPrint.into()),
            ("health without the API", DaemonError::Health(HealthError::NoApi).into()),
            ("prune without nodes", PruneError::NoNodes.into()),
            ("all nodes alone", PruneError::AllNodesAlone.into()),
        ];
        for (name, e) in cases {
            assert_eq!(code(&e), BAD_CONFIGURATION, "{name}: {e}");
        }
    }

    #[test]
    fn a_failure_of_the_node_or_the_api_is_not_a_bad_configuration() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        assert_eq!(code(&anyhow::Error::from(io)), FAILURE);
        assert_eq!(code(&DaemonError::Setup(SetupError::NoClient("node")).into()), FAILURE);
        // No API server to be found at all is the node's (not in a pod, no kubeconfig).
        let infer = ClientError::Infer { reason: "not in a pod".into() };
        assert_eq!(code(&DaemonError::Client(infer).into()), FAILURE);
    }
}
