//! The command line: raw flags ([`args`]) and the validated configuration ([`config`], with
//! `serve`'s own in [`serve`] and the duration flags' parser in [`duration`]).

pub mod args;
pub mod config;
pub mod duration;
pub mod serve;
