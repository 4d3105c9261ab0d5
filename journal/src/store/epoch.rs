//! Journal epochs: a journal started for a database whose journal was lost, numbered after
//! the receipts the database holds, so that no sequence number is ever given twice
//! (docs/ARCHITECTURE.md, "Journal epochs").
//!
//! A journal made by [`Journal::open`] is epoch 1 and starts at seq 1. One made by
//! [`Journal::create_epoch`] records its [`Epoch`] in meta (`epoch`), is bound to its database
//! from the start, and counts the events of the epochs before it as removed by retention
//! (`trimmed_through` = [`Epoch::after_seq`]): its first event is `after_seq + 1`, a cursor at
//! `after_seq` resumes with nothing missed, and an older one is told to resync, as a cursor
//! older than retention is. A build that knows no epochs reads such a journal the same way.

use std::path::Path;

use redb::{Database, Durability};
use serde::{Deserialize, Serialize};

use super::open::{create_in_place, initialise};
use super::{Journal, StorageResult, META, META_DATABASE_ID, META_TRIMMED_THROUGH};
use crate::codec;
use crate::error::{EpochError, OpenError, ReadError};

/// Meta key: the journal's [`Epoch`], encoded; absent in an epoch 1 journal.
const META_EPOCH: &str = "epoch";

/// Where a journal's history begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Epoch {
    /// 1 for a database's first journal; a journal started after the loss of the one before has
    /// a higher number (the database keeps the number of its current journal).
    pub number: u64,
    /// The highest sequence number the epochs before it may have given: its first event is
    /// `after_seq + 1`. 0 in epoch 1.
    pub after_seq: u64,
}

impl Epoch {
    /// A database's first journal.
    pub const FIRST: Epoch = Epoch {
        number: 1,
        after_seq: 0,
    };
}

impl Journal {
    /// This journal's epoch: [`Epoch::FIRST`] for one [`Journal::open`] created.
    ///
    /// Errors: [`ReadError::Codec`] for an undecodable entry; [`ReadError::Storage`].
    pub fn epoch(&self) -> Result<Epoch, ReadError> {
        self.read(|txn| {
            let meta = txn.open_table(META).storage()?;
            let stored = meta.get(META_EPOCH).storage()?;
            match stored {
                Some(value) => Ok(codec::decode(value.value())?),
                None => Ok(Epoch::FIRST),
            }
        })
    }

    /// Creates the journal of `epoch` at `path` for the database `database_id`, made durable
    /// before it appears at `path`, and opens it: bound to the database, with no intent and
    /// no event, its sequence numbers starting after `epoch.after_seq`. `path` must hold
    /// nothing, or an empty file (which is replaced): a journal is never written over.
    ///
    /// Errors: [`EpochError::Occupied`] when `path` holds a file that is not empty (or another
    /// process created one meanwhile); [`EpochError::EmptyDatabaseId`]; [`EpochError::Open`]
    /// when the file cannot be made or opened.
    pub fn create_epoch(
        path: &Path,
        database_id: &str,
        epoch: Epoch,
    ) -> Result<Journal, EpochError> {
        if database_id.is_empty() {
            return Err(EpochError::EmptyDatabaseId);
        }
        let create_error = |source: std::io::Error| {
            EpochError::Open(OpenError::Create {
                path: path.to_path_buf(),
                source,
            })
        };
        match std::fs::symlink_metadata(path) {
            Ok(found) if found.is_file() && found.len() == 0 => {
                std::fs::remove_file(path).map_err(create_error)?;
            }
            Ok(_) => {
                return Err(EpochError::Occupied {
                    path: path.to_path_buf(),
                })
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(create_error(error)),
        }
        let linked = create_in_place(path, |db| {
            initialise(db)?;
            begin(db, database_id, epoch)
        })?;
        if !linked {
            return Err(EpochError::Occupied {
                path: path.to_path_buf(),
            });
        }
        Ok(Journal::open(path)?)
    }
}

/// Writes the binding, the epoch and its tombstone into the new journal `db`, durably.
fn begin(db: &Database, database_id: &str, epoch: Epoch) -> Result<(), OpenError> {
    let mut txn = db.begin_write().storage()?;
    txn.set_durability(Durability::Immediate).storage()?;
    {
        let mut meta = txn.open_table(META).storage()?;
        let id = codec::encode(&database_id)?;
        meta.insert(META_DATABASE_ID, id.as_slice()).storage()?;
        let through = codec::encode(&epoch.after_seq)?;
        meta.insert(META_TRIMMED_THROUGH, through.as_slice())
            .storage()?;
        let value = codec::encode(&epoch)?;
        meta.insert(META_EPOCH, value.as_slice()).storage()?;
    }
    txn.commit().storage()?;
    Ok(())
}
