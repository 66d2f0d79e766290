//! The one parser of each flag value type, which the command line (clap), env and the config
//! file all go through, and the typed defaults written as the command line spells them. A leaf of
//! `config/`: the clap fields ([`super::arg_groups`]) and the rows ([`super::rows`]) both use it.

use clap::ValueEnum;
use std::time::Duration;

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
