//! A DeviceTaintRule's spec as nvlabel writes and compares it: the one device it selects
//! (`driver`, `pool`, `device`) and the taint (`key`, `value`, `effect`). The API server adds
//! fields of its own (the taint's `timeAdded`); the typed spec has no place for them, so they
//! never make a rule look changed. Every field is optional because a rule read back may lack
//! one: a rule missing a field nvlabel writes is not the rule nvlabel wants.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The taint key nvlabel writes (never the DRA driver's own `gpu.nvidia.com/...` keys).
pub const KEY: &str = "nvidia.com/gpu-health";

// The fields are declared in alphabetical order: serialized, a rule is then the very bytes
// nvlabel sent when it built the body as a JSON value (whose maps sort their keys).

/// A rule's spec: the device it selects and the taint. Two specs are the same rule when these
/// six fields are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// The device.
    #[serde(default)]
    pub device_selector: DeviceSelector,
    /// The taint.
    #[serde(default)]
    pub taint: Taint,
}

/// The one device a rule selects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSelector {
    /// The device's name in its slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The DRA driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The pool (NVIDIA's driver names it after the node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// A device taint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taint {
    /// `NoSchedule`, `NoExecute` or `None`, as the API spells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    /// The taint key ([`KEY`] for nvlabel's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The fault's condition reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl Spec {
    /// nvlabel's rule on `device` of `pool` (of `driver`): taint [`KEY`] with the fault's
    /// `reason` as its value and `effect` (the API's spelling).
    pub fn new(driver: &str, pool: &str, device: &str, reason: &str, effect: &str) -> Spec {
        Spec {
            device_selector: DeviceSelector {
                device: Some(device.into()),
                driver: Some(driver.into()),
                pool: Some(pool.into()),
            },
            taint: Taint { effect: Some(effect.into()), key: Some(KEY.into()), value: Some(reason.into()) },
        }
    }
}

/// Writes `value` as the API has it (compact JSON), as the log lines have always shown it.
fn json(f: &mut fmt::Formatter<'_>, value: &impl Serialize) -> fmt::Result {
    f.write_str(&serde_json::to_string(value).map_err(|_| fmt::Error)?)
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        json(f, self)
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        json(f, self)
    }
}
