use super::*;
use crate::config::Cli;

fn resolved(args: &[&str]) -> (Option<CommandKind>, Vec<(Flag, String)>, Settings) {
    resolved_with(args, &|_| None)
}

fn resolved_with(args: &[&str], env: Env) -> (Option<CommandKind>, Vec<(Flag, String)>, Settings) {
    let all: Vec<&str> = std::iter::once("nvlabel").chain(args.iter().copied()).collect();
    let (command, cli) = Cli::try_from_args(all).unwrap().split();
    let settings = Settings::resolve(&cli, env).unwrap();
    (command, cli.given, settings)
}

fn refused(args: &[&str]) -> Option<String> {
    let (command, given, settings) = resolved(args);
    check(command, &given, &|_| None, &settings).err().map(|e| e.to_string())
}

/// Every flag of every command is a [`Flag`], whose row the table's exhaustive match gives; every
/// [`Flag`] is a flag of some command.
#[test]
fn every_flag_of_every_command_has_one_row() {
    let flags = all_flags();
    let mut missing: Vec<String> =
        flags.iter().filter(|(_, f)| Flag::named(f).is_none()).map(|(c, f)| format!("{c} --{f}")).collect();
    missing.dedup();
    assert!(missing.is_empty(), "flags without a Flag and a row in config/rows.rs: {missing:?}");
    for flag in Flag::ALL {
        assert_eq!(row(*flag).flag, *flag, "the row of --{flag} is another flag's");
        assert_eq!(Flag::ALL.iter().filter(|f| *f == flag).count(), 1, "--{flag} is listed twice");
        assert!(flags.iter().any(|(_, f)| f == flag.name()), "--{flag} is a flag of no command");
    }
}

#[test]
fn gfds_flags_accepted_without_effect_say_so_in_help() {
    let top = command();
    for row in Flag::ALL.iter().map(|f| row(*f)) {
        let Some(accepted) = row.gfd else { continue };
        let says = accepted.contains("accepted")
            && (accepted.contains("as GFD does") || accepted.contains("as in GFD"));
        assert!(says, "--{}'s row does not say where it is accepted as GFD does: {accepted}", row.flag);
        let arg = top.get_arguments().find(|a| a.get_long() == Some(row.flag.name())).unwrap();
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        assert!(
            help.contains(&format!("({accepted})")),
            "--{}'s help leaves out its row's note: {help}",
            row.flag
        );
    }
}

/// A flag a command's mode never uses is left out of its `--help`, and is refused there.
#[test]
fn help_leaves_out_exactly_the_flags_a_command_never_uses() {
    for (name, _, cmd) in commands().into_iter().filter(|(_, reads, _)| reads.rows()) {
        let name = name.as_str();
        let modes = Mode::of_command(name);
        for arg in cmd.get_arguments() {
            let Some(flag) = arg.get_long().and_then(Flag::named) else { continue };
            let never = !modes.is_empty() && modes.iter().all(|m| row(flag).never(*m));
            assert_eq!(
                arg.is_hide_set(),
                never,
                "`nvlabel {name}` --{flag}: hidden is {}",
                arg.is_hide_set()
            );
        }
    }
    let all = commands();
    let hidden = |name: &str| {
        let (_, _, cmd) = all.iter().find(|(n, _, _)| n == name).unwrap();
        cmd.get_arguments().filter(|a| a.is_hide_set()).count()
    };
    assert_eq!((hidden("health"), hidden("hook"), hidden("prune"), hidden("probe")), (15, 4, 1, 0));
    assert_eq!(hidden("health clear"), 9, "health's flags but the condition type, and --pod-name");
}

#[test]
fn flags_without_effect_are_refused_naming_the_mode() {
    let cases: &[(&[&str], &str)] = &[
        (&["--oneshot", "--health"], "--health has no effect with --oneshot: only a daemon keeps the GPU health condition; leave it out"),
        (&["health", "--health=false"], "--health has no effect in `nvlabel health`, which always reads GPU health and publishes nothing; leave it out"),
        (&["hook", "--no-timestamp=false"], "--no-timestamp has no effect in `nvlabel hook`, which never writes a timestamp; leave it out"),
        (&["--oneshot", "-o", "/tmp/x", "--use-node-feature-api=false", "--format", "json"], "--format has no effect where labels are not printed (only --output-file \"\" with --use-node-feature-api=false prints them); leave it out"),
        (&["--oneshot", "--metrics-addr", ":9"], "--metrics-addr has no effect with --oneshot: only a daemon serves /metrics; leave it out"),
        (&["--config-default", "a"], "--config-default has no effect without --config-dir, whose default key it names; leave it out"),
        (&["--health-ignore-xids", "13"], "--health-ignore-xids has no effect without --health in a daemon or `nvlabel health`; leave it out"),
        (&["--health", "--health-taint-effect", "NoExecute"], "--health-taint-effect has no effect without --health in a daemon with --allocation-mode dra or auto; leave it out"),
        (&["health", "--boot-id-file", "/x"], "--boot-id-file has no effect in `nvlabel health`, which keeps no faults across runs; leave it out"),
        (&["health", "--snapshot", "/x"], "--snapshot has no effect in `nvlabel health`, which reads NVML, never a snapshot; leave it out"),
        (&["--allocation-mode", "dra", "--mig-strategy", "mixed"], "--mig-strategy has no effect with --allocation-mode dra, which gives physical facts only (no MIG-strategy labels); leave it out"),
        (&["hook", "--namespace", "x"], "--namespace has no effect in `nvlabel hook`, which publishes nothing; leave it out"),
        (&["--snapshot", "/x", "--machine-type-file", "/y"], "--machine-type-file has no effect with --snapshot, which stands in for NVML and sysfs; leave it out"),
        (&["health", "clear", "--node-name", "n", "--boot-id-file", "/x"], "--boot-id-file has no effect in `nvlabel health clear`, which reads no GPU and only clears what the Node shows; leave it out"),
        (&["health", "clear", "--namespace", "gpu"], "--namespace has no effect in `nvlabel health clear` without --instance, whose ServiceAccount's namespace it names; leave it out"),
    ];
    for (args, want) in cases {
        assert_eq!(refused(args).as_deref(), Some(*want), "{args:?}");
    }
}

#[test]
fn flags_with_an_effect_or_accepted_as_gfd_does_pass() {
    let cases: &[&[&str]] = &[
        &["--oneshot", "-o", "", "--use-node-feature-api=false", "--format", "json"],
        &["--health", "--health-ignore-xids", "13", "--boot-id-file", "/b"],
        &["health", "--health-fatal-xids", "13"],
        // GFD's: accepted where they have no effect, as GFD accepts them.
        &[
            "--oneshot",
            "--sleep-interval",
            "5s",
            "-o",
            "",
            "--use-node-feature-api=false",
            "--node-name",
            "n",
        ],
        &["--use-node-feature-api", "-o", "/x", "--kubeconfig", "/k"],
        &["--config-dir", "/d", "--config-default", "a", "--node-name", "n"],
        &["hook", "--config-dir", "/d", "--node-name", "n"],
        &["--extended-labels", "--sharing-check-grace", "1m"],
        &["--allocation-mode", "auto", "--mig-strategy", "mixed"],
        &[
            "health",
            "clear",
            "--node-name",
            "n",
            "--gpu",
            "0",
            "--health-condition-type",
            "X",
            "--instance",
            "nv",
            "--namespace",
            "gpu",
        ],
    ];
    for args in cases {
        assert_eq!(refused(args), None, "{args:?}");
    }
}

/// `nvlabel health clear` is its own mode, and its GPUs reach `main` however they are given.
#[test]
fn health_clear_takes_its_gpus() {
    let args = ["nvlabel", "health", "clear", "--gpu", "0,1", "--gpu=GPU-x", "--node-name", "n"];
    let (command, cli) = Cli::try_from_args(args).unwrap().split();
    assert_eq!(command, Some(CommandKind::HealthClear));
    assert_eq!(cli.clear.gpu, ["0,1", "GPU-x"]);
    assert_eq!(cli.label.api.node_name.as_deref(), Some("n"));
    let (command, cli) = Cli::try_from_args(["nvlabel", "health"]).unwrap().split();
    assert_eq!((command, cli.clear.gpu.len()), (Some(CommandKind::Health), 0));
}

#[test]
fn env_without_effect_is_one_warning_never_a_failure() {
    let (command, given, settings) = resolved(&["--oneshot", "-o", "", "--use-node-feature-api=false"]);
    let env =
        |k: &str| matches!(k, "NVLABEL_HEALTH" | "NODE_NAME" | "GFD_SLEEP_INTERVAL").then(|| "x".to_string());
    let warnings = check(command, &given, &env, &settings).unwrap();
    assert_eq!(
        warnings,
        ["environment variable \"NVLABEL_HEALTH\" (flag --health) has no effect with --oneshot: only a daemon keeps the GPU health condition; ignored"]
    );
    let env = |k: &str| (k == "NVLABEL_EXPIRY").then(|| "1h".to_string());
    let (command, given, settings) =
        resolved_with(&["--oneshot", "-o", "", "--use-node-feature-api=false"], &env);
    assert_eq!(
        check(command, &given, &env, &settings).unwrap(),
        ["environment variable \"NVLABEL_EXPIRY\" (flag --expiry) has no effect where labels do not go to the feature file; ignored"]
    );
    // A subcommand is not warned about env of flags it does not take.
    let (command, given, settings) = resolved(&["probe"]);
    assert!(check(command, &given, &env, &settings).unwrap().is_empty());
}

/// A value that takes effect, but not as named, where the run cannot see what it needs: one
/// warning each, never silent.
#[test]
fn choices_made_without_what_they_need_are_said() {
    let warned = |args: &[&str]| {
        let (command, given, settings) = resolved(args);
        check(command, &given, &|_| None, &settings).unwrap()
    };
    let w = warned(&["--oneshot", "--config-dir=/cfg"]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("--config-dir without a node name"), "{w:?}");
    assert!(warned(&["--oneshot", "--config-dir=/cfg", "--node-name=n1"]).is_empty());
    assert!(warned(&["--oneshot", "--config-dir=/cfg", "--config-default=a"]).len() == 1);
    let w = warned(&["hook", "--allocation-mode=auto"]);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("auto labels for the device plugin"), "{w:?}");
    assert!(warned(&["hook", "--allocation-mode=dra"]).is_empty());
    assert!(warned(&["hook"]).is_empty(), "the default, device-plugin");
}

/// Every command says where it reads its flags from, in the one table of commands.
#[test]
fn every_command_says_where_it_reads_its_flags() {
    let clap: Vec<String> = commands().into_iter().map(|(name, _, _)| name).collect();
    let table: Vec<&str> = crate::config::row::COMMANDS.iter().map(|(name, _)| *name).collect();
    for name in &clap {
        assert!(table.contains(&name.as_str()), "`nvlabel {name}` is not in config/row.rs' COMMANDS");
    }
    for name in &table {
        assert!(clap.iter().any(|c| c == name), "COMMANDS names `nvlabel {name}`, which is no command");
    }
}

/// A command that reads its command line alone gets nothing from the rows: no env names, no GFD
/// note and no flag hidden in its `--help`, no flag given for the resolver, no env read, whatever
/// its flags' names (`nvlabel template`'s --config-file is the labeller's, its --snapshot and
/// --format its own).
#[test]
fn a_command_that_reads_its_command_line_alone_gets_nothing_from_the_rows() {
    let own: Vec<(String, clap::Command)> = commands()
        .into_iter()
        .filter(|(_, reads, _)| *reads == Reads::CommandLine)
        .map(|(name, _, cmd)| (name, cmd))
        .collect();
    assert!(own.iter().any(|(name, _)| name == "template"), "nvlabel template reads its command line alone");
    for (name, cmd) in &own {
        for arg in cmd.get_arguments() {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(!help.contains("[env:") && !help.contains("as GFD does"), "`nvlabel {name}`: {help}");
            assert!(!arg.is_hide_set(), "`nvlabel {name}` hides --{:?}", arg.get_long());
        }
    }
    let args = ["nvlabel", "template", "--snapshot", "/s", "--config-file", "/c", "--format", "json"];
    let (command, cli) = Cli::try_from_args(args).unwrap().split();
    assert_eq!((command, cli.reads, cli.given.as_slice()), (None, Reads::CommandLine, &[][..]));
    // Every variable a row names, with a value each row's parser would refuse or notice.
    let env = |k: &str| crate::config::flags::env_vars().any(|v| v == k).then(|| "json".to_string());
    assert_eq!(Settings::config_file_path(&cli, &env), None, "GFD_CONFIG_FILE read for `nvlabel template`");
    assert_eq!(Settings::config_dir_path(&cli, &env), None);
    assert_eq!(Settings::log_format_of(&cli, &env), crate::logging::LogFormat::Text);
    assert_eq!(Settings::resolve(&cli, &env), Settings::resolve(&cli, &|_| None));
    assert_eq!(Settings::resolve(&cli, &|_| None).unwrap().snapshot, None, "--snapshot is template's own");
    let args = ["nvlabel", "template", "--gpu", "t4", "--log-format", "json"];
    let (_, cli) = Cli::try_from_args(args).unwrap().split();
    assert_eq!(Settings::log_format_of(&cli, &|_| None), crate::logging::LogFormat::Json);
}
