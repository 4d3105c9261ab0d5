//! Storage adapters of the session-pruning engine. `opencode` holds everything that knows
//! OpenCode's database: path resolution, the schema profile, the store over both storage
//! generations, the fence, the receipt tables, listings, stats, clean's selection, spill files,
//! vacuum, read-only media and OpenCode's workspaces. The HTTP
//! server is its own crate (`pruning-server`).

#![warn(missing_docs)]

pub mod opencode;
