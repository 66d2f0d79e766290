//! The command line: GFD's flags and nvlabel's own, grouped so that each subcommand takes only
//! the groups it uses. Each flag's type, value parser, default and help are its clap field's
//! ([`super::arg_groups`]); its env names and where it has no effect come from its row
//! ([`super::rows`]), and [`super::resolve`] resolves them against env, the config file and the
//! defaults, in each command that reads its flags through the rows ([`Reads`]); a command that
//! reads its command line alone has no row applied to its flags, whatever their names.

use super::decorate::{decorate, path};
use super::flag::Flag;
use super::row::Reads;
use super::template::TemplateArgs;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use super::arg_groups::{
    parse_bool, ApiArgs, ClearArgs, ConfigArgs, DaemonArgs, FactArgs, GpuLabelArgs, HealthArgs,
    KubeconfigArgs, LabelArgs, LabelOptionArgs, LogArgs, OutputArgs, PruneArgs, SourceArgs, TargetArgs,
    DEFAULT_OUTPUT_FILE,
};
pub use super::rows::env_vars;

/// The clap command as `--help` shows it: each flag's env names from its row, its default from
/// its field, and in each subcommand only the flags its mode can use (the others still parse, to
/// be refused with why by [`super::modes`]).
pub fn command() -> clap::Command {
    decorate(Cli::command(), "", true)
}

/// [`command`] without defaults, so that a flag not given parses as `None`.
fn parser() -> clap::Command {
    decorate(Cli::command(), "", false)
}

/// Each flag's clap field as declared (its help, default and aliases, before the rows add to
/// them), once per flag whichever commands take it: a command that reads its command line
/// alone is left out, so a flag of its own that shares a row's name is never taken for it.
pub fn declared() -> Vec<(Flag, clap::Arg)> {
    let mut out: Vec<(Flag, clap::Arg)> = Vec::new();
    let mut commands = vec![(String::new(), Cli::command())];
    while let Some((name, cmd)) = commands.pop() {
        if !Reads::of_command(&name).rows() {
            continue;
        }
        for arg in cmd.get_arguments() {
            let Some(flag) = arg.get_long().and_then(Flag::named) else { continue };
            if !out.iter().any(|(f, _)| *f == flag) {
                out.push((flag, arg.clone()));
            }
        }
        commands.extend(cmd.get_subcommands().map(|sub| (path(&name, sub.get_name()), sub.clone())));
    }
    out
}

/// `flag`'s default as its clap field declares it, in the command line's spelling (what the
/// resolver parses last, and `--help` and docs/flags.md show).
pub fn default_of(flag: Flag) -> Option<&'static str> {
    static DEFAULTS: std::sync::OnceLock<Vec<(Flag, String)>> = std::sync::OnceLock::new();
    let defaults = DEFAULTS.get_or_init(|| {
        let default =
            |arg: &clap::Arg| Some(arg.get_default_values().first()?.to_string_lossy().into_owned());
        declared().into_iter().filter_map(|(flag, arg)| Some((flag, default(&arg)?))).collect()
    });
    defaults.iter().find(|(f, _)| *f == flag).map(|(_, d)| d.as_str())
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
        let cmd = parser();
        if let Some(slip) = bool_then_space(&cmd, &args) {
            return Err(cmd.clone().error(clap::error::ErrorKind::ValueValidation, slip));
        }
        match cmd.clone().try_get_matches_from(&args) {
            Ok(matches) => {
                let (reads, given) = given(&cmd, &matches, "");
                Cli::from_arg_matches(&matches).map(|cli| Cli { reads, given, ..cli })
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
        .chain(cmd.get_subcommands().flat_map(|s| s.get_subcommands()))
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

/// Where the command given (the innermost subcommand, if one was given; `cmd`, named `name`,
/// otherwise) reads its flags from, and the flags given on the command line for the rows, each
/// with its text: none where it reads its command line alone, since no row applies there.
fn given(cmd: &clap::Command, matches: &clap::ArgMatches, name: &str) -> (Reads, Vec<(Flag, String)>) {
    if let Some((sub, sub_matches)) = matches.subcommand() {
        if let Some(sub) = cmd.find_subcommand(sub) {
            return given(sub, sub_matches, &path(name, sub.get_name()));
        }
    }
    let reads = Reads::of_command(name);
    if !reads.rows() {
        return (reads, Vec::new());
    }
    let given = cmd
        .get_arguments()
        .filter(|a| matches.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .filter_map(|a| {
            let flag = Flag::named(a.get_long()?)?;
            let raw = matches.get_raw(a.get_id().as_str()).and_then(|mut v| v.next_back());
            Some((flag, raw.map(|v| v.to_string_lossy().into_owned()).unwrap_or_default()))
        })
        .collect();
    (reads, given)
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
    /// `nvlabel health clear`'s own flags (default for every other command).
    #[arg(skip)]
    pub clear: ClearArgs,
    /// `nvlabel template`'s flags, when that is the command (it reads no env and no settings).
    #[arg(skip)]
    pub template: Option<Box<TemplateArgs>>,
    /// Where the command given reads its flags from: through the rows, or its command line alone
    /// (then [`super::resolve`] reads neither env nor the config file, and `given` is empty).
    #[arg(skip = Reads::of_command(""))]
    pub reads: Reads,
    /// The flags given on the command line (not env, not defaults), each with its text: what
    /// [`super::resolve`] reads first and [`super::modes`] refuses where it has no effect.
    #[arg(skip)]
    pub given: Vec<(Flag, String)>,
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
        #[arg(value_parser = ["probe", "prune", "hook", "health", "template"])]
        command: Option<String>,
    },
    /// Print the labels, capacity and DRA slices every node of a GPU pool will have, for autoscalers
    /// that scale the pool from zero (Karpenter, Cluster Autoscaler); reads no GPU
    #[command(after_help = super::template::READS)]
    Template {
        /// Where the pool's GPUs come from, what decides the rest, and the form.
        #[command(flatten)]
        template: Box<TemplateArgs>,
        /// Logs.
        #[command(flatten)]
        log: LogArgs,
    },
    /// Print each GPU's health once and exit 0 (healthy), 1 (a fault) or 2 (NVML cannot tell),
    /// as node-problem-detector's custom plugins do; `nvlabel health clear` clears faults by hand.
    #[command(args_conflicts_with_subcommands = true, disable_help_subcommand = true)]
    Health {
        /// A person's word instead of a look at the GPUs (boxed: the other variants are small).
        #[command(subcommand)]
        action: Option<Box<HealthAction>>,
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

/// What `nvlabel health` does instead of looking at the GPUs once.
#[derive(Debug, Clone, Subcommand)]
pub enum HealthAction {
    /// Clear a node's GPU faults by hand (after a GPU reset, say), or only some GPUs': its health
    /// condition and fault record are written under nvlabel's field manager, and the running
    /// daemon obeys (faults still read come back as new ones)
    Clear {
        /// The API, the node and the instance.
        #[command(flatten)]
        api: ApiArgs,
        /// The condition type.
        #[command(flatten)]
        health: HealthArgs,
        /// Which GPUs.
        #[command(flatten)]
        clear: ClearArgs,
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
    /// `nvlabel health clear`.
    HealthClear,
}

impl Cli {
    /// The subcommand, and every flag given (the subcommand's moved into the top-level groups,
    /// where `main` reads `--log-format` before resolving and `nvlabel prune`'s own flags).
    pub fn split(self) -> (Option<CommandKind>, Cli) {
        let Cli {
            command,
            mut label,
            source,
            log,
            version,
            mut prune,
            mut clear,
            mut template,
            reads,
            given,
        } = self;
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
            Some(Command::Health { action: Some(action), .. }) => {
                let HealthAction::Clear { api, health, clear: gpus, log } = *action;
                (label.api, label.health, clear) = (api, health, gpus);
                (Some(CommandKind::HealthClear), source, log)
            }
            Some(Command::Template { template: own, log }) => {
                template = Some(own);
                (None, source, log)
            }
            Some(Command::Health { action: None, facts, health, source, log }) => {
                (label.facts, label.health) = (facts, health);
                (Some(CommandKind::Health), source, log)
            }
        };
        (kind, Cli { command: None, label, source, log, version, prune, clear, template, reads, given })
    }
}
