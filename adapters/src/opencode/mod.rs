//! OpenCode's SQLite storage: where the database is, which generations it holds, the V1 store,
//! the session list, and the engine's own receipt tables inside it.

pub mod ids;
pub mod paths;
pub mod receipts;
pub mod schema;
pub mod sessions;
pub mod sql_functions;
pub mod v1;
pub mod v2;

pub use paths::{Environment, PathError, DEFAULT_CHANNEL};
pub use schema::Schema;
pub use sessions::{MessageSummary, SessionSummary};
pub use v1::{V1Options, V1Store};
