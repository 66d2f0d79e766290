//! The `faults:` list, which both fakes read. An entry is ours when its `function` starts with
//! `cu`; the others are the NVML fake's, which may grow keys this library has never heard of, so
//! they are kept only as loose values and never checked here.

use crate::codes::{self, CUresult};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A YAML value of the `faults:` list, kept only as far as a `cu*` fault needs it.
#[derive(Debug)]
pub enum Entry {
    /// A string.
    Text(String),
    /// An integer.
    Number(i128),
    /// A mapping, its pairs in file order.
    Map(Vec<(Entry, Entry)>),
    /// Anything else, described for an error message.
    Other(&'static str),
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Text(s) => write!(f, "{s:?}"),
            Entry::Number(n) => write!(f, "{n}"),
            Entry::Map(_) => f.write_str("a mapping"),
            Entry::Other(what) => f.write_str(what),
        }
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entry, D::Error> {
        d.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Entry, E> {
        Ok(Entry::Text(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Entry, E> {
        Ok(Entry::Number(v.into()))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Entry, E> {
        Ok(Entry::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Entry, E> {
        Ok(Entry::Other("a fraction"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Entry, E> {
        Ok(Entry::Other("a boolean"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Entry, E> {
        Ok(Entry::Other("null"))
    }
    fn visit_none<E: de::Error>(self) -> Result<Entry, E> {
        Ok(Entry::Other("null"))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        Entry::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Entry::Other("a list"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut pairs = Vec::new();
        while let Some(pair) = map.next_entry::<Entry, Entry>()? {
            pairs.push(pair);
        }
        Ok(Entry::Map(pairs))
    }
}

/// One injected failure of a `cu*` function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The exported symbol it fails.
    pub function: String,
    /// The ordinal it fails; `None` fails every call.
    pub device: Option<u32>,
    /// What the call answers.
    pub error: CUresult,
    /// How many matching calls succeed first.
    pub after: u64,
}

/// The fault an entry of `faults:` describes, if it is a `cu*` one, checked against `symbols`.
/// An error starts where the entry's own name (`faults[3]`) leaves off: `.error: ...`.
pub fn check(entry: &Entry, symbols: &[&str]) -> Result<Option<Fault>, String> {
    let Entry::Map(pairs) = entry else { return Ok(None) };
    let key = |k: &Entry| match k {
        Entry::Text(s) => Some(s.clone()),
        _ => None,
    };
    let function = pairs.iter().find_map(|(k, v)| match (key(k).as_deref(), v) {
        (Some("function"), Entry::Text(f)) if f.starts_with("cu") => Some(f.clone()),
        _ => None,
    });
    let Some(function) = function else { return Ok(None) };
    if !symbols.contains(&function.as_str()) {
        return Err(format!(".function: {function:?} is not an exported CUDA symbol"));
    }
    let mut fault = Fault { function, device: None, error: codes::SUCCESS, after: 0 };
    let mut seen = Vec::new();
    for (k, v) in pairs {
        let name = key(k).ok_or_else(|| format!(": unknown key {k}"))?;
        if seen.contains(&name) {
            return Err(format!(": key {name:?} appears twice"));
        }
        match name.as_str() {
            "function" => {}
            "device" => {
                let ordinal = match v {
                    Entry::Text(s) => s.trim().parse().ok(),
                    Entry::Number(n) => u32::try_from(*n).ok(),
                    _ => None,
                };
                fault.device = Some(
                    ordinal.ok_or_else(|| format!(".device: {v} is not a device ordinal such as \"0\""))?,
                );
            }
            "error" => {
                let code = match v {
                    Entry::Text(s) => codes::by_fixture_name(s),
                    _ => None,
                };
                fault.error = code.ok_or_else(|| {
                    format!(".error: {v} is not a CUDA error name (lower case, without CUDA_ERROR_)")
                })?;
            }
            "after" => {
                let count = match v {
                    Entry::Number(n) => u64::try_from(*n).ok(),
                    _ => None,
                };
                fault.after = count.ok_or_else(|| format!(".after: {v} is not a count of calls"))?;
            }
            _ => return Err(format!(": unknown key {name:?}")),
        }
        seen.push(name);
    }
    if fault.error == codes::SUCCESS {
        return Err(".error: missing (a CUDA error name such as unknown or no_device)".to_string());
    }
    Ok(Some(fault))
}
