//! The command line: raw flags ([`args`]) and the validated configuration ([`config`]).

pub mod args;
pub mod config;
