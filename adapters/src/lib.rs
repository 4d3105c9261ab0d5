//! Storage adapters of the session-pruning engine. `opencode` holds everything that knows
//! OpenCode's database: path resolution, schema detection, the store over both storage
//! generations and the receipt tables.

#![warn(missing_docs)]

pub mod opencode;
