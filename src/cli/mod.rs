//! The command line: raw flags ([`args`]) and the validated configuration ([`config`], with
//! `serve`'s own in [`serve`], the duration flags' parser in [`duration`] and the errors in
//! [`error`]).

pub mod args;
pub mod config;
pub mod duration;
pub mod error;
pub mod serve;
