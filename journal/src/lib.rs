//! `pruning-journal`: the durable write-ahead intent journal and committed-event log of the
//! session-pruning engine.
//!
//! This crate owns nothing but its own file: a redb database holding
//!
//! - **intents**: one per prune request, journaled durably *before* the OpenCode database is
//!   touched ([`Journal::record_intents`]), then resolved to exactly one terminal state
//!   ([`IntentState::Committed`], [`IntentState::Refused`] or [`IntentState::Abandoned`]);
//! - **the committed-event log**: one [`CommittedEvent`] per committed prune, numbered by a
//!   journal-assigned sequence (`seq`, starting at 1, strictly increasing by 1, never reused),
//!   which subscribers replay from a cursor ([`Journal::events_after`]);
//! - **meta**: the record format version, the identity of the one OpenCode database the
//!   journal is bound to ([`Journal::bind`]) and where that database was last seen
//!   (`database_location`), how far retention has trimmed the event log
//!   (`trimmed_through`), and the journal's [`Epoch`] when it was started after the loss of the
//!   one before ([`Journal::create_epoch`]).
//!
//! Every record value is one format-version byte ([`FORMAT_VERSION`]) followed by postcard
//! bytes ([`codec`]); a record of an unknown version is an error, never a guess.
//!
//! Durability: every write is one redb write transaction committed with immediate durability
//! (one fsync per call, so a batch passed to one call is one group commit), except
//! [`Journal::commit_lazily`], which becomes durable with the next durable write or the close.
//! A failed commit poisons the handle: every later write returns [`WriteError::Poisoned`] (see
//! [`Journal`]).
//!
//! The crate knows nothing of OpenCode: ids, revisions and request keys are opaque here.

#![warn(missing_docs)]

pub mod codec;
mod error;
mod record;
mod retention;
mod store;

pub use codec::{FORMAT_VERSION, RECORD_VERSION};
pub use error::{BindError, CodecError, EpochError, OpenError, ReadError, WriteError};
pub use record::{Commit, CommittedEvent, EventKind, Intent, IntentState, Resolution, Selection};
pub use retention::Retention;
pub use store::{panic_is_reported, Epoch, Journal, OPEN_RETRY};
