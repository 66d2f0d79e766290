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

/// `healthXidThresholds`: the flag's text (`"43:3/1m,13:5/10m"`, checked where the flag is), or
/// a YAML list of its items, the chart's form; a list becomes the same text.
pub fn text_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let items = match Value::deserialize(d)? {
        Value::Array(items) => items,
        Value::Null => return Ok(None),
        Value::String(s) => return Ok(Some(s)),
        other => {
            let why = format!("expected a list such as [\"43:3/1m\"] or its text, got {other}");
            return Err(serde::de::Error::custom(why));
        }
    };
    let texts: Result<Vec<&str>, D::Error> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let why =
                || format!("item {i} of the list is {item}, not text; use a list such as [\"43:3/1m\"]");
            item.as_str().ok_or_else(|| serde::de::Error::custom(why()))
        })
        .collect();
    texts.map(|t| Some(t.join(",")))
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

/// The keys a derived `Deserialize` struct reads (serde's own list, renames applied): the one
/// place a key of the config file is written is its field.
pub fn names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    /// A deserializer that only records the fields a struct asks for.
    struct Fields(&'static [&'static str]);
    impl<'de> Deserializer<'de> for &mut Fields {
        type Error = serde::de::value::Error;
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(serde::de::Error::custom("only the field names were asked for"))
        }
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields = Fields(&[]);
    // Its error is the one above: the names are what was asked for.
    let _ = T::deserialize(&mut fields);
    fields.0
}
