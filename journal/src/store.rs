//! The redb store: table definitions, the [`Journal`] handle, and the transaction helpers its
//! operations share. All redb use lives in this module and its children: `open` (acquiring
//! the file, format check, initialisation), `read` (queries), `write` (intents and commits),
//! `binding` (the bound database identity), `trim` (event retention), `epoch` (a journal
//! started after the loss of the one before).
//!
//! Tables (every record value is `[FORMAT_VERSION] ++ postcard`, see `codec`):
//!
//! | table          | key                      | value                                   |
//! |----------------|--------------------------|-----------------------------------------|
//! | `intents`      | intent_id bytes `[u8;16]`| encoded `Intent`                        |
//! | `request_keys` | request_key `[u8;32]`    | intent_id bytes of the latest intent    |
//! | `events`       | seq `u64`                | encoded `CommittedEvent`                |
//! | `meta`         | `&str`                   | `format_version`: one byte; `database_id`, `database_location`, `trimmed_through`, `resolved_trimmed_before`, `epoch`: encoded |
//! | `pending`      | intent_id bytes `[u8;16]`| `()`: the index of intents still pending |
//! | `receipt_digests` | event_id bytes `[u8;16]` | `[u8;32]`: the digest of the receipt a commit mark was written from (absent in a journal no commit with one was written to) |

mod binding;
mod epoch;
mod open;
mod read;
mod trim;
mod write;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redb::{
    Database, Durability, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, ReadableTable,
    TableDefinition, WriteTransaction,
};
use uuid::Uuid;

use crate::codec;
use crate::error::{BindError, CodecError, ReadError, WriteError};
use crate::record::{CommittedEvent, Intent};

pub use epoch::Epoch;
pub use open::panic_is_reported;

/// `intent_id` bytes -> encoded [`Intent`].
const INTENTS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("intents");
/// `request_key` -> `intent_id` bytes of the most recent intent recorded with that key.
const REQUEST_KEYS: TableDefinition<[u8; 32], [u8; 16]> = TableDefinition::new("request_keys");
/// `seq` -> encoded [`CommittedEvent`].
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
/// Named settings of the file itself.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `intent_id` bytes of every intent still pending (so recovery does not scan all intents).
const PENDING: TableDefinition<[u8; 16], ()> = TableDefinition::new("pending");

/// `event_id` bytes -> the digest of the receipt its commit was made from
/// ([`crate::Commit::receipt_digest`]). Kept as long as intents are, not trimmed with events.
const RECEIPT_DIGESTS: TableDefinition<[u8; 16], [u8; 32]> =
    TableDefinition::new("receipt_digests");

/// Meta key: the record format version, one raw byte.
const META_FORMAT_VERSION: &str = "format_version";
/// Meta key: the bound OpenCode database id, an encoded `String`.
const META_DATABASE_ID: &str = "database_id";
/// Meta key of the last place the bound database was seen at (an opaque string, e.g. a path).
const META_DATABASE_LOCATION: &str = "database_location";
/// Meta key (tombstone of retention): the highest seq removed from the log, an encoded `u64`.
const META_TRIMMED_THROUGH: &str = "trimmed_through";
/// Meta key (retention of resolved intents): ms since the epoch, an encoded `i64`: every refused
/// or abandoned intent whose id's time is before it was removed (resolving one with an earlier
/// id moves it back to that id's time).
const META_RESOLVED_TRIMMED_BEFORE: &str = "resolved_trimmed_before";

/// How long [`Journal::open`] keeps retrying while another handle holds the file: 2 s.
pub const OPEN_RETRY: Duration = Duration::from_secs(2);

/// An open journal file (redb). `Send + Sync`: share it behind an `Arc`; writes from several
/// threads are serialised by redb (one write transaction at a time).
///
/// Fail-stop: if the commit of any write transaction fails (for example a failed fsync), the
/// handle is poisoned: that write returns [`WriteError::Commit`] (or [`BindError::Commit`])
/// and every later write returns [`WriteError::Poisoned`] / [`BindError::Poisoned`], because
/// after a failed fsync the state of the file is unknown. Reads are not refused by the
/// journal, but redb itself latches an I/O failure, so they may fail with
/// [`ReadError::Storage`]. Drop the handle and open the file again to continue from its last
/// durable state.
///
/// Read-only: a handle from [`Journal::open_read_only`] reads like any other, writes nothing to
/// the file (not even redb's open mark) and refuses every write with [`WriteError::ReadOnly`] /
/// [`BindError::ReadOnly`].
#[derive(Debug)]
pub struct Journal {
    db: Handle,
    poisoned: AtomicBool,
}

/// The redb handle behind a [`Journal`].
enum Handle {
    /// Opened for reading and writing (holds the file's writer lock).
    Writable(Database),
    /// Opened read-only: never writes to the file.
    ReadOnly(ReadOnlyDatabase),
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Handle::Writable(_) => "Writable",
            Handle::ReadOnly(_) => "ReadOnly",
        })
    }
}

impl Handle {
    fn begin_read(&self) -> Result<ReadTransaction, redb::TransactionError> {
        match self {
            Handle::Writable(db) => db.begin_read(),
            Handle::ReadOnly(db) => db.begin_read(),
        }
    }
}

// A `Journal` is shared across threads (behind an `Arc`); keep it so.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Journal>();
};

impl Journal {
    fn from_parts(db: Database) -> Journal {
        Journal {
            db: Handle::Writable(db),
            poisoned: AtomicBool::new(false),
        }
    }

    fn read_only_from(db: ReadOnlyDatabase) -> Journal {
        Journal {
            db: Handle::ReadOnly(db),
            poisoned: AtomicBool::new(false),
        }
    }

    /// `true` for a handle opened with [`Journal::open_read_only`]: it refuses every write.
    pub fn is_read_only(&self) -> bool {
        matches!(self.db, Handle::ReadOnly(_))
    }

    /// `true` once a commit of this handle failed; every write is refused from then on.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Runs `body` in one read transaction (a consistent snapshot).
    fn read<T>(
        &self,
        body: impl FnOnce(&ReadTransaction) -> Result<T, ReadError>,
    ) -> Result<T, ReadError> {
        open::catching(|| {
            let txn = self.db.begin_read().storage()?;
            body(&txn)
        })
        .unwrap_or_else(|detail| Err(ReadError::Damaged { detail }))
    }

    /// Refuses with `E::poisoned()` once the handle is poisoned.
    fn refuse_if_poisoned<E: WriteFailure>(&self) -> Result<(), E> {
        if self.is_poisoned() {
            Err(E::poisoned())
        } else {
            Ok(())
        }
    }

    /// Runs `body` in one write transaction committed with immediate durability (one fsync).
    /// An error from `body` rolls the transaction back (dropping it aborts it); a failed
    /// commit poisons the handle.
    fn write<T, E: WriteFailure>(
        &self,
        body: impl FnOnce(&WriteTransaction) -> Result<T, E>,
    ) -> Result<T, E> {
        self.write_with(Durability::Immediate, body)
    }

    /// [`Journal::write`] committed with `durability` (`None`: no fsync; the transaction
    /// becomes durable with the next durable one or the handle's close).
    fn write_with<T, E: WriteFailure>(
        &self,
        durability: Durability,
        body: impl FnOnce(&WriteTransaction) -> Result<T, E>,
    ) -> Result<T, E> {
        self.refuse_if_poisoned::<E>()?;
        let Handle::Writable(db) = &self.db else {
            return Err(E::read_only());
        };
        let written = open::catching(|| {
            let mut txn = db.begin_write().storage()?;
            txn.set_durability(durability).storage()?;
            let value = body(&txn)?;
            match txn.commit() {
                Ok(()) => Ok(value),
                Err(error) => {
                    self.poisoned.store(true, Ordering::Release);
                    Err(E::commit_failed(error))
                }
            }
        });
        written.unwrap_or_else(|detail| {
            // The file is damaged: what redb did before it stopped is unknown (fail-stop).
            self.poisoned.store(true, Ordering::Release);
            Err(E::damaged(detail))
        })
    }
}

/// The error families of durable writes: both can report poisoning and a failed commit.
trait WriteFailure: From<redb::Error> {
    fn poisoned() -> Self;
    fn read_only() -> Self;
    fn commit_failed(error: redb::CommitError) -> Self;
    fn damaged(detail: String) -> Self;
}

impl WriteFailure for WriteError {
    fn poisoned() -> Self {
        WriteError::Poisoned
    }
    fn read_only() -> Self {
        WriteError::ReadOnly
    }
    fn commit_failed(error: redb::CommitError) -> Self {
        WriteError::Commit(error)
    }
    fn damaged(detail: String) -> Self {
        WriteError::Damaged { detail }
    }
}

impl WriteFailure for BindError {
    fn poisoned() -> Self {
        BindError::Poisoned
    }
    fn read_only() -> Self {
        BindError::ReadOnly
    }
    fn commit_failed(error: redb::CommitError) -> Self {
        BindError::Commit(error)
    }
    fn damaged(detail: String) -> Self {
        BindError::Damaged { detail }
    }
}

/// Widens any redb error type into [`redb::Error`], which every error family wraps.
trait StorageResult<T> {
    fn storage(self) -> Result<T, redb::Error>;
}

impl<T, E: Into<redb::Error>> StorageResult<T> for Result<T, E> {
    fn storage(self) -> Result<T, redb::Error> {
        self.map_err(Into::into)
    }
}

/// The intent stored under `intent_id`, if any.
fn get_intent<E>(
    intents: &impl ReadableTable<[u8; 16], &'static [u8]>,
    intent_id: Uuid,
) -> Result<Option<Intent>, E>
where
    E: From<redb::Error> + From<CodecError>,
{
    match intents.get(intent_id.as_bytes()).storage()? {
        Some(value) => Ok(Some(codec::decode_intent(value.value())?)),
        None => Ok(None),
    }
}

/// The event stored under `seq`, if any.
fn get_event<E>(
    events: &impl ReadableTable<u64, &'static [u8]>,
    seq: u64,
) -> Result<Option<CommittedEvent>, E>
where
    E: From<redb::Error> + From<CodecError>,
{
    match events.get(seq).storage()? {
        Some(value) => Ok(Some(codec::decode_event(value.value())?)),
        None => Ok(None),
    }
}

/// The retention tombstone: the highest seq removed from the log (0 when none was).
fn get_trimmed_through<E>(meta: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<u64, E>
where
    E: From<redb::Error> + From<CodecError>,
{
    match meta.get(META_TRIMMED_THROUGH).storage()? {
        Some(value) => Ok(codec::decode(value.value())?),
        None => Ok(0),
    }
}

/// The highest seq assigned so far: the newest stored event, else the retention tombstone,
/// else 0.
fn get_last_seq<E>(
    events: &impl ReadableTable<u64, &'static [u8]>,
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<u64, E>
where
    E: From<redb::Error> + From<CodecError>,
{
    match events.last().storage()? {
        Some((seq, _)) => Ok(seq.value()),
        None => get_trimmed_through(meta),
    }
}
