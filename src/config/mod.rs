//! Configuration, all of it in one place: the command line ([`flags`], whose fields say each
//! flag's type, parser, default and help), one row per flag ([`rows`]) from which its env names,
//! config-file key and where it has no effect come, their resolution with env, the config file
//! and defaults, each value through its flag's one parser ([`value_parsers`]), into one [`Settings`]
//! value ([`resolve`]), the device-plugin config file ([`mod@file`]), which key of a ConfigMap
//! directory a node uses ([`select`]), and where the file comes from and how it is (re)loaded
//! ([`source`]).

mod apply;
pub mod arg_groups;
mod decorate;
pub mod file;
pub mod flag;
pub mod flag_docs;
pub mod flags;
pub mod health_checks;
pub mod modes;
pub mod resolve;
mod rooms;
pub mod row;
pub mod rows;
pub mod select;
pub mod settings;
pub mod source;
pub mod template;
pub mod usage;
pub mod value_parsers;

pub use file::{ConfigError, ConfigFile, FileFlags};
pub use flag::Flag;
pub use flags::{Cli, CommandKind};
pub use resolve::CliError;
pub use rooms::DaemonInputs;
pub use settings::Settings;
pub use source::{ConfigSource, ConfigState, Loaded, ReloadError};
