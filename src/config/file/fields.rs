//! How the config file's scalar fields are read: as GFD reads them (a scalar of another type is
//! taken as its text, YAML 1.1 booleans), plus the list form nvlabel's own fields accept.

use crate::duration::{parse_interval, Interval};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// YAML 1.1 and Go's boolean spellings, which GFD's YAML reader accepts.
pub fn parse_yaml_bool(s: &str) -> Option<bool> {
    match s {
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => Some(true),
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "n" | "N" => Some(false),
        _ => None,
    }
}

/// A boolean field, in YAML 1.1's and Go's spellings too.
pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        Value::String(s) => parse_yaml_bool(&s)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("expected a boolean, got {s:?}"))),
        other => Err(serde::de::Error::custom(format!("expected a boolean, got {other}"))),
    }
}

/// A string field; like GFD, a scalar of another type is taken as its text.
pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(serde::de::Error::custom(format!("expected a string, got {other}"))),
    }
}

/// A duration field: GFD's syntax, `infinite`, or a number of seconds.
pub fn interval<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Interval>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => parse_interval(&s).map(|(i, _)| Some(i)).map_err(serde::de::Error::custom),
        // GFD reads a number as nanoseconds; nvlabel reads it as seconds (and says so).
        Value::Number(n) => n
            .as_f64()
            .filter(|s| *s >= 0.0)
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
            .map(|d| Some(Interval::Every(d)))
            .ok_or_else(|| serde::de::Error::custom(format!("invalid duration {n}"))),
        other => Err(serde::de::Error::custom(format!("expected a duration, got {other}"))),
    }
}

/// `healthIgnoreXids`: the flag's text (`"13,31"`, checked where the flag is), or a YAML list of
/// Xid numbers, the form the chart's `health.ignoreXids` has; a list becomes the same text, so
/// both forms meet one check. A list element that is not an Xid number is named with its place.
pub fn xid_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let items = match Value::deserialize(d)? {
        Value::Array(items) => items,
        Value::Null => return Ok(None),
        Value::String(s) => return Ok(Some(s)),
        Value::Number(n) => return Ok(Some(n.to_string())),
        other => {
            let why = format!("expected a list of Xid numbers such as [13, 31], got {other}");
            return Err(serde::de::Error::custom(why));
        }
    };
    let xids: Result<Vec<String>, D::Error> = items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.as_u64() {
            Some(xid) => Ok(xid.to_string()),
            None => Err(serde::de::Error::custom(format!(
                "item {i} of the list is {item}, not an Xid number; use a list such as [13, 31]"
            ))),
        })
        .collect();
    xids.map(|x| Some(x.join(",")))
}
