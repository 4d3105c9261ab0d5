//! The command line: the raw global and scope flags ([`args`]; each command's own flags live in
//! its module under `crate::commands`), the validated global configuration ([`config`]), the
//! duration flags' parser ([`duration`]) and the errors of a command line that cannot be run
//! ([`error`]).

pub mod args;
pub mod config;
pub mod duration;
pub mod error;
