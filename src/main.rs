//! The nvlabel binary: parse, resolve, log, dispatch. Everything else is library code.

use clap::Parser;
use nvlabel::cli::{Cli, Command, Settings};
use nvlabel::sharing::Sharing;

fn main() {
    if let Err(e) = real_main() {
        eprintln!("nvlabel: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = Settings::resolve(&cli, &|name| std::env::var(name).ok())?;
    nvlabel::logging::init(settings.log_format);
    match cli.command {
        Some(Command::Probe) => {
            let snapshot = nvlabel::run::snapshot(&settings)?;
            print!("{}", snapshot.to_yaml()?);
        }
        None => {
            if settings.config_file.is_some() {
                anyhow::bail!("--config-file is not supported by this build yet");
            }
            if !settings.oneshot {
                anyhow::bail!(
                    "only --oneshot is supported by this build; the daemon loop is not available yet"
                );
            }
            nvlabel::run::oneshot(&settings, Sharing::default(), &mut std::io::stdout().lock())?;
        }
    }
    Ok(())
}
