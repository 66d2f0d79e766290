//! The command line: GFD's flags and nvlabel's own, grouped so that each subcommand takes only
//! the groups it uses, each with its one declared default. Values are checked here only for
//! spelling; [`super::settings`] resolves them against env ([`FLAG_ENV`]), the config file and
//! the defaults.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use super::arg_groups::{
    parse_bool, ApiArgs, ConfigArgs, DaemonArgs, FactArgs, HealthArgs, LabelArgs, LabelOptionArgs, LogArgs,
    OutputArgs, PruneArgs, SourceArgs, TargetArgs, DEFAULT_OUTPUT_FILE,
};
pub use super::env::{env_names, env_vars, FLAG_ENV};

/// The clap command with each flag's env names appended to its help, in every subcommand.
pub fn command() -> clap::Command {
    fn decorate(cmd: clap::Command) -> clap::Command {
        let ids: Vec<String> = cmd.get_arguments().filter_map(|a| a.get_long().map(String::from)).collect();
        let mut cmd = ids.iter().fold(cmd, |cmd, long| {
            let names = env_names(long);
            if names.is_empty() {
                return cmd;
            }
            let id = cmd.get_arguments().find(|a| a.get_long() == Some(long)).unwrap().get_id().clone();
            cmd.mut_arg(id, |a| {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                a.help(format!("{help} [env: {}]", names.join(", ")))
            })
        });
        let subs: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
        for name in subs {
            cmd = cmd.mut_subcommand(name, decorate);
        }
        cmd
    }
    decorate(Cli::command())
}

impl Cli {
    /// Parses `args` (`args[0]` is the program name). A flag not given is `None` here, whatever
    /// its default: the resolver puts env and the config file between the two.
    pub fn try_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let cmd = without_defaults(command());
        if let Some(slip) = bool_then_space(&cmd, &args) {
            return Err(cmd.clone().error(clap::error::ErrorKind::ValueValidation, slip));
        }
        match cmd.clone().try_get_matches_from(&args) {
            Ok(matches) => {
                Cli::from_arg_matches(&matches).map(|cli| Cli { given: given(&cmd, &matches), ..cli })
            }
            // Help shows each flag's default: the command that declares them prints it.
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
                Err(command().try_get_matches_from(&args).err().unwrap_or(e))
            }
            Err(e) => Err(e),
        }
    }
}

/// GFD's commonest slip, `--flag false`: a boolean takes its value only after `=` (as urfave's
/// do), so the word after it would be read as a subcommand. The hint names the corrected flag.
fn bool_then_space(cmd: &clap::Command, args: &[std::ffi::OsString]) -> Option<String> {
    let booleans: Vec<&str> = std::iter::once(cmd)
        .chain(cmd.get_subcommands())
        .flat_map(|c| c.get_arguments())
        .filter(|a| a.is_require_equals_set() && a.get_num_args().is_some_and(|n| n.min_values() == 0))
        .filter_map(|a| a.get_long())
        .collect();
    args.windows(2).find_map(|pair| {
        let flag = pair[0].to_str()?.strip_prefix("--")?;
        let value = pair[1].to_str()?;
        (booleans.contains(&flag) && super::arg_groups::parse_bool(value).is_ok()).then(|| {
            format!("--{flag} {value}: a boolean flag takes its value after '=', as in GFD; write --{flag}={value}")
        })
    })
}

/// The long names of the flags given on the command line (the subcommand's, if one was given).
fn given(cmd: &clap::Command, matches: &clap::ArgMatches) -> Vec<String> {
    let (cmd, matches) = match matches.subcommand() {
        Some((name, sub)) => (cmd.find_subcommand(name).unwrap_or(cmd), sub),
        None => (cmd, matches),
    };
    cmd.get_arguments()
        .filter(|a| matches.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .filter_map(|a| a.get_long().map(String::from))
        .collect()
}

/// `cmd` with no defaults, so that a flag not given parses as `None`.
fn without_defaults(cmd: clap::Command) -> clap::Command {
    let subs: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    let cmd = cmd.mut_args(|a| a.default_value(None::<&'static str>));
    subs.iter().fold(cmd, |cmd, name| cmd.mut_subcommand(name, without_defaults))
}

/// The default of `flag` (its long name): clap's `default_value`, the one place defaults are
/// written, which `--help` shows and [`super::settings`] applies after env and the config file.
pub fn default_of(flag: &str) -> Option<&'static str> {
    static DEFAULTS: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    let all = DEFAULTS.get_or_init(|| {
        let cmd = Cli::command();
        cmd.get_arguments()
            .filter_map(|a| {
                Some((a.get_long()?.to_string(), a.get_default_values().first()?.to_str()?.to_string()))
            })
            .collect()
    });
    all.iter().find(|(f, _)| f == flag).map(|(_, d)| d.as_str())
}

/// The nvlabel command line. Without a subcommand it labels the node (GFD's flags); each
/// subcommand takes only the flags it uses, after its name.
#[derive(Debug, Parser)]
#[command(name = "nvlabel", version, about = "Label Kubernetes nodes with their NVIDIA GPUs' features")]
#[command(
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    disable_version_flag = true
)]
pub struct Cli {
    /// Print version (GFD's `-v` as well as `-V`)
    #[arg(short = 'v', short_alias = 'V', long, action = clap::ArgAction::Version)]
    version: Option<bool>,
    /// What to do; without a command, label the node.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Labelling options (GFD's flags).
    #[command(flatten)]
    pub label: LabelArgs,
    /// Where facts come from.
    #[command(flatten)]
    pub source: SourceArgs,
    /// How logs look.
    #[command(flatten)]
    pub log: LogArgs,
    /// `nvlabel prune`'s own flags (default for every other command).
    #[arg(skip)]
    pub prune: PruneArgs,
    /// The long names of the flags given on the command line (not env, not defaults), for
    /// [`super::modes`].
    #[arg(skip)]
    pub given: Vec<String>,
}

/// Subcommands, each with only the flags it uses.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Print the probe's snapshot of this node as YAML (input for `--snapshot`).
    Probe {
        /// How facts are read.
        #[command(flatten)]
        facts: FactArgs,
        /// Where facts come from.
        #[command(flatten)]
        source: SourceArgs,
        /// Logs.
        #[command(flatten)]
        log: LogArgs,
    },
    /// Remove what nvlabel published: its Node labels (`--sink node`), its NodeFeature object
    /// (`--use-node-feature-api`), or the feature file (only if nvlabel wrote it).
    Prune {
        /// The config file may choose the target (`flags.gfd.outputFile`).
        #[command(flatten)]
        config: ConfigArgs,
        /// The API.
        #[command(flatten)]
        api: ApiArgs,
        /// The target.
        #[command(flatten)]
        target: TargetArgs,
        /// What to remove, and where.
        #[command(flatten)]
        prune: PruneArgs,
        /// Logs.
        #[command(flatten)]
        log: LogArgs,
    },
    /// Run as an NFD local-source hook (`source.d/`): print feature-file lines to stdout and exit
    /// 0; without a driver, print nothing. No timestamp, since NFD runs hooks on every rescan.
    Hook {
        /// How facts are read.
        #[command(flatten)]
        facts: FactArgs,
        /// What the labels say.
        #[command(flatten)]
        options: LabelOptionArgs,
        /// The sharing config.
        #[command(flatten)]
        config: ConfigArgs,
        /// The API, for the node's config label with `--config-dir`.
        #[command(flatten)]
        api: ApiArgs,
        /// Where facts come from.
        #[command(flatten)]
        source: SourceArgs,
        /// Logs.
        #[command(flatten)]
        log: LogArgs,
    },
    /// Print this help, or a subcommand's
    Help {
        /// The subcommand
        #[arg(value_parser = ["probe", "prune", "hook", "health"])]
        command: Option<String>,
    },
    /// Print each GPU's health once and exit 0 (healthy), 1 (a fault) or 2 (NVML cannot tell),
    /// as node-problem-detector's custom plugins do.
    Health {
        /// How facts are read.
        #[command(flatten)]
        facts: FactArgs,
        /// What counts as a fault.
        #[command(flatten)]
        health: HealthArgs,
        /// Where facts come from.
        #[command(flatten)]
        source: SourceArgs,
        /// Logs.
        #[command(flatten)]
        log: LogArgs,
    },
}

/// Which subcommand, without its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    /// `nvlabel probe`.
    Probe,
    /// `nvlabel prune`.
    Prune,
    /// `nvlabel hook`.
    Hook,
    /// `nvlabel health`.
    Health,
}

impl Cli {
    /// The subcommand, and every flag given (the subcommand's moved into the top-level groups),
    /// so that one resolver serves every command.
    pub fn split(self) -> (Option<CommandKind>, Cli) {
        let Cli { command, mut label, source, log, version, mut prune, given } = self;
        let (kind, source, log) = match command {
            // `from_args` answers `help` itself; a parsed `help` labels nothing.
            None | Some(Command::Help { .. }) => (None, source, log),
            Some(Command::Probe { facts, source, log }) => {
                label.facts = facts;
                (Some(CommandKind::Probe), source, log)
            }
            Some(Command::Prune { config, api, target, prune: what, log }) => {
                (label.config, label.api, label.target, prune) = (config, api, target, what);
                (Some(CommandKind::Prune), source, log)
            }
            Some(Command::Hook { facts, options, config, api, source, log }) => {
                (label.facts, label.options, label.config, label.api) = (facts, options, config, api);
                (Some(CommandKind::Hook), source, log)
            }
            Some(Command::Health { facts, health, source, log }) => {
                (label.facts, label.health) = (facts, health);
                (Some(CommandKind::Health), source, log)
            }
        };
        (kind, Cli { command: None, label, source, log, version, prune, given })
    }
}
