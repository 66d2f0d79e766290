//! The nvlabel binary: parse, resolve, log, dispatch. Everything else is library code.

use clap::{Parser, ValueEnum};
use nvlabel::cli::{Cli, Command, LogFormat, Settings};
use nvlabel::config::ConfigFile;

fn main() {
    if let Err(e) = real_main() {
        eprintln!("nvlabel: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let env = |name: &str| std::env::var(name).ok();
    // Logging first, so config warnings are logged; a bad NVLABEL_LOG_FORMAT is reported by resolve.
    let log_format = cli
        .source
        .log_format
        .or_else(|| env("NVLABEL_LOG_FORMAT").and_then(|v| LogFormat::from_str(&v, false).ok()))
        .unwrap_or(LogFormat::Text);
    nvlabel::logging::init(log_format);

    let config_path = Settings::config_file_path(&cli, &env);
    let config = config_path.as_deref().map(ConfigFile::load).transpose()?.unwrap_or_default();
    if let Some(path) = &config_path {
        for warning in &config.warnings {
            tracing::warn!(file = %path.display(), "{warning}");
        }
    }
    let settings = Settings::resolve_with(&cli, &env, config_path.as_deref().map(|p| (p, &config.flags)))?;
    match cli.command {
        Some(Command::Probe) => {
            let snapshot = nvlabel::run::snapshot(&settings)?;
            print!("{}", snapshot.to_yaml()?);
        }
        None => {
            if !settings.oneshot {
                anyhow::bail!(
                    "only --oneshot is supported by this build; the daemon loop is not available yet"
                );
            }
            nvlabel::run::oneshot(&settings, config.sharing, &mut std::io::stdout().lock())?;
        }
    }
    Ok(())
}
