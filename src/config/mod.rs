//! Configuration, all of it in one place: the command line ([`flags`]), its resolution with env,
//! the config file and defaults into one [`Settings`] value ([`settings`]), the device-plugin
//! config file ([`mod@file`]), which key of a ConfigMap directory a node uses ([`select`]), and where
//! the file comes from and how it is (re)loaded ([`source`]).

mod apply;
pub mod arg_groups;
pub mod env;
pub mod file;
pub mod flags;
pub mod health;
pub mod modes;
mod resolve;
mod rooms;
pub mod select;
pub mod settings;
pub mod source;
pub mod usage;

pub use file::{ConfigError, ConfigFile, FileFlags};
pub use flags::{Cli, CommandKind};
pub use rooms::DaemonInputs;
pub use settings::{CliError, Settings};
pub use source::{ConfigSource, ConfigState, Loaded, ReloadError};
