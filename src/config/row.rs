//! What a row of the flag table ([`super::rows`]) says about its flag, the modes a run can be in
//! (where a row says its flag has no effect), and the value parsers rows share.

use super::arg_groups::parse_bool;
use super::file::FileFlags;
use super::flag::{Flag, Found};
use super::settings::Settings;

/// How a row puts its value into the settings; `Err` says what is wrong with the value (the
/// resolver names the value and where it came from).
pub type Set = fn(&mut Settings, &Found) -> Result<(), String>;

/// The runs in which a flag has no effect: why (what the refusal and docs/flags.md say), and
/// whether a run is one.
pub type NoEffect = (&'static str, fn(&Run) -> bool);

/// What an empty value means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Empty {
    /// A value like any other, for the row's parser.
    Value,
    /// From env, as if the variable were not set (urfave/cli ignores empty env for numbers and
    /// durations, as GFD does); on the command line, a value.
    EnvUnset,
    /// From anywhere, the default.
    Default,
}

/// A key of the config file's `flags` and how to read it there, as text.
pub struct FileKey {
    /// The key under `flags` (`migStrategy`, `gfd.oneshot`).
    pub key: &'static str,
    /// Its value in a config file, as text.
    pub get: fn(&FileFlags) -> Option<String>,
}

/// One flag: what clap cannot say about it. Its type, value parser, default and `--help` text are
/// its clap field's, in [`super::arg_groups`].
pub struct Row {
    /// The flag.
    pub flag: Flag,
    /// Its environment variables, in precedence order: the first one defined wins, even when
    /// empty, as urfave/cli does in GFD.
    pub env: &'static [&'static str],
    /// Its key in the config file's `flags`, if the file can set it.
    pub file: Option<FileKey>,
    /// What an empty value means.
    pub empty: Empty,
    /// How its value goes into the settings; `None` for a flag the settings do not hold.
    pub set: Option<Set>,
    /// The modes in which it never has an effect, and why (its subcommand's `--help` leaves it
    /// out).
    pub never_in: &'static [(Mode, &'static str)],
    /// In the other modes, the runs in which it has none.
    pub when: Option<NoEffect>,
    /// A GFD flag accepted without effect somewhere, as GFD accepts it: where, as its `--help`
    /// says it in each command that reads the rows (a command that reads its command line alone
    /// may refuse it there).
    pub gfd: Option<&'static str>,
    /// Whether its env var, where it has no effect, is worth a warning.
    pub env_warns: bool,
}

impl Row {
    /// A row for `flag` read from `env`: no file key, no effect in the settings,
    /// effective everywhere, until the builders below say otherwise.
    pub fn new(flag: Flag, env: &'static [&'static str]) -> Row {
        Row {
            flag,
            env,
            file: None,
            empty: Empty::Value,
            set: None,
            never_in: &[],
            when: None,
            gfd: None,
            env_warns: true,
        }
    }

    /// Settable in the config file at `key`.
    pub fn file(self, key: &'static str, get: fn(&FileFlags) -> Option<String>) -> Row {
        Row { file: Some(FileKey { key, get }), ..self }
    }

    /// An empty value means `empty`.
    pub fn empty(self, empty: Empty) -> Row {
        Row { empty, ..self }
    }

    /// Its value goes into the settings through `set`.
    pub fn set(self, set: Set) -> Row {
        Row { set: Some(set), ..self }
    }

    /// Never has an effect in these modes.
    pub fn never_in(self, never_in: &'static [(Mode, &'static str)]) -> Row {
        Row { never_in, ..self }
    }

    /// Has no effect, for the reason `why`, in the runs `applies` picks.
    pub fn when(self, why: &'static str, applies: fn(&Run) -> bool) -> Row {
        Row { when: Some((why, applies)), ..self }
    }

    /// One of GFD's flags, accepted where GFD accepts it without effect: `accepted` says where,
    /// as `--help` shows it ("accepted without effect with --oneshot, as GFD does").
    pub fn gfd(self, accepted: &'static str) -> Row {
        Row { gfd: Some(accepted), ..self }
    }

    /// Its env var is quiet where it has no effect.
    pub fn quiet_env(self) -> Row {
        Row { env_warns: false, ..self }
    }

    /// Why it has no effect in `run` (`None`: it has one).
    pub fn no_effect(&self, run: &Run) -> Option<&'static str> {
        let never = self.never_in.iter().find(|(m, _)| *m == run.mode).map(|(_, why)| *why);
        never.or_else(|| self.when.filter(|(_, applies)| applies(run)).map(|(why, _)| why))
    }

    /// Whether it has no effect in any run of `mode`.
    pub fn never(&self, mode: Mode) -> bool {
        self.never_in.iter().any(|(m, _)| *m == mode)
    }
}

/// What a run does: label (as a daemon or once), or one subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Labelling without `--oneshot`.
    Daemon,
    /// Labelling with `--oneshot`.
    Oneshot,
    /// `nvlabel probe`.
    Probe,
    /// `nvlabel prune`.
    Prune,
    /// `nvlabel hook`.
    Hook,
    /// `nvlabel health`.
    Health,
    /// `nvlabel health clear`.
    HealthClear,
}

impl Mode {
    /// The modes a command runs in, by its clap name (`""` for the labeller, `health clear` for
    /// a nested one); none for `help`, and none for a command that reads its command line alone.
    pub fn of_command(name: &str) -> &'static [Mode] {
        match Reads::of_command(name) {
            Reads::Rows(modes) => modes,
            Reads::CommandLine => &[],
        }
    }

    /// Whether it labels the node.
    pub fn labels(self) -> bool {
        matches!(self, Mode::Daemon | Mode::Oneshot)
    }
}

/// Where a command's flags are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Through the rows: the command line, then env, then the config file's `flags`, then the
    /// default; in these modes, where each row says whether its flag has an effect.
    Rows(&'static [Mode]),
    /// The command line alone: no row applies (no env, no config file's `flags`, no refusal by
    /// mode), and its `--help` and docs/flags.md say so; what a flag not given means is the
    /// command's own code's to say.
    CommandLine,
}

/// Every command by its clap name (`""` for the labeller, a nested one after its parent's), and
/// where it reads its flags from: the one place a command says so.
pub const COMMANDS: &[(&str, Reads)] = &[
    ("", Reads::Rows(&[Mode::Daemon, Mode::Oneshot])),
    ("probe", Reads::Rows(&[Mode::Probe])),
    ("prune", Reads::Rows(&[Mode::Prune])),
    ("hook", Reads::Rows(&[Mode::Hook])),
    // `help` takes no flag but `--help`.
    ("help", Reads::Rows(&[])),
    // A pool's template is asked for on a workstation or in CI, where the GPU Operator's env
    // means nothing.
    ("template", Reads::CommandLine),
    ("health", Reads::Rows(&[Mode::Health])),
    ("health clear", Reads::Rows(&[Mode::HealthClear])),
];

impl Reads {
    /// Where the command named `name` reads its flags from (a name [`COMMANDS`] lacks reads
    /// through the rows in no mode; `every_command_says_where_it_reads_its_flags` fails on it).
    pub fn of_command(name: &str) -> Reads {
        COMMANDS.iter().find(|(n, _)| *n == name).map_or(Reads::Rows(&[]), |(_, reads)| *reads)
    }

    /// Whether the rows apply: env, the config file's `flags` and the rows' refusals.
    pub fn rows(self) -> bool {
        matches!(self, Reads::Rows(_))
    }
}

/// A run as a row's rule sees it.
pub struct Run<'a> {
    /// The mode.
    pub mode: Mode,
    /// The settings resolved for it.
    pub settings: &'a Settings,
}

/// Puts a parsed value into its field.
pub fn put<T>(field: &mut T, value: Result<T, String>) -> Result<(), String> {
    *field = value?;
    Ok(())
}

/// A boolean as GFD reads it; empty (only env can be) is false, as urfave/cli reads it.
pub fn boolean(text: &str) -> Result<bool, String> {
    if text.is_empty() {
        return Ok(false);
    }
    parse_bool(text)
}

pub use super::value_parsers::{choice, duration};

/// A number.
pub fn number<T: std::str::FromStr>(text: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e: T::Err| e.to_string())
}

/// Text where empty means none.
pub fn non_empty(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_string())
}
