//! The nvlabel binary: parse, log, start the runtime, hand over to [`nvlabel::app::run`], and
//! turn what it ended with into the exit status. Everything else is library code.

use nvlabel::config::Cli;
use std::collections::HashMap;

fn main() {
    // The command line before the runtime: `--help`, `--version` and a usage error exit here,
    // without starting the runtime's threads (each brings its stack and malloc arena).
    let (command, cli) = Cli::from_args().split();
    let runtime = nvlabel::runtime().expect("a tokio runtime");
    let env: HashMap<String, String> = std::env::vars().collect();
    // Logging first, so config warnings are logged; a bad NVLABEL_LOG_FORMAT is reported by resolve.
    let log_format = nvlabel::config::Settings::log_format_of(&cli, &|k| env.get(k).cloned());
    nvlabel::logging::init(log_format);
    match runtime.block_on(nvlabel::app::run(command, cli, env)) {
        Ok(0) => {}
        Ok(code) => std::process::exit(code),
        Err(e) => {
            nvlabel::logging::fatal(log_format, &e, e.hint());
            std::process::exit(nvlabel::exit::code(&e));
        }
    }
}
