//! The bound database identity: a journal belongs to exactly one OpenCode database, recorded
//! in meta (`database_id`) on first use and checked on every later bind.

use redb::ReadableTable;

use super::{Journal, StorageResult, META, META_DATABASE_ID, META_DATABASE_LOCATION};
use crate::codec;
use crate::error::{BindError, CodecError, ReadError};

impl Journal {
    /// The OpenCode database id this journal is bound to, or `None` before the first
    /// [`Journal::bind`].
    ///
    /// Errors: [`ReadError::Codec`] for an undecodable entry; [`ReadError::Storage`].
    pub fn bound_database(&self) -> Result<Option<String>, ReadError> {
        self.read(|txn| stored_binding(&txn.open_table(META).storage()?))
    }

    /// Binds the journal to the OpenCode database `database_id` on first use (durably); the
    /// same id again is `Ok` and writes nothing.
    ///
    /// Errors: [`BindError::Mismatch`] with both ids when the journal is bound to another
    /// database (a copied database, or another channel's journal file);
    /// [`BindError::EmptyDatabaseId`]; [`BindError::Poisoned`] / [`BindError::Commit`] (see
    /// [`Journal`]); [`BindError::Codec`] / [`BindError::Storage`].
    pub fn bind(&self, database_id: &str) -> Result<(), BindError> {
        if database_id.is_empty() {
            return Err(BindError::EmptyDatabaseId);
        }
        let bound = {
            let txn = self.db.begin_read().storage()?;
            stored_binding::<BindError>(&txn.open_table(META).storage()?)?
        };
        if let Some(bound) = bound {
            return check_same(bound, database_id);
        }
        self.write(|txn| {
            let mut meta = txn.open_table(META).storage()?;
            // Checked again inside the write: another thread may have bound it meanwhile.
            if let Some(bound) = stored_binding::<BindError>(&meta)? {
                return check_same(bound, database_id);
            }
            let value = codec::encode(&database_id)?;
            meta.insert(META_DATABASE_ID, value.as_slice()).storage()?;
            Ok(())
        })
    }
}

impl Journal {
    /// Where the bound database was last seen (an opaque string the caller chose, such as its
    /// canonical path), or `None` if never recorded.
    ///
    /// Errors: [`ReadError::Codec`] for an undecodable entry; [`ReadError::Storage`].
    pub fn database_location(&self) -> Result<Option<String>, ReadError> {
        self.read(|txn| stored_location(&txn.open_table(META).storage()?))
    }

    /// Records where the bound database is (durably), if it differs from what is recorded.
    ///
    /// Errors: as [`Journal::bind`], without the mismatch.
    pub fn record_database_location(&self, location: &str) -> Result<(), BindError> {
        let current = {
            let txn = self.db.begin_read().storage()?;
            stored_location::<BindError>(&txn.open_table(META).storage()?)?
        };
        if current.as_deref() == Some(location) {
            return Ok(());
        }
        self.write(|txn| {
            let mut meta = txn.open_table(META).storage()?;
            let value = codec::encode(&location)?;
            meta.insert(META_DATABASE_LOCATION, value.as_slice())
                .storage()?;
            Ok(())
        })
    }
}

/// The `database_location` meta entry, decoded.
fn stored_location<E>(
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<Option<String>, E>
where
    E: From<redb::Error> + From<CodecError>,
{
    match meta.get(META_DATABASE_LOCATION).storage()? {
        Some(value) => Ok(Some(codec::decode(value.value())?)),
        None => Ok(None),
    }
}

/// The `database_id` meta entry, decoded.
fn stored_binding<E>(
    meta: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<Option<String>, E>
where
    E: From<redb::Error> + From<CodecError>,
{
    match meta.get(META_DATABASE_ID).storage()? {
        Some(value) => Ok(Some(codec::decode(value.value())?)),
        None => Ok(None),
    }
}

/// `Ok` when `bound` is `found`, else [`BindError::Mismatch`].
fn check_same(bound: String, found: &str) -> Result<(), BindError> {
    if bound == found {
        Ok(())
    } else {
        Err(BindError::Mismatch {
            bound,
            found: found.to_owned(),
        })
    }
}
