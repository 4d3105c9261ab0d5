//! The clean: the one procedure that takes what a clean policy selects from an OpenCode
//! database, for every caller (`session-prune clean`, the server's upkeep, the page's clean of
//! one session). It owns:
//!
//! - the order of a clean's phases ([`run`]): the copies OpenCode keeps first (superseded
//!   snapshots, migrated 1.x rows, shell output, diffs), then the messages' technical parts,
//!   then the spill files and the give back;
//! - the walk over the messages, and over one session ([`plan_session`]);
//! - [`Mode`], a dry run or an apply, decided once by the caller: every phase hands its planned
//!   prunes to a batch that answers them by their dry run or applies them through the engine,
//!   and one tally counts both ([`Answer`]);
//! - the report's figures ([`Report`]), and the turns a clean's writes take beside other
//!   writers ([`Turns`]).
//!
//! What each message's prune takes (the clean policy's rule) is the OpenCode store's
//! (`pruning_opencode::CleanPolicy`); applying is the engine's one write path. What a caller
//! adds reaches the clean as values and callbacks: the [`Clean`] it asks for, a stop flag, its
//! [`Turns`], its [`Progress`]. Nothing here prints (docs/ARCHITECTURE.md, "The clean").

mod answer;
mod clean;
mod copies;
mod error;
mod listings;
mod mode;
mod progress;
mod report;
mod run;
mod session;
mod turns;
mod walk;

pub use answer::{passes, Answer, Removal};
pub use clean::{Clean, BATCH_SIZE, MAX_KEPT_IDS};
pub use error::CleanError;
pub use mode::{Mode, Writer};
pub use progress::{Progress, Silent};
pub use report::{
    BeforeCompaction, BytesByKind, CompactionReport, DiffsReport, FileSize, MigratedReport, Report,
    ShellReport, Status, UntilLiveSize,
};
pub use run::run;
pub use session::{plan_session, CleanPlanRequest, PlannedMessage, SessionPlan};
pub use turns::{AtOnce, Turns};
