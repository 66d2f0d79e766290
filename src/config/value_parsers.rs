//! The one parser of each flag value type, which the command line (clap), env and the config
//! file all go through, and the typed defaults written as the command line spells them. A leaf of
//! `config/`: the clap fields ([`super::arg_groups`]) and the rows ([`super::rows`]) both use it.

use crate::duration::{parse_interval, Interval};
use crate::probe::Strategy;
use clap::ValueEnum;
use std::time::Duration;

/// An optional value as a flag's value type, where empty means none: clap reads a field
/// `Option<Option<T>>` as a flag whose value may be left out, so the inner one is named apart.
pub type Maybe<T> = Option<T>;

/// Why a value is not one its flag takes, as the flag's parser says it: the one-line error names
/// it with the value and where it came from, the command line's as env's and the config file's
/// (`resolve::invalid_on_command_line`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Reason(pub String);

/// `parse`, a flag's one parser, as its clap field's value parser; its row parses env and the
/// config file with the same `parse`.
pub fn parsed_by<T>(
    parse: fn(&str) -> Result<T, String>,
) -> impl Fn(&str) -> Result<T, Reason> + Clone + Send + Sync + 'static
where
    T: Clone + Send + Sync + 'static,
{
    move |text| parse(text).map_err(Reason)
}

/// One of `T`'s values, read by its `ValueEnum` parser (the one clap uses on the command line);
/// else the values to use instead, as the command line's error lists them.
pub fn choice<T: ValueEnum>(text: &str) -> Result<T, String> {
    T::from_str(text, false).map_err(|_| format!("use {}", either(&names::<T>())))
}

/// The spellings of `T`'s values, in their order.
pub fn names<T: ValueEnum>() -> Vec<String> {
    T::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|v| v.get_name().to_string())
        .collect()
}

/// A value of `T` as the command line spells it (a clap default).
pub fn shown<T: ValueEnum>(value: T) -> String {
    value.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
}

/// A duration (not `infinite`), or `otherwise` as the reason.
pub fn duration(text: &str, otherwise: &str) -> Result<Duration, String> {
    match parse_interval(text).map_err(|e| e.to_string())? {
        (Interval::Every(d), _) => Ok(d),
        (Interval::Infinite, _) => Err(otherwise.to_string()),
    }
}

/// `--sleep-interval`: a Go duration, `infinite`, or a bare number of seconds.
pub fn interval(text: &str) -> Result<Interval, String> {
    parse_interval(text).map(|(interval, _)| interval).map_err(|e| e.to_string())
}

/// `--expiry`: a positive duration; empty is none.
pub fn expiry(text: &str) -> Result<Maybe<Duration>, String> {
    let positive = "use a positive duration such as 1h";
    match text {
        "" => Ok(None),
        text => match duration(text, positive)? {
            d if d.is_zero() => Err(positive.to_string()),
            d => Ok(Some(d)),
        },
    }
}

/// `--device-discovery-strategy`, with GFD's message for a value it does not take.
pub fn strategy(text: &str) -> Result<Strategy, String> {
    choice::<Strategy>(text)
        .map_err(|values| format!("invalid --device-discovery-strategy option {text}; {values}"))
}

/// A duration as a Go duration a person writes (`2m`, `30s`), for a typed default.
pub fn go(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// `a, b or c`: how an error lists the values that work.
pub fn either(values: &[String]) -> String {
    match values.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::MigStrategy;

    #[test]
    fn values_read_and_show_as_the_command_line_spells_them() {
        assert_eq!(choice::<MigStrategy>("single"), Ok(MigStrategy::Single));
        assert_eq!(choice::<MigStrategy>("Single"), Err("use none, single or mixed".to_string()));
        assert_eq!(shown(crate::health::config::TaintEffect::NoSchedule), "NoSchedule");
        assert_eq!(go(Duration::from_secs(120)), "2m");
        assert_eq!(go(Duration::from_secs(30)), "30s");
        assert_eq!(either(&["text".into()]), "text");
    }
}
