//! The command line: raw flags ([`args`]) and the validated configuration ([`config`], with
//! `serve`'s own in [`serve`]).

pub mod args;
pub mod config;
pub mod serve;
