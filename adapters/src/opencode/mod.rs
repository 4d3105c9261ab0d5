//! OpenCode's SQLite storage: where the database is, which generations it holds, the store over
//! both generations (V1 `message` + `part`, V2 `session_message`), the session list, and the
//! engine's own receipt tables inside it.

pub mod cached;
pub mod clean;
pub mod history;
pub mod ids;
pub mod media;
pub mod ownership;
pub mod paths;
mod queries;
pub mod receipts;
pub mod schema;
pub mod sessions;
pub mod spill;
pub mod sql_functions;
pub mod stats;
pub mod store;
pub mod v1;
pub mod v2;
pub mod vacuum;
pub mod values;
pub mod workspaces;

pub use paths::{Environment, PathError, DEFAULT_CHANNEL};
pub use schema::Schema;
pub use sessions::{MessageSummary, SessionSummary};
pub use store::{OpenCodeStore, StoreOptions, DEFAULT_QUIET_PERIOD};
