//! What every handler shares: the engine, the event hub, the workspace list, the password,
//! the owner cache of event filtering, and the shutdown signal. Engine and store calls run on
//! tokio's blocking pool (the store is synchronous SQLite), never on the async workers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use pruning_engine::{Engine, Hub, JournalReplay};
use tokio_util::sync::CancellationToken;

use super::auth::Password;
use super::error::ApiError;
use super::upkeep::Upkeep;
use super::workspaces::{Workspace, Workspaces};
use pruning_engine::StoreError;
use pruning_opencode::{Browser, Interrupt, Lease, OpenCodeStore, Owner, StoreOptions};

/// How long event filtering trusts a session's owner once read.
const OWNER_TTL: Duration = Duration::from_secs(1);

/// Where a session stands against a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The session lies in the workspace.
    Inside,
    /// No session has this id (in either generation's table).
    Missing,
}

/// Which state of the owner cache an owner from [`AppState::cached_owner`] was taken from: while
/// [`AppState::owner_holds`] says the cache has not changed since, no other owner was read or
/// dropped, so the cache still holds that owner (until its time to live, 1 s, runs out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerStamp {
    /// The owner cache's generation when the owner was taken from it.
    generation: u64,
}

/// How the server is configured (the validated form of `serve`'s flags).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// With a password, every route needs it (bearer token or basic auth).
    pub password: Option<Password>,
    /// Where workspace ids come from.
    pub workspaces: Workspaces,
    /// How often an idle event stream sends a `heartbeat` event.
    pub heartbeat: Duration,
    /// Origins (`scheme://host[:port]`) whose pages may call the API from a browser (CORS);
    /// empty: none, the same origin only. The password is required all the same.
    pub allowed_origins: Vec<crate::Origin>,
    /// The clean on a schedule (`serve --auto-clean`); `None`: the server cleans only when
    /// asked.
    pub upkeep: Option<crate::UpkeepOptions>,
}

/// The shared state of all handlers; a cheap handle (an [`Arc`] inside).
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Arc<Engine<OpenCodeStore>>,
    hub: Hub<JournalReplay>,
    /// Held by every write (prune, prune-batch, each batch of the upkeep): one write at a time,
    /// in arrival order (tokio's mutex is fair: a batch of the upkeep that asks again waits
    /// behind the requests that asked meanwhile).
    writes: Arc<tokio::sync::Mutex<()>>,
    /// The clean on a schedule, and where it stands.
    upkeep: Upkeep,
    options: ServerOptions,
    /// Session id -> owner and when it was read, for filtering events by workspace: one read
    /// serves every subscriber of an event, and a session that moves is seen within
    /// [`OWNER_TTL`].
    owners: Mutex<HashMap<String, (Owner, Instant)>>,
    /// Moves on every change of `owners` (made while holding its lock), so that an owner taken
    /// from it is known to be still the cached one without looking it up again.
    owners_generation: AtomicU64,
    shutdown: CancellationToken,
    /// The browsing routes' read-only connections, opened on first use.
    browser: OnceLock<Arc<Browser>>,
}

impl AppState {
    /// State over an open engine.
    pub fn new(engine: Arc<Engine<OpenCodeStore>>, options: ServerOptions) -> Self {
        let hub = engine.hub();
        Self {
            inner: Arc::new(Inner {
                engine,
                hub,
                writes: Arc::new(tokio::sync::Mutex::new(())),
                upkeep: Upkeep::new(options.upkeep.clone()),
                options,
                owners: Mutex::new(HashMap::new()),
                owners_generation: AtomicU64::new(0),
                shutdown: CancellationToken::new(),
                browser: OnceLock::new(),
            }),
        }
    }

    /// The options the server runs with.
    pub fn options(&self) -> &ServerOptions {
        &self.inner.options
    }

    /// The event hub.
    pub fn hub(&self) -> &Hub<JournalReplay> {
        &self.inner.hub
    }

    /// Cancelled when the server shuts down: event streams end on it.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// The clean on a schedule and where it stands.
    pub(crate) fn upkeep(&self) -> &Upkeep {
        &self.inner.upkeep
    }

    /// The engine, for work that runs longer than one call (the upkeep's clean).
    pub(crate) fn engine(&self) -> Arc<Engine<OpenCodeStore>> {
        Arc::clone(&self.inner.engine)
    }

    /// The server's write turn, for a caller on the blocking pool: runs its work once every
    /// write that asked before it is done, and holds the turn while it runs. It must not be
    /// called on an async worker (it blocks).
    pub(crate) fn write_turn(&self) -> impl Fn(&mut dyn FnMut()) + Send + Sync + 'static {
        let writes = Arc::clone(&self.inner.writes);
        move |work: &mut dyn FnMut()| {
            let _turn = writes.blocking_lock();
            work();
        }
    }

    /// Runs a read on the blocking pool with the engine.
    ///
    /// Errors: [`ApiError::Internal`] if the call panicked (the engine stays usable: its
    /// state is in SQLite and the journal).
    pub async fn read<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Engine<OpenCodeStore>) -> T + Send + 'static,
    {
        let engine = Arc::clone(&self.inner.engine);
        tokio::task::spawn_blocking(move || call(&engine))
            .await
            .map_err(|error| ApiError::internal("the engine call failed", &error))
    }

    /// Runs a write on the blocking pool, after every write that arrived before it. The call
    /// runs to its end even if the client goes away (an in-flight prune always finishes).
    ///
    /// Errors: as [`AppState::read`].
    pub async fn write<T, F>(&self, call: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Engine<OpenCodeStore>) -> T + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let _one_at_a_time = inner.writes.blocking_lock();
            call(&inner.engine)
        })
        .await
        .map_err(|error| ApiError::internal("the engine call failed", &error))
    }

    /// Runs a browsing read on the blocking pool, on a read-only connection of its own (never
    /// the one prunes use). Cancel safety: dropping the returned future (the client went away)
    /// stops the read (`Interrupt`); the connection goes back to the pool.
    ///
    /// Errors: [`ApiError::Internal`] when the database cannot be opened for reading or the
    /// call panicked; the read's own failure is the inner `Err`.
    pub async fn browse<T, F>(&self, call: F) -> Result<Result<T, StoreError>, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Lease) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let lease = tokio::task::spawn_blocking(move || {
            let browser = match inner.browser.get() {
                Some(browser) => Arc::clone(browser),
                None => {
                    let path = inner.engine.store().path().to_path_buf();
                    let opened = Browser::open(&path, StoreOptions::default())?;
                    Arc::clone(inner.browser.get_or_init(|| opened))
                }
            };
            browser.lease()
        })
        .await
        .map_err(|error| ApiError::internal("opening a reader failed", &error))?
        .map_err(|error| ApiError::internal("the database cannot be read", &error))?;
        let mut stop = StopOnDrop(Some(lease.interrupt_handle()));
        let result = tokio::task::spawn_blocking(move || call(&lease))
            .await
            .map_err(|error| ApiError::internal("the read failed", &error));
        stop.0 = None;
        result
    }

    /// The workspace `id`.
    ///
    /// Errors: [`ApiError::UnknownWorkspace`] (404); [`ApiError::Internal`] when the database
    /// cannot be read.
    pub async fn workspace(&self, id: String) -> Result<Workspace, ApiError> {
        let options = self.inner.options.workspaces.clone();
        let found = self
            .read(move |engine| options.find(engine.store(), &id).map(|w| (w, id)))
            .await?;
        match found {
            Ok((Some(workspace), _)) => Ok(workspace),
            Ok((None, id)) => Err(ApiError::UnknownWorkspace(id)),
            Err(error) => Err(ApiError::internal("reading the workspaces failed", &error)),
        }
    }

    /// Every workspace.
    ///
    /// Errors: [`ApiError::Internal`] when the database cannot be read.
    pub async fn workspaces(&self) -> Result<Vec<Workspace>, ApiError> {
        let options = self.inner.options.workspaces.clone();
        self.read(move |engine| options.list(engine.store()))
            .await?
            .map_err(|error| ApiError::internal("reading the workspaces failed", &error))
    }

    /// Refuses (403) a session that exists outside `workspace`; tells a missing session from
    /// one inside (the caller answers a missing one without journaling anything).
    ///
    /// Errors: [`ApiError::Forbidden`]; [`ApiError::Internal`] when the database cannot be
    /// read.
    pub async fn admit(
        &self,
        workspace: &Workspace,
        session_id: &str,
    ) -> Result<Admission, ApiError> {
        match self.owner(session_id).await? {
            None => Ok(Admission::Missing),
            Some(owner) if workspace.scope().admits(&owner.as_ownership()).is_ok() => {
                Ok(Admission::Inside)
            }
            Some(_) => Err(ApiError::Forbidden {
                session_id: session_id.to_string(),
                workspace: workspace.id.clone(),
                directory: workspace.directory.clone(),
            }),
        }
    }

    /// The owner of a session as the database says now (no cache: requests are checked
    /// against the present).
    ///
    /// What it reads also refreshes the owner event filtering uses, so that the event of a
    /// prune admitted here goes to the streams of the workspace that admitted it.
    async fn owner(&self, session_id: &str) -> Result<Option<Owner>, ApiError> {
        let id = session_id.to_string();
        let state = self.clone();
        self.read(move |engine| {
            let owner = engine.store().owner(&id)?;
            let mut owners = state
                .inner
                .owners
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match &owner {
                Some(owner) => owners.insert(id, (owner.clone(), Instant::now())),
                None => owners.remove(&id),
            };
            state.inner.owners_generation.fetch_add(1, Ordering::AcqRel);
            Ok(owner)
        })
        .await?
        .map_err(|error: pruning_engine::StoreError| {
            ApiError::internal("reading the session failed", &error)
        })
    }

    /// The owner of a session for event filtering, read at most once a second (every
    /// subscriber asks for the session of every event), with its [`OwnerStamp`]. `Ok(None)`
    /// when the session no longer exists (its events then belong to no workspace).
    ///
    /// Errors: `Err(detail)` when the database cannot be read (the caller must not pass over
    /// the event as if it belonged elsewhere).
    pub async fn cached_owner(
        &self,
        session_id: &str,
    ) -> Result<Option<(Owner, OwnerStamp)>, String> {
        if let Some(found) = self.cached(session_id) {
            return Ok(Some(found));
        }
        let state = self.clone();
        let id = session_id.to_string();
        self.read(move |engine| {
            // Another subscriber may have read it while this one waited for the pool.
            if let Some(found) = state.cached(&id) {
                return Ok(Some(found));
            }
            let found = engine.store().owner(&id);
            let Some(owner) = found.map_err(|e| e.to_string())? else {
                return Ok(None);
            };
            let mut owners = state
                .inner
                .owners
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            owners.insert(id, (owner.clone(), Instant::now()));
            let generation = state.inner.owners_generation.fetch_add(1, Ordering::AcqRel) + 1;
            Ok(Some((owner, OwnerStamp { generation })))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Whether the owner cache is unchanged since the owner that came with `stamp` was taken
    /// from it (no owner read or dropped since, for any session). Cheap: no lock, no lookup,
    /// no clock; it does not look at the owner's age, which the caller bounds.
    pub fn owner_holds(&self, stamp: OwnerStamp) -> bool {
        self.inner.owners_generation.load(Ordering::Acquire) == stamp.generation
    }

    fn cached(&self, session_id: &str) -> Option<(Owner, OwnerStamp)> {
        let owners = self
            .inner
            .owners
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let generation = self.inner.owners_generation.load(Ordering::Acquire);
        owners
            .get(session_id)
            .filter(|(_, read)| read.elapsed() < OWNER_TTL)
            .map(|(owner, _)| (owner.clone(), OwnerStamp { generation }))
    }
}

/// Stops a browsing read when dropped while it still holds the handle: the future awaiting the
/// read was dropped before the read ended.
struct StopOnDrop(Option<Interrupt>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(interrupt) = self.0.take() {
            interrupt.interrupt();
        }
    }
}
