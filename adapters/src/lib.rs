//! Storage adapters of the session-pruning engine. `opencode` holds everything that knows
//! OpenCode's database: path resolution, schema detection, the store over both storage
//! generations and the receipt tables. `http` serves the engine over HTTP (axum routes and the
//! Server-Sent Events stream).

#![warn(missing_docs)]

pub mod http;
pub mod opencode;
