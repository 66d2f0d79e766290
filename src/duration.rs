//! `--sleep-interval` values: Go's duration syntax (`90s`, `1m30s`, `1.5h`), `infinite`, and a
//! bare number, which nvlabel reads as seconds (GFD rejects it on the command line and in env,
//! and reads it as nanoseconds in the config file).

use std::time::Duration;

/// How long to wait between labelling passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// Wait this long.
    Every(Duration),
    /// Label once, then wait only for signals.
    Infinite,
}

/// What a duration may look like, for error messages.
pub const FORMS: &str =
    "use a Go duration such as 90s, 1m30s or 1.5h (units ns, us, ms, s, m, h), a number of seconds, or infinite";

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Empty text.
    #[error("invalid duration \"\"; {FORMS}")]
    Empty,
    /// Not Go's syntax.
    #[error("invalid duration {0:?}; {FORMS}")]
    Syntax(String),
    /// A unit Go does not know.
    #[error("unknown unit {unit:?} in duration {text:?}; {FORMS}")]
    Unit {
        /// The unit.
        unit: String,
        /// The whole text.
        text: String,
    },
    /// Negative durations would relabel in a busy loop.
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
    /// Too large to represent.
    #[error("invalid duration {0:?}: out of range")]
    Range(String),
}

impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interval::Infinite => f.write_str("infinite"),
            Interval::Every(d) => write!(f, "{d:?}"),
        }
    }
}

/// Parses an interval. `Ok((interval, true))` when a bare number was read as seconds.
pub fn parse_interval(text: &str) -> Result<(Interval, bool), DurationError> {
    let t = text.trim();
    if t == "infinite" {
        return Ok((Interval::Infinite, false));
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') && t != "0" {
        let secs: f64 = t.parse().map_err(|_| DurationError::Syntax(text.into()))?;
        let d = Duration::try_from_secs_f64(secs).map_err(|_| DurationError::Range(text.into()))?;
        return Ok((Interval::Every(d), true));
    }
    Ok((Interval::Every(parse_go_duration(t)?), false))
}

/// Go's `time.ParseDuration`, without negative results.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let mut s = text;
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let negative = s.starts_with('-');
    if let Some(rest) = s.strip_prefix(['-', '+']) {
        s = rest;
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(DurationError::Syntax(text.into()));
    }
    let mut total_ns: f64 = 0.0;
    while !s.is_empty() {
        let num_len = s.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
        let num = &s[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(DurationError::Syntax(text.into()));
        }
        s = &s[num_len..];
        let unit_len = s.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(s.len());
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let scale: f64 = match unit {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(DurationError::Syntax(format!("{text} (missing unit)"))),
            _ => return Err(DurationError::Unit { unit: unit.into(), text: text.into() }),
        };
        let value: f64 = num.parse().map_err(|_| DurationError::Syntax(text.into()))?;
        total_ns += value * scale;
    }
    if negative && total_ns > 0.0 {
        return Err(DurationError::Negative(text.into()));
    }
    if total_ns > i64::MAX as f64 {
        return Err(DurationError::Range(text.into()));
    }
    Ok(Duration::from_nanos(total_ns.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_syntax() {
        assert_eq!(parse_go_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_go_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_go_duration("5ns").unwrap(), Duration::from_nanos(5));
        assert_eq!(parse_go_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_go_duration("2\u{b5}s").unwrap(), Duration::from_micros(2));
        assert!(parse_go_duration("60").is_err());
        assert!(parse_go_duration("1d").is_err());
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("s").is_err());
        assert_eq!(parse_go_duration("-1s"), Err(DurationError::Negative("-1s".into())));
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("infinite").unwrap(), (Interval::Infinite, false));
        assert_eq!(parse_interval("60s").unwrap(), (Interval::Every(Duration::from_secs(60)), false));
        assert_eq!(parse_interval("60").unwrap(), (Interval::Every(Duration::from_secs(60)), true));
        assert_eq!(parse_interval("0").unwrap(), (Interval::Every(Duration::ZERO), false));
        assert!(parse_interval("sixty").is_err());
        for (bad, start) in
            [("abc", "invalid duration \"abc\""), ("", "invalid duration \"\""), ("1d", "unknown unit")]
        {
            let e = parse_interval(bad).unwrap_err().to_string();
            assert!(e.starts_with(start) && e.ends_with(FORMS), "{bad:?}: {e}");
        }
    }
}
