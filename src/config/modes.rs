//! Nothing accepted and ignored: one row per flag saying where it has no effect. A flag given on
//! the command line where its row says it has none is a usage error (exit 2, one line naming the
//! flag and the mode); the same flag from its environment variable is one warning, never a
//! failure, since the GPU Operator sets env for every mode. GFD's flags stay accepted wherever
//! GFD accepts them (their `--help` says so); only nvlabel's own modes refuse them.

use super::flags::{command, CommandKind};
use super::resolve::Env;
use super::settings::Settings;
use crate::exit::Classify;
use crate::labels::AllocationMode;
use crate::publish::Target;

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
}

impl Mode {
    /// The mode of `command` with these settings.
    pub fn of(command: Option<CommandKind>, settings: &Settings) -> Mode {
        match command {
            None if settings.oneshot => Mode::Oneshot,
            None => Mode::Daemon,
            Some(CommandKind::Probe) => Mode::Probe,
            Some(CommandKind::Prune) => Mode::Prune,
            Some(CommandKind::Hook) => Mode::Hook,
            Some(CommandKind::Health) => Mode::Health,
        }
    }

    fn labels(self) -> bool {
        matches!(self, Mode::Daemon | Mode::Oneshot)
    }
}

/// A run as a row's rule sees it.
pub struct Run<'a> {
    /// The mode.
    pub mode: Mode,
    /// The settings resolved for it.
    pub settings: &'a Settings,
}

/// Why a flag has no effect in `run` (`None`: it has one).
pub type NoEffect = fn(&Run) -> Option<&'static str>;

/// One flag's rule: `no_effect` says where it is refused; `gfd` marks GFD's flags that stay
/// accepted where GFD accepts them without effect (their `--help` says so).
pub struct Row {
    /// The flag's long name.
    pub flag: &'static str,
    /// Where it has no effect.
    pub no_effect: NoEffect,
    /// Accepted without effect somewhere, as GFD accepts it; `--help` says where.
    pub gfd: bool,
    /// Whether its env var, where it has no effect, is worth a warning.
    pub env_warns: bool,
}

const fn row(flag: &'static str, no_effect: NoEffect) -> Row {
    Row { flag, no_effect, gfd: false, env_warns: true }
}

const fn gfd(flag: &'static str, no_effect: NoEffect) -> Row {
    Row { flag, no_effect, gfd: true, env_warns: true }
}

/// A row whose env var is quiet where it has no effect.
const fn quiet_env(row: Row) -> Row {
    Row { env_warns: false, ..row }
}

fn everywhere(_: &Run) -> Option<&'static str> {
    None
}

fn in_health(r: &Run) -> bool {
    r.mode == Mode::Health
}

fn hook_without_dir(r: &Run) -> bool {
    r.mode == Mode::Hook && r.settings.config_dir.is_none()
}

/// A snapshot stands in for NVML and sysfs (but health, in a daemon, still reads NVML).
fn from_snapshot(r: &Run) -> Option<&'static str> {
    (r.settings.snapshot.is_some() && r.mode != Mode::Health)
        .then_some("with --snapshot, which stands in for NVML and sysfs")
}

fn health_daemon(r: &Run) -> bool {
    r.mode == Mode::Daemon && r.settings.health.enabled
}

/// Every flag of every command, one row each; a flag without a row fails the test below.
pub const ROWS: &[Row] = &[
    row("mig-strategy", |r| {
        (r.settings.allocation_mode == AllocationMode::Dra)
            .then_some("with --allocation-mode dra, which gives physical facts only (no MIG-strategy labels)")
    }),
    row("no-timestamp", |r| {
        (r.mode == Mode::Hook).then_some("in `nvlabel hook`, which never writes a timestamp")
    }),
    row("extended-labels", everywhere),
    // `nvlabel prune`'s own: each changes what it removes.
    row("health-only", everywhere),
    row("all-nodes", everywhere),
    row("allocation-mode", everywhere),
    row("fail-on-init-error", |r| match r.mode {
        Mode::Health => Some("in `nvlabel health`, which exits 2 when NVML cannot start"),
        _ => from_snapshot(r),
    }),
    row("machine-type-file", |r| match r.mode {
        Mode::Health => Some("in `nvlabel health`, which reads no machine type"),
        _ => from_snapshot(r),
    }),
    row("device-discovery-strategy", |r| match r.mode {
        Mode::Health => Some("in `nvlabel health`, which reads NVML whatever the strategy"),
        _ => from_snapshot(r),
    }),
    gfd("driver-root-ctr-path", everywhere),
    row("config-file", everywhere),
    row("config-dir", everywhere),
    row("config-default", |r| {
        r.settings.config_dir.is_none().then_some("without --config-dir, whose default key it names")
    }),
    gfd("node-name", |r| {
        hook_without_dir(r).then_some("in `nvlabel hook` without --config-dir (a hook publishes nothing)")
    }),
    gfd("namespace", |r| (r.mode == Mode::Hook).then_some("in `nvlabel hook`, which publishes nothing")),
    gfd("pod-name", |r| {
        matches!(r.mode, Mode::Hook | Mode::Prune).then_some("outside a labelling daemon or one-shot run")
    }),
    gfd("kubeconfig", |r| {
        hook_without_dir(r).then_some("in `nvlabel hook` without --config-dir (a hook publishes nothing)")
    }),
    gfd("kube-api-qps", |r| {
        hook_without_dir(r).then_some("in `nvlabel hook` without --config-dir (a hook publishes nothing)")
    }),
    gfd("kube-api-burst", |r| {
        hook_without_dir(r).then_some("in `nvlabel hook` without --config-dir (a hook publishes nothing)")
    }),
    gfd("output-file", everywhere),
    gfd("use-node-feature-api", everywhere),
    row("sink", everywhere),
    // On the command line the resolver refuses it with its value (`settings.rs`); from env it
    // is this row's warning.
    row("expiry", |r| {
        (r.mode.labels() && !r.settings.expiry_applies())
            .then_some("where labels do not go to the feature file")
    }),
    row("format", |r| {
        let printed = matches!(r.settings.target(), Ok(Target::Stdout(_)));
        (r.mode.labels() && !printed)
            .then_some("where labels are not printed (only --output-file \"\" with --use-node-feature-api=false prints them)")
    }),
    row("oneshot", everywhere),
    gfd("sleep-interval", everywhere),
    // One environment often serves daemons and one-shot runs alike (a test harness, a node's
    // profile): a port for daemons is no slip in a one-shot run.
    quiet_env(row("metrics-addr", |r| {
        (r.mode == Mode::Oneshot).then_some("with --oneshot: only a daemon serves /metrics")
    })),
    row("sharing-check-grace", |r| {
        (r.mode.labels() && !r.settings.extended_labels)
            .then_some("without --extended-labels, which alone checks the sharing labels against the Node")
    }),
    row("nvml-library", everywhere),
    row("cuda-library", everywhere),
    row("host-root", everywhere),
    row("pci-ids", everywhere),
    row("sysfs-root", everywhere),
    row("snapshot", |r| in_health(r).then_some("in `nvlabel health`, which reads NVML, never a snapshot")),
    row("log-format", everywhere),
    row("health", |r| match r.mode {
        Mode::Oneshot => Some("with --oneshot: only a daemon keeps the GPU health condition"),
        Mode::Health => Some("in `nvlabel health`, which always reads GPU health and publishes nothing"),
        _ => None,
    }),
    row("health-condition-type", |r| match r.mode {
        Mode::Health => Some("in `nvlabel health`, which keeps no condition"),
        _ if !health_daemon(r) => Some("without --health in a daemon"),
        _ => None,
    }),
    row("health-ignore-xids", |r| {
        (!in_health(r) && !health_daemon(r)).then_some("without --health in a daemon or `nvlabel health`")
    }),
    row("health-fatal-xids", |r| {
        (!in_health(r) && !health_daemon(r)).then_some("without --health in a daemon or `nvlabel health`")
    }),
    row("health-expected-gpus", |r| {
        (!in_health(r) && !health_daemon(r)).then_some("without --health in a daemon or `nvlabel health`")
    }),
    // The deadline bounds a daemon's labelling passes too, with or without --health.
    row("health-nvml-timeout", |r| {
        (r.mode != Mode::Daemon)
            .then_some("outside a daemon: only a daemon's passes and health readings wait with a deadline")
    }),
    row("health-taint-effect", |r| match r.mode {
        Mode::Health => Some("in `nvlabel health`, which taints nothing"),
        _ if !health_daemon(r) || r.settings.allocation_mode == AllocationMode::DevicePlugin => {
            Some("without --health in a daemon with --allocation-mode dra or auto")
        }
        _ => None,
    }),
    row("boot-id-file", |r| match r.mode {
        Mode::Health => Some("in `nvlabel health`, which keeps no faults across runs"),
        _ if !health_daemon(r) => Some("without --health in a daemon"),
        _ => None,
    }),
];

/// A flag given on the command line where it has no effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag} has no effect {why}; leave it out")]
pub struct NoEffectError {
    /// The flag's long name.
    pub flag: String,
    /// Where it has none.
    pub why: String,
}

impl Classify for NoEffectError {
    fn is_bad_configuration(&self) -> bool {
        true
    }
}

/// Checks the flags `given` on the command line (long names) and those set in `env` against
/// [`ROWS`]: the first given without effect is the error; each env var without effect (its
/// flag not given) is one warning in the returned list.
pub fn check(
    command: Option<CommandKind>,
    given: &[String],
    env: Env,
    settings: &Settings,
) -> Result<Vec<String>, NoEffectError> {
    let run = Run { mode: Mode::of(command, settings), settings };
    let name = command_name(command);
    let takes: Vec<String> = all_flags().into_iter().filter(|(c, _)| *c == name).map(|(_, f)| f).collect();
    let mut warnings = Vec::new();
    for row in ROWS.iter().filter(|r| takes.iter().any(|f| f == r.flag)) {
        let Some(why) = (row.no_effect)(&run) else { continue };
        if given.iter().any(|g| g == row.flag) {
            return Err(NoEffectError { flag: row.flag.into(), why: why.into() });
        }
        let mut names = super::env::env_names(row.flag).iter().filter(|_| row.env_warns);
        if let Some(name) = names.find(|n| env(n).is_some()) {
            warnings.push(format!(
                "environment variable {name:?} (flag --{}) has no effect {why}; ignored",
                row.flag
            ));
        }
    }
    warnings.extend(choices_made_without_a_word(&run));
    Ok(warnings)
}

/// Values that take effect but not the one they name where this run cannot see what they need:
/// each is one warning, so the choice made is never silent.
fn choices_made_without_a_word(run: &Run) -> Vec<String> {
    let s = run.settings;
    let mut out = Vec::new();
    let reads_config = matches!(run.mode, Mode::Daemon | Mode::Oneshot | Mode::Hook);
    if reads_config && s.config_dir.is_some() && s.node_name.is_none() {
        out.push(format!(
            "--config-dir without a node name (--node-name or NODE_NAME): the node's {} label cannot be read, so the config key is chosen without it (--config-default, then `default`, then the only key)",
            super::select::CONFIG_LABEL
        ));
    }
    if run.mode == Mode::Hook && s.allocation_mode == AllocationMode::Auto {
        out.push(
            "`nvlabel hook` cannot see the node's ResourceSlices: --allocation-mode auto labels for the device plugin here (name dra on a node whose GPUs NVIDIA's DRA driver allocates)"
                .into(),
        );
    }
    out
}

/// The subcommand's name as clap knows it (`""` for the labeller).
fn command_name(command: Option<CommandKind>) -> &'static str {
    match command {
        None => "",
        Some(CommandKind::Probe) => "probe",
        Some(CommandKind::Prune) => "prune",
        Some(CommandKind::Hook) => "hook",
        Some(CommandKind::Health) => "health",
    }
}

/// Every long flag of every command, with the command's name (`""` for the labeller).
pub fn all_flags() -> Vec<(String, String)> {
    let top = command();
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |name: &str, cmd: &clap::Command| {
        for a in cmd.get_arguments() {
            let action = a.get_action();
            let acts = matches!(action, clap::ArgAction::Help | clap::ArgAction::Version);
            if let (Some(long), false) = (a.get_long(), acts) {
                out.push((name.to_string(), long.to_string()));
            }
        }
    };
    add("", &top);
    for sub in top.get_subcommands() {
        add(sub.get_name(), sub);
    }
    out
}

#[cfg(test)]
#[path = "modes_tests.rs"]
mod tests;
