//! OpenCode's SQLite storage: where the database is, its schema profile, the store over both
//! generations (V1 `message` + `part`, V2 `session_message`), the fence, the engine's own
//! receipt tables inside it, and what the CLI and the server ask of it (listings, stats, clean's
//! selection, spill files, vacuum and the online shrink that gives freed pages back while OpenCode
//! runs, OpenCode's workspaces).
//!
//! The modules are private: callers use [`OpenCodeStore`], its methods, and the types and few
//! functions re-exported here. No caller outside this crate holds the connection or writes SQL.
//! The HTTP server is its own crate (`pruning-server`); `adapters/` is the home of adapters, and
//! this is the one for OpenCode.

#![warn(missing_docs)]

mod archive;
mod audit;
mod browse;
mod cached;
mod clean;
mod generation;
mod group;
mod history;
mod ids;
mod json_sql;
mod lock_times;
mod migrated;
mod ownership;
mod paths;
mod queries;
mod receipts;
mod row_budget;
mod schema;
mod service;
mod sessions;
mod shrink;
mod spill;
mod sql_errors;
mod sql_functions;
mod standing;
mod stats;
mod store;
mod txn;
mod v1;
mod v2;
mod vacuum;
mod values;
mod workspaces;
mod write;

pub use archive::retention::{ArchiveStats, PurgeReport};
pub use browse::{Browser, Exactness, Interrupt, Lease, Overview, SessionsPage, OVERVIEW_TOP_MAX};
pub use clean::copies::PlannedCopy;
pub use clean::{CleanPolicy, Freed, Listing, Planned, SkipReason};
pub use lock_times::LockSummary;
pub use ownership::Owner;
pub use paths::{Environment, PathError, DEFAULT_CHANNEL};
/// The prune archive's file beside a database: `<database>.prune-archive`.
pub use pruning_archive::path_beside as archive_path;
pub use schema::holders::{holders_named, holding_path, process_named};
pub use schema::integrity::IntegrityTimes;
pub use schema::media::read_only_media;
pub use schema::soundness::{cut_short, cut_short_words};
pub use schema::{EventLog, Schema};
pub use service::{holding as services_holding, OpenCodeService};
pub use sessions::{MessageSummary, SessionSummary};
pub use shrink::{AutoVacuum, GivenBack};
pub use spill::folder as spill_folder;
pub use stats::{
    Copies, Estimate, EventVolume, MigratedV1, Release, Spill, Stats, TableVolume, Technical,
    Volume,
};
pub use store::{
    empty_database, refuse_detached, OpenCodeStore, StoreOptions, DEFAULT_ABANDONED_AFTER,
    DEFAULT_QUIET_PERIOD,
};
pub use v1::compact::{RANGE_BYTES, RANGE_ROWS};
pub use vacuum::{free_space, other_processes, side_file, Needs, VacuumError};
pub use workspaces::Workspace;
