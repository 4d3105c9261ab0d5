//! Browsing a session, read-only and bounded (docs/ARCHITECTURE.md, "Browsing"): the windows,
//! outlines and excerpts of the browsing contract (`pruning_engine::browse`) over both storage
//! generations, and the sessions page of `GET .../sessions`.
//!
//! A [`Browser`] keeps read-only connections of its own (never the connection that prunes), so
//! that a long read never holds a prune up; a [`Lease`] is one of them, lent to one request.
//! Every request reads in one transaction (one snapshot of the database) and can be stopped
//! from another thread ([`Interrupt`]).

mod assets;
mod excerpt;
mod message;
mod outline;
pub(crate) mod overview;
mod sessions_page;
mod visible;
mod window;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pruning_engine::browse::{
    AssetReadRequest, AssetResult, AssetsRequest, AssetsResult, BrowseReason,
    OutlinePreviewRequest, OutlineRequest, OutlineResult, PreviewsResult, WindowRequest,
    WindowResult,
};
use pruning_engine::StoreError;
use rusqlite::Connection;

pub use overview::{Exactness, Overview, OVERVIEW_TOP_MAX};
pub use sessions_page::SessionsPage;

use super::store::{storage, OpenCodeStore, StoreOptions};
use super::txn::{idle_after_rollback, ReadTxn};

/// Idle connections a [`Browser`] keeps for the next requests.
const IDLE_CONNECTIONS: usize = 4;

/// Read-only connections to one OpenCode database, lent out one per request.
pub struct Browser {
    path: PathBuf,
    options: StoreOptions,
    idle: Mutex<Vec<OpenCodeStore>>,
}

impl Browser {
    /// Opens the database at `path` for browsing (read-only; see
    /// [`OpenCodeStore::open_read_only`], whose errors it returns).
    pub fn open(path: &Path, options: StoreOptions) -> Result<Arc<Self>, StoreError> {
        Self::over(open_reader(path, options)?, options)
    }

    /// Browses the database of `store`, a store opened with
    /// [`OpenCodeStore::open_read_only`], lent out first.
    ///
    /// Errors: [`StoreError::Storage`] when SQLite refuses the connection settings.
    pub fn over(store: OpenCodeStore, options: StoreOptions) -> Result<Arc<Self>, StoreError> {
        store.leave_wal_on_close()?;
        Ok(Arc::new(Self {
            path: store.path().to_path_buf(),
            options,
            idle: Mutex::new(vec![store]),
        }))
    }

    /// A connection for one request: an idle one, or a new one.
    ///
    /// Errors: as [`OpenCodeStore::open_read_only`].
    pub fn lease(self: &Arc<Self>) -> Result<Lease, StoreError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        let store = match idle {
            Some(store) => store,
            None => open_reader(&self.path, self.options)?,
        };
        Ok(Lease {
            browser: Arc::clone(self),
            store: Some(store),
            live: Arc::new(Mutex::new(true)),
        })
    }
}

/// A read-only store that leaves the WAL as it is when it closes (a reader changes no file).
fn open_reader(path: &Path, options: StoreOptions) -> Result<OpenCodeStore, StoreError> {
    let store = OpenCodeStore::open_read_only(path, options)?;
    store.leave_wal_on_close()?;
    Ok(store)
}

/// One read-only connection, lent by a [`Browser`] until dropped.
pub struct Lease {
    browser: Arc<Browser>,
    store: Option<OpenCodeStore>,
    /// True while the lease holds its connection; cleared (under this lock) before the
    /// connection goes back to the pool, so that an [`Interrupt`] never reaches the request
    /// the connection is lent to next.
    live: Arc<Mutex<bool>>,
}

/// Stops the read running on a [`Lease`] from another thread: its SQLite statements fail at
/// once (`SQLITE_INTERRUPT`), and the request ends with an error. Harmless when nothing runs,
/// and once the lease is dropped.
pub struct Interrupt {
    handle: rusqlite::InterruptHandle,
    live: Arc<Mutex<bool>>,
}

impl Interrupt {
    /// Stops the lease's running read, if the lease still holds its connection.
    pub fn interrupt(&self) {
        let live = self
            .live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *live {
            self.handle.interrupt();
        }
    }
}

impl Lease {
    /// A handle that stops this lease's running read.
    pub fn interrupt_handle(&self) -> Interrupt {
        Interrupt {
            handle: self.store().connection().get_interrupt_handle(),
            live: Arc::clone(&self.live),
        }
    }

    /// `window`: at most 200 messages around a target (see [`pruning_engine::browse`]).
    ///
    /// Errors: SQLite's ([`StoreError::Storage`]), an interrupted read among them.
    pub fn window(&self, request: &WindowRequest) -> Result<WindowResult, StoreError> {
        self.read(
            |conn| window::read(conn, request),
            |reason| WindowResult::Blocked { reason },
        )
    }

    /// `outline`: one page of a session's outline with its checkpoints.
    ///
    /// Errors: as [`Self::window`].
    pub fn outline(&self, request: &OutlineRequest) -> Result<OutlineResult, StoreError> {
        self.outline_counted(request).map(|(result, _)| result)
    }

    /// [`Self::outline`], and how many rows it parsed for entries (the rows of the chunks it
    /// answers as changed): what revalidation costs beyond the header rows.
    ///
    /// Errors: as [`Self::window`].
    pub fn outline_counted(
        &self,
        request: &OutlineRequest,
    ) -> Result<(OutlineResult, u64), StoreError> {
        self.read(
            |conn| outline::read(conn, request),
            |reason| (OutlineResult::Blocked { reason }, 0),
        )
    }

    /// `outlinePreview`: text and tool excerpts of up to 12 messages.
    ///
    /// Errors: as [`Self::window`].
    pub fn previews(&self, request: &OutlinePreviewRequest) -> Result<PreviewsResult, StoreError> {
        self.read(
            |conn| excerpt::read(conn, request),
            |reason| PreviewsResult::Blocked { reason },
        )
    }

    /// `assets`: one page of the session's file attachments, newest message first.
    ///
    /// Errors: as [`Self::window`].
    pub fn assets(&self, request: &AssetsRequest) -> Result<AssetsResult, StoreError> {
        self.read(
            |conn| assets::list(conn, request),
            |reason| AssetsResult::Blocked { reason },
        )
    }

    /// `assetRead`: one attachment as its `data:` URI.
    ///
    /// Errors: as [`Self::window`].
    pub fn asset(&self, request: &AssetReadRequest) -> Result<AssetResult, StoreError> {
        self.read(
            |conn| assets::read(conn, request),
            |reason| AssetResult::Blocked { reason },
        )
    }

    /// One page of the sessions `admit` lets through, by session id, after `cursor` (a session
    /// id from the last page), with their sizes.
    ///
    /// Errors: as [`Self::window`].
    pub fn sessions(
        &self,
        cursor: Option<&str>,
        admit: &dyn Fn(&super::Owner) -> bool,
    ) -> Result<SessionsPage, StoreError> {
        let conn = self.store().connection();
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        let result = sessions_page::read(&conn, cursor, admit);
        txn.rollback();
        result.map_err(storage)
    }

    /// Where the bytes of the database are and its `top` largest sessions that `admit` lets
    /// through, in one snapshot (see [`Overview`]). It reads every row's size; `Exact` also
    /// reads every row (on a database of 1 GB, about as long as `VACUUM INTO` of it), while
    /// `Estimated` reads a sample (`benches/overview.rs`).
    ///
    /// Errors: as [`Self::window`].
    pub fn overview(
        &self,
        top: usize,
        exactness: Exactness,
        admit: &dyn Fn(&super::Owner) -> bool,
    ) -> Result<Overview, StoreError> {
        let store = self.store();
        let conn = store.connection();
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        let result = overview::read(&conn, store.path(), top, exactness, admit);
        txn.rollback();
        result.map_err(storage)
    }

    fn store(&self) -> &OpenCodeStore {
        match &self.store {
            Some(store) => store,
            None => unreachable!("a lease holds its store until dropped"),
        }
    }

    /// Runs `read` in one read transaction (one snapshot), rolled back after. A row that
    /// cannot be read as the type its column should hold (text that is not UTF-8, a NULL or
    /// text where OpenCode writes a number) is answered `refuse(unsupported_storage)`.
    fn read<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
        refuse: impl FnOnce(BrowseReason) -> T,
    ) -> Result<T, StoreError> {
        let conn = self.store().connection();
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        let result = read(&conn);
        // A rollback that fails (an interrupted one) leaves the transaction open: the lease's
        // drop then closes the connection rather than lend it again.
        txn.rollback();
        match result {
            Ok(value) => Ok(value),
            Err(error) if damaged_row(&error) => Ok(refuse(BrowseReason::UnsupportedStorage)),
            Err(error) => Err(storage(error)),
        }
    }
}

/// Whether `error` is a stored value of the wrong type rather than a failure of SQLite.
fn damaged_row(error: &rusqlite::Error) -> bool {
    matches!(
        error,
        rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::Utf8Error(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
    )
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self
            .live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = false;
        let Some(store) = self.store.take() else {
            return;
        };
        // A read cut short (a panic, an interrupted rollback) may have left its transaction
        // open: such a connection is closed, never lent again.
        let idle_ok = idle_after_rollback(&store.connection());
        if !idle_ok {
            return;
        }
        let mut idle = self
            .browser
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < IDLE_CONNECTIONS {
            idle.push(store);
        }
    }
}
