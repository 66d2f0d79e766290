//! The config file's resource lists: `resources` (validated, then ignored as GFD does) and the
//! replicated resources of `sharing.timeSlicing` / `sharing.mps`, with GFD's naming and device
//! rules and messages.

use super::{bad, check_keys, parse_yaml_bool, sharing_keys, Bad};
use crate::sharing::{ReplicatedResource, ReplicatedResources};
use serde_json::Value;

/// `resources.gpus[]` / `resources.mig[]`: validated as GFD does, then ignored with its warning.
pub(super) fn check_resources(v: &Value, warnings: &mut Vec<String>) -> Result<(), Bad> {
    let Value::Object(map) = v else {
        return if v.is_null() { Ok(()) } else { Err(bad("resources", "expected a mapping")) };
    };
    check_keys(map, "resources", &["gpus", "mig"], warnings);
    let mut any = false;
    for kind in ["gpus", "mig"] {
        let Some(list) = map.get(kind).filter(|l| !l.is_null()) else { continue };
        let Value::Array(list) = list else {
            return Err(bad(format!("resources.{kind}"), "expected a list"));
        };
        for (i, entry) in list.iter().enumerate() {
            let at = format!("resources.{kind}[{i}]");
            let field = |k: &str| entry.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
            if field("pattern").is_none() {
                return Err(bad(at, "resources must have a 'pattern' field set"));
            }
            if field("name").is_none() {
                return Err(bad(at, "resources must have a 'name' field set"));
            }
            any = true;
        }
    }
    if any {
        warnings
            .push("Customizing the 'resources' field is not yet supported in the config. Ignoring...".into());
    }
    Ok(())
}

/// A `timeSlicing` or `mps` block: GFD's custom decoder, then `DisableResourceNamingInConfig`.
pub(super) fn replicated(
    v: &Value,
    at: &str,
    warnings: &mut Vec<String>,
) -> Result<ReplicatedResources, Bad> {
    let map = match v {
        Value::Object(m) => m,
        Value::Null => return Err(bad(at, "no resources specified")),
        _ => return Err(bad(at, "expected a mapping")),
    };
    sharing_keys(map, at, &["renameByDefault", "failRequestsGreaterThanOne", "resources"])?;
    let flag = |k: &str| -> Result<Option<bool>, Bad> {
        match map.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) => parse_yaml_bool(s)
                .map(Some)
                .ok_or_else(|| bad(format!("{at}.{k}"), format!("expected a boolean, got {s:?}"))),
            Some(other) => Err(bad(format!("{at}.{k}"), format!("expected a boolean, got {other}"))),
        }
    };
    let rename_by_default = flag("renameByDefault")?.unwrap_or(false);
    flag("failRequestsGreaterThanOne")?;
    let list = match map.get("resources") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        None | Some(Value::Null) | Some(Value::Array(_)) => return Err(bad(at, "no resources specified")),
        Some(_) => return Err(bad(format!("{at}.resources"), "expected a list")),
    };
    let id = at.rsplit('.').next().unwrap_or(at);
    let mut resources = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let here = format!("{at}.resources[{i}]");
        let mut r = replicated_resource(entry, &here, warnings)?;
        let forced = format!("{}.shared", r.name);
        let rename = r.rename.take().unwrap_or_default();
        // GFD's binary ignores `rename` unless renameByDefault, which forces `<name>.shared`.
        if rename_by_default {
            if !rename.is_empty() && rename != forced {
                warnings.push(format!(
                    "{here}.rename: Setting the 'rename' field in sharing.{id}.resources is not yet supported in the config. Ignoring..."
                ));
            }
            r.rename = Some(forced);
        } else if !rename.is_empty() {
            warnings.push(format!(
                "{here}.rename: Setting the 'rename' field in sharing.{id}.resources is not yet supported in the config. Ignoring..."
            ));
        }
        resources.push(r);
    }
    Ok(ReplicatedResources { resources })
}

fn replicated_resource(v: &Value, at: &str, warnings: &mut Vec<String>) -> Result<ReplicatedResource, Bad> {
    let Value::Object(map) = v else { return Err(bad(at, "expected a mapping")) };
    sharing_keys(map, at, &["name", "devices", "replicas", "rename"])?;
    let name = match map.get("name") {
        None | Some(Value::Null) => return Err(bad(at, "no resource name specified")),
        Some(Value::String(s)) if s.is_empty() => {
            return Err(bad(format!("{at}.name"), "no resource name specified"))
        }
        Some(Value::String(s)) => resource_name(s).map_err(|m| bad(format!("{at}.name"), m))?,
        Some(other) => return Err(bad(format!("{at}.name"), format!("expected a string, got {other}"))),
    };
    if !crate::sharing::possible(&name) {
        // Taken, it would share nothing: a reload would unshare the node for a typo.
        return Err(bad(
            format!("{at}.name"),
            format!("{name:?} is no resource an NVIDIA GPU has: use nvidia.com/gpu, or nvidia.com/mig-<profile> such as nvidia.com/mig-1g.5gb"),
        ));
    }
    if let Some(devices) = map.get("devices") {
        if !devices_spec(devices).map_err(|m| bad(format!("{at}.devices"), m))? {
            warnings.push(format!(
                "{at}.devices: Customizing the 'devices' field in sharing.{}.resources is not yet supported in the config. Ignoring...",
                at.split('.').nth(1).unwrap_or("")
            ));
        }
    }
    let replicas = match map.get("replicas") {
        None | Some(Value::Null) => return Err(bad(at, "no replicas specified")),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(r) if r >= 2 => {
                u32::try_from(r).map_err(|_| bad(format!("{at}.replicas"), format!("{r} is too large")))?
            }
            Some(r) => {
                return Err(bad(
                    format!("{at}.replicas"),
                    format!("number of replicas must be >= 2, got {r}"),
                ))
            }
            None => return Err(bad(format!("{at}.replicas"), format!("expected a whole number, got {n}"))),
        },
        Some(other) => {
            return Err(bad(format!("{at}.replicas"), format!("expected a whole number, got {other}")))
        }
    };
    let rename = match map.get("rename") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(resource_name(s).map_err(|m| bad(format!("{at}.rename"), m))?),
        Some(other) => return Err(bad(format!("{at}.rename"), format!("expected a string, got {other}"))),
    };
    Ok(ReplicatedResource { name, rename, replicas })
}

/// GFD's `NewResourceName`: add `nvidia.com/`, then check length and DNS-1123 form.
pub fn resource_name(n: &str) -> Result<String, String> {
    let full = if n.starts_with("nvidia.com/") { n.to_string() } else { format!("nvidia.com/{n}") };
    if full.len() > 63 {
        return Err(format!("fully-qualified resource name must be 63 characters or less: {full}"));
    }
    let (_, name) = full.split_once('/').unwrap_or(("", &full));
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 253
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.');
    if !ok {
        return Err(format!(
            "incorrect format for resource name '{full}': [a lowercase RFC 1123 subdomain must consist of lower case \
             alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character]"
        ));
    }
    Ok(full)
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_device_id(s: &str) -> bool {
    let index = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    if index(s) {
        return true;
    }
    if let Some((g, m)) = s.split_once(':') {
        return index(g) && index(m);
    }
    if let Some(u) = s.strip_prefix("GPU-") {
        return is_uuid(u);
    }
    if let Some(rest) = s.strip_prefix("MIG-GPU-") {
        let mut it = rest.splitn(3, '/');
        return matches!((it.next(), it.next(), it.next()), (Some(u), Some(g), Some(c)) if is_uuid(u) && index(g) && index(c));
    }
    s.strip_prefix("MIG-").is_some_and(is_uuid)
}

/// Validates `devices`; `Ok(true)` when it is `all` (or absent), `Ok(false)` when customised.
fn devices_spec(v: &Value) -> Result<bool, String> {
    match v {
        Value::Null => Ok(true),
        Value::String(s) if s == "all" => Ok(true),
        Value::String(s) => Err(format!("devices set as '{s}' but the only valid string input is 'all'")),
        Value::Number(n) => match n.as_i64() {
            Some(c) if c > 0 => Ok(false),
            Some(c) => Err(format!("devices set as '{c}' but a count of devices must be > 0")),
            None => Err(format!("unrecognized type for devices spec: {n}")),
        },
        Value::Array(list) => {
            for d in list {
                let ok = match d {
                    Value::Number(n) => n.as_u64().is_some(),
                    Value::String(s) => is_device_id(s),
                    _ => false,
                };
                if !ok {
                    return Err(format!("unsupported type for device in devices list: {d}"));
                }
            }
            Ok(false)
        }
        other => Err(format!("unrecognized type for devices spec: {other}")),
    }
}
