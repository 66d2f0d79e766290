//! The device-plugin / GFD config file (`version: v1`): `flags`, `resources` and `sharing`,
//! read as GFD reads it (same defaults, same validation texts, same post-processing), with better
//! errors: each names the file and the YAML path, plus line and column for syntax errors. Unknown
//! fields are warned about instead of silently ignored.

use crate::duration::Interval;
use crate::exit::Classify;
use crate::sharing::Sharing;
/// Whether config text is blank (see [`crate::yaml::is_blank`]): defaults at start-up, refused on
/// reload ([`super::source`]).
pub use crate::yaml::is_blank;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A loaded, validated config file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigFile {
    /// `flags`, applied below the command line and env.
    pub flags: FileFlags,
    /// `sharing`, after GFD's `DisableResourceNamingInConfig`.
    pub sharing: Sharing,
    /// Warnings: unknown fields, ignored settings, how durations were read.
    pub warnings: Vec<String>,
}

/// `flags`: the fields GFD reads, and the device plugin's that it accepts and ignores.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileFlags {
    /// `migStrategy`.
    #[serde(default, deserialize_with = "fields::text")]
    pub mig_strategy: Option<String>,
    /// `failOnInitError`.
    #[serde(default, deserialize_with = "fields::boolean")]
    pub fail_on_init_error: Option<bool>,
    /// `mpsRoot` (device plugin only).
    #[serde(default, deserialize_with = "fields::text")]
    pub mps_root: Option<String>,
    /// `nvidiaDriverRoot` (device plugin only).
    #[serde(default, deserialize_with = "fields::text")]
    pub nvidia_driver_root: Option<String>,
    /// `nvidiaDevRoot` (device plugin only).
    #[serde(default, deserialize_with = "fields::text")]
    pub nvidia_dev_root: Option<String>,
    /// `gdrcopyEnabled` (device plugin only).
    #[serde(default, deserialize_with = "fields::boolean")]
    pub gdrcopy_enabled: Option<bool>,
    /// `gdsEnabled` (device plugin only).
    #[serde(default, deserialize_with = "fields::boolean")]
    pub gds_enabled: Option<bool>,
    /// `mofedEnabled` (device plugin only).
    #[serde(default, deserialize_with = "fields::boolean")]
    pub mofed_enabled: Option<bool>,
    /// `useNodeFeatureAPI`.
    #[serde(default, rename = "useNodeFeatureAPI", deserialize_with = "fields::boolean")]
    pub use_node_feature_api: Option<bool>,
    /// `deviceDiscoveryStrategy`.
    #[serde(default, deserialize_with = "fields::text")]
    pub device_discovery_strategy: Option<String>,
    /// `plugin` (device plugin only; accepted as is).
    #[serde(default)]
    pub plugin: Option<Value>,
    /// `gfd`.
    #[serde(default)]
    pub gfd: Option<GfdFlags>,
    /// `extendedLabels` (nvlabel's own; GFD and the device plugin do not read it).
    #[serde(default, deserialize_with = "fields::boolean")]
    pub extended_labels: Option<bool>,
    /// `allocationMode` (nvlabel's own): `device-plugin`, `dra` or `auto`.
    #[serde(default, deserialize_with = "fields::text")]
    pub allocation_mode: Option<String>,
    /// `health` (nvlabel's own): publish the GPU health condition.
    #[serde(default, deserialize_with = "fields::boolean")]
    pub health: Option<bool>,
    /// `healthConditionType` (nvlabel's own).
    #[serde(default, deserialize_with = "fields::text")]
    pub health_condition_type: Option<String>,
    /// `healthIgnoreXids` (nvlabel's own): Xids that are not faults, as the flag's text
    /// (`"13,31"`) or a YAML list of numbers (`[13, 31]`, as the chart's `health.ignoreXids`).
    #[serde(default, deserialize_with = "fields::xid_list")]
    pub health_ignore_xids: Option<String>,
    /// `healthFatalXids` (nvlabel's own): Xids that are always faults, in the same forms.
    #[serde(default, deserialize_with = "fields::xid_list")]
    pub health_fatal_xids: Option<String>,
    /// `healthXidThresholds` (nvlabel's own): Xids that are faults when they repeat, as the
    /// flag's text (`"43:3/1m,13:5/10m"`) or a YAML list of its items (`["43:3/1m"]`, as the
    /// chart's `health.xidThresholds`).
    #[serde(default, deserialize_with = "fields::text_list")]
    pub health_xid_thresholds: Option<String>,
    /// `healthTaintEffect` (nvlabel's own): the device taints' effect.
    #[serde(default, deserialize_with = "fields::text")]
    pub health_taint_effect: Option<String>,
    /// `healthExpectedGpus` (nvlabel's own): the GPUs the node should have.
    #[serde(default, deserialize_with = "fields::text")]
    pub health_expected_gpus: Option<String>,
    /// `healthNvmlTimeout` (nvlabel's own): how long an NVML call may run.
    #[serde(default, deserialize_with = "fields::text")]
    pub health_nvml_timeout: Option<String>,
    /// `healthRecoveryHold` (nvlabel's own): how long a fault must read as gone to clear.
    #[serde(default, deserialize_with = "fields::text")]
    pub health_recovery_hold: Option<String>,
}

impl FileFlags {
    /// The device plugin's keys, read and ignored; every other key sets one of nvlabel's flags
    /// (its row in [`super::rows`] names it).
    pub const DEVICE_PLUGIN_KEYS: &'static [&'static str] = &[
        "mpsRoot",
        "nvidiaDriverRoot",
        "nvidiaDevRoot",
        "gdrcopyEnabled",
        "gdsEnabled",
        "mofedEnabled",
        "plugin",
    ];
}

/// `flags.gfd`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GfdFlags {
    /// `oneshot`.
    #[serde(default, deserialize_with = "fields::boolean")]
    pub oneshot: Option<bool>,
    /// `noTimestamp`.
    #[serde(default, deserialize_with = "fields::boolean")]
    pub no_timestamp: Option<bool>,
    /// `sleepInterval`: a duration string, `infinite`, or a number of seconds.
    #[serde(default, deserialize_with = "fields::interval")]
    pub sleep_interval: Option<Interval>,
    /// `outputFile`.
    #[serde(default, deserialize_with = "fields::text")]
    pub output_file: Option<String>,
    /// `machineTypeFile`.
    #[serde(default, deserialize_with = "fields::text")]
    pub machine_type_file: Option<String>,
}

/// Why a config file was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("unable to load config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not text at all (a binary file, the wrong file mounted).
    #[error(
        "unable to parse config file {path}: not a text file (byte {offset} {what}); expected YAML or JSON"
    )]
    NotText {
        /// The file.
        path: PathBuf,
        /// Where the first offending byte is.
        offset: usize,
        /// What is wrong with it.
        what: String,
    },
    /// Not YAML (or JSON); the parser's message carries line and column.
    #[error("unable to parse config file {path}: {source}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        source: crate::yaml::YamlError,
    },
    /// A field has an unacceptable value.
    #[error("invalid config file {path}: {field}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// YAML path of the field (`sharing.timeSlicing.resources[0].replicas`).
        field: String,
        /// GFD's message for it.
        message: String,
    },
}

impl Classify for ConfigError {
    /// A config file that is missing is as bad as one that is not YAML: the operator named it.
    fn is_bad_configuration(&self) -> bool {
        match self {
            ConfigError::Read { .. }
            | ConfigError::NotText { .. }
            | ConfigError::Syntax { .. }
            | ConfigError::Invalid { .. } => true,
        }
    }
}

/// A validation failure inside the file: (YAML path, message).
type Bad = (String, String);

fn bad(field: impl Into<String>, message: impl Into<String>) -> Bad {
    (field.into(), message.into())
}

impl ConfigFile {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let bytes = crate::limits::read(path, crate::limits::CONFIG_FILE)
            .map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::from_bytes(path, &bytes)
    }

    /// Parses the bytes of the file at `path` (named in errors).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<ConfigFile, ConfigError> {
        // A binary file would end up quoted in the parser's message and printed to the terminal.
        if let Some(offset) = bytes.iter().position(|b| b.is_ascii_control() && !b"\t\n\r".contains(b)) {
            return Err(ConfigError::NotText {
                path: path.into(),
                offset,
                what: format!("is the control character U+{:04X}", bytes[offset]),
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| ConfigError::NotText {
            path: path.into(),
            offset: e.valid_up_to(),
            what: "is not UTF-8".into(),
        })?;
        Self::parse(text).map_err(|e| match e {
            ParseError::Syntax(source) => ConfigError::Syntax { path: path.into(), source },
            ParseError::Invalid((field, message)) => {
                ConfigError::Invalid { path: path.into(), field, message }
            }
        })
    }

    /// Parses config text (YAML or JSON). When a field is invalid, the unknown fields met on the
    /// way are named in the error too: `replica: 2` is why `replicas` is missing.
    pub fn parse(text: &str) -> Result<ConfigFile, ParseError> {
        let mut warnings = Vec::new();
        match Self::parse_noting(text, &mut warnings) {
            Err(ParseError::Invalid((field, message))) if !warnings.is_empty() => {
                let unknown: Vec<&str> =
                    warnings.iter().filter(|w| w.starts_with("unknown field")).map(String::as_str).collect();
                let message = match unknown.is_empty() {
                    true => message,
                    false => format!("{message} (also: {}; a misspelling?)", unknown.join("; ")),
                };
                Err(ParseError::Invalid((field, message)))
            }
            other => other,
        }
    }

    /// [`ConfigFile::parse`], noting warnings in `warnings` as it goes.
    fn parse_noting(text: &str, warnings: &mut Vec<String>) -> Result<ConfigFile, ParseError> {
        // An empty file (GFD's config-manager links /dev/null) is v1 with defaults, and so is one
        // of comments only, as in GFD (an empty YAML document decodes to the zero value).
        if is_blank(text) {
            return Ok(ConfigFile::default());
        }
        let value: Value = crate::yaml::from_str(text).map_err(ParseError::Syntax)?;
        let Value::Object(top) = value else {
            return Err(ParseError::Invalid(bad("(top level)", "expected a mapping")));
        };
        const TOP: [&str; 5] = ["version", "flags", "resources", "sharing", "imex"];
        if let Some(k) = top.keys().find(|k| !TOP.contains(&k.as_str()) && misspells(k, "sharing")) {
            return Err(ParseError::Invalid(bad(k.as_str(), UNSHARES.replace("{known}", "sharing"))));
        }
        check_keys(&top, "", &TOP, warnings);

        match top.get("version") {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if v.is_empty() || v == "v1" => {}
            Some(v) => {
                let shown = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
                return Err(ParseError::Invalid(bad("version", format!("unknown version: {shown}"))));
            }
        }

        let flags = match top.get("flags") {
            None | Some(Value::Null) => FileFlags::default(),
            Some(v) => decode_flags(v, warnings).map_err(ParseError::Invalid)?,
        };
        if let Some(gfd) = flags.gfd.as_ref() {
            if let Some(Value::Number(n)) =
                top.get("flags").and_then(|f| f.get("gfd")).and_then(|g| g.get("sleepInterval"))
            {
                let shown = gfd.sleep_interval.map(|i| i.to_string()).unwrap_or_default();
                warnings.push(format!(
                    "flags.gfd.sleepInterval: the number {n} is read as seconds ({shown}); GFD would read nanoseconds"
                ));
            }
        }

        if let Some(resources) = top.get("resources") {
            check_resources(resources, warnings).map_err(ParseError::Invalid)?;
        }

        let mut sharing = Sharing::default();
        if let Some(s) = top.get("sharing").filter(|s| !s.is_null()) {
            let Value::Object(s) = s else {
                return Err(ParseError::Invalid(bad("sharing", "expected a mapping")));
            };
            sharing_keys(s, "sharing", &["timeSlicing", "mps"]).map_err(ParseError::Invalid)?;
            // timeSlicing is a plain struct in GFD, so `timeSlicing:` (null) is decoded and
            // fails; mps is a pointer, so `mps:` (null) leaves MPS unset.
            if let Some(ts) = s.get("timeSlicing") {
                sharing.time_slicing =
                    Some(replicated(ts, "sharing.timeSlicing", warnings).map_err(ParseError::Invalid)?);
            }
            if let Some(mps) = s.get("mps").filter(|m| !m.is_null()) {
                sharing.mps = Some(replicated(mps, "sharing.mps", warnings).map_err(ParseError::Invalid)?);
            }
        }
        Ok(ConfigFile { flags, sharing, warnings: std::mem::take(warnings) })
    }
}

/// Errors of [`ConfigFile::parse`], before the file name is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// YAML syntax, with the parser's line and column.
    Syntax(crate::yaml::YamlError),
    /// A field's value: (YAML path, message).
    Invalid(Bad),
}

fn check_keys(map: &Map<String, Value>, at: &str, known: &[&str], warnings: &mut Vec<String>) {
    for k in map.keys().filter(|k| !known.contains(&k.as_str())) {
        let path = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
        warnings.push(format!("unknown field {path} is ignored"));
    }
}

/// Why an unknown key where sharing is decided is refused, not warned about as elsewhere.
const UNSHARES: &str =
    "unknown field, refused: a misspelt sharing key would unshare the node (known here: {known})";

/// Unknown keys of a `sharing` block: each decides how the node is shared, so a misspelt one
/// (`timeslicing:`) is a bad config, kept out as any other is, never a node quietly unshared.
fn sharing_keys(map: &Map<String, Value>, at: &str, known: &[&str]) -> Result<(), Bad> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(bad(format!("{at}.{k}"), UNSHARES.replace("{known}", &known.join(", ")))),
        None => Ok(()),
    }
}

/// Whether top-level key `key` is `known` misspelt: the same but for case, or two edits away.
fn misspells(key: &str, known: &str) -> bool {
    strsim::levenshtein(&key.to_lowercase(), known) <= 2
}

fn decode_flags(v: &Value, warnings: &mut Vec<String>) -> Result<FileFlags, Bad> {
    // Unknown keys first, from the structs' own field lists, so a typo is named even when another
    // field fails.
    if let Value::Object(map) = v {
        check_keys(map, "flags", fields::names::<FileFlags>(), warnings);
        if let Some(Value::Object(gfd)) = map.get("gfd") {
            check_keys(gfd, "flags.gfd", fields::names::<GfdFlags>(), warnings);
        }
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let at = e.path().to_string();
        bad(if at == "." { "flags".into() } else { format!("flags.{at}") }, e.into_inner().to_string())
    })
}

mod fields;
mod resources;
use fields::parse_yaml_bool;
pub use resources::resource_name;
use resources::{check_resources, replicated};

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
