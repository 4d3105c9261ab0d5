//! The audit and discovery routes: `GET /health`, `GET /api/workspaces`,
//! `GET /api/workspaces/{id}/session-pruning/receipts[?sessionID=ID]`,
//! `.../receipts/{receiptID}` and `.../audit[?sessionID=ID]`. Receipts come from the receipt
//! table in the OpenCode database (the authority), in the same JSON shape as
//! `session-prune receipts --json`; the audit is `session-prune audit --json`'s report.

use std::collections::HashSet;

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use pruning_engine::{AuditReport, AuditScope, Engine, Receipt, ENGINE_VERSION};
use pruning_opencode::OpenCodeStore;
use serde::Serialize;
use uuid::Uuid;

use super::document;
use super::error::ApiError;
use super::query;
use super::responses::{BadRequest, Forbidden, Internal, NotFound, Unauthorized};
use super::state::{Admission, AppState};
use super::workspaces::{Listed, Workspace};

/// The answer of `GET /health`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `ok`.
    status: Healthy,
    /// The engine's version (`CARGO_PKG_VERSION`).
    version: &'static str,
    /// The identity the journal is bound to.
    #[serde(rename = "databaseID")]
    database_id: String,
    /// The newest event's sequence number (0 before any prune).
    #[serde(rename = "lastSeq")]
    last_seq: u64,
    /// The journal's epoch: 1 for a database's first journal, higher for one started after
    /// the one before was lost (`session-prune journal new-epoch`), whose events are numbered
    /// after the epochs before; a client that keeps a cursor keeps the epoch with it.
    #[serde(rename = "journalEpoch")]
    journal_epoch: u64,
    /// The fence's quiet period (`serve --quiet-period`), ms: a session OpenCode wrote to more
    /// recently is refused (`maintenance_required`).
    #[serde(rename = "quietPeriodMs")]
    quiet_period_ms: u64,
}

/// The one value of `status` in [`Health`].
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
enum Healthy {
    /// The engine is open and its journal readable.
    Ok,
}

/// `GET /health` -> `{status:"ok", version, databaseID, lastSeq, journalEpoch, quietPeriodMs}`:
/// the engine is open and its journal readable; `lastSeq` is the newest event's sequence number
/// (0 before any prune); `journalEpoch` the journal's epoch (docs/http.md); `quietPeriodMs` the
/// fence's quiet period, which the page states in its refusals.
#[utoipa::path(
    get,
    path = "/health",
    summary = "The engine is open and its journal readable",
    responses(
        (status = 200, description = "Healthy", body = Health),
        (status = 401, response = Unauthorized),
        (status = 500, response = Internal),
    )
)]
pub async fn health(State(state): State<AppState>) -> Result<Response, ApiError> {
    let (database_id, read, quiet_period) = state
        .read(|engine| {
            let journal = engine.journal();
            let read = journal
                .last_seq()
                .and_then(|last| Ok((last, journal.epoch()?.number)));
            let quiet_period = engine.store().options().quiet_period;
            (engine.database_id().to_string(), read, quiet_period)
        })
        .await?;
    let (last_seq, journal_epoch) =
        read.map_err(|error| ApiError::internal("the journal is unreadable", &error))?;
    Ok(document::json(&Health {
        status: Healthy::Ok,
        version: ENGINE_VERSION,
        database_id,
        last_seq,
        journal_epoch,
        quiet_period_ms: u64::try_from(quiet_period.as_millis()).unwrap_or(u64::MAX),
    }))
}

/// `GET /api/workspaces` -> `[{id, directory}]`, ordered by id.
#[utoipa::path(
    get,
    path = "/api/workspaces",
    summary = "Workspaces: each id names a directory; sessions in it or below belong to it",
    responses(
        (status = 200, description = "Every workspace, ordered by id", body = Vec<Listed>),
        (status = 401, response = Unauthorized),
        (status = 500, response = Internal),
    )
)]
pub async fn workspaces(State(state): State<AppState>) -> Result<Response, ApiError> {
    let listed: Vec<Listed> = state.workspaces().await?.iter().map(Listed::from).collect();
    Ok(document::json(&listed))
}

/// `GET .../receipts[?sessionID=ID]` -> the receipts of the workspace's sessions (or of one of
/// them), oldest first. Receipts of sessions that no longer exist belong to no workspace
/// (`session-prune receipts` lists every receipt).
#[utoipa::path(
    get,
    path = "/api/workspaces/{id}/session-pruning/receipts",
    summary = "Audit: receipts of the workspace's sessions, oldest first",
    params(
        ("id" = String, Path, description = "A workspace id from GET /api/workspaces"),
        ("sessionID" = Option<String>, Query, description = "Only this session's receipts"),
    ),
    responses(
        (status = 200, description = "The receipts, oldest first", body = Vec<Receipt>),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn receipts(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let session = query::parse(raw.as_deref(), &["sessionID"])?.remove("sessionID");
    if let Some(session_id) = &session {
        state.admit(&workspace, session_id).await?;
    }
    let receipts = in_workspace(&state, workspace, session).await?;
    Ok(document::json(&receipts))
}

/// `GET .../receipts/{receiptID}` -> one receipt; `404` when the workspace has none with that
/// id (a receipt of a session outside the workspace is not shown).
#[utoipa::path(
    get,
    path = "/api/workspaces/{id}/session-pruning/receipts/{receiptID}",
    summary = "Audit: one receipt (404 when the workspace has none with that id)",
    params(
        ("id" = String, Path, description = "A workspace id from GET /api/workspaces"),
        ("receiptID" = Uuid, Path, description = "A receipt's `receiptID`"),
    ),
    responses(
        (status = 200, description = "The receipt", body = Receipt),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn receipt(
    State(state): State<AppState>,
    Path((workspace, receipt_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let wanted = Uuid::try_parse(&receipt_id).map_err(|_| ApiError::BadParameter {
        field: "receiptID".into(),
        detail: format!("`{receipt_id}` is not a receipt id (a UUID, as `receiptID` in a receipt)"),
    })?;
    let all = state
        .read(|engine| engine.receipts(None))
        .await?
        .map_err(|error| ApiError::internal("reading the receipts failed", &error))?;
    let not_found = ApiError::NotFound(format!(
        "there is no receipt {wanted} in workspace {} (GET .../receipts lists them)",
        workspace.id
    ));
    let Some(found) = all.into_iter().find(|r| r.receipt_id == wanted) else {
        return Err(not_found);
    };
    // A receipt of another workspace's session, or of a session deleted since, is not this
    // workspace's to show (the list leaves them out too).
    if !matches!(
        state.admit(&workspace, &found.session_id).await,
        Ok(Admission::Inside)
    ) {
        return Err(not_found);
    }
    Ok(document::json(&found))
}

/// `GET .../audit[?sessionID=ID]` -> the audit of the workspace's receipts (or of one session's)
/// against the database and the journal: `200` with the report whether or not everything holds
/// (`ok` says which); the receipt chain is always walked whole (docs/ARCHITECTURE.md, "Audit").
#[utoipa::path(
    get,
    path = "/api/workspaces/{id}/session-pruning/audit",
    summary = "Audit: every receipt of the workspace checked against the database and the journal",
    params(
        ("id" = String, Path, description = "A workspace id from GET /api/workspaces"),
        ("sessionID" = Option<String>, Query, description = "Only this session's receipts and events"),
    ),
    responses(
        (status = 200, description = "The report; `ok` is false when anything does not hold", body = AuditReport),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn audit(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let session = query::parse(raw.as_deref(), &["sessionID"])?.remove("sessionID");
    if let Some(session_id) = &session {
        state.admit(&workspace, session_id).await?;
    }
    let report = state
        .read(move |engine| -> Result<AuditReport, Failure> {
            match &session {
                Some(id) => engine.audit(AuditScope::Session(id)),
                None => {
                    // The sessions the receipt rows name, read without reading whole receipts:
                    // a damaged row is for the audit to report, not a failure.
                    let named = engine
                        .store()
                        .receipt_session_ids()
                        .map_err(Failure::from)?;
                    let sessions = sessions_inside(engine, &workspace, named.iter())?;
                    engine.audit(AuditScope::Sessions(&sessions))
                }
            }
            .map_err(Failure::from)
        })
        .await?
        .map_err(|error| ApiError::internal("the audit failed", &*error))?;
    Ok(document::json(&report))
}

/// The receipts (of `session`, or of every session) whose session lies in `workspace`.
async fn in_workspace(
    state: &AppState,
    workspace: Workspace,
    session: Option<String>,
) -> Result<Vec<Receipt>, ApiError> {
    state
        .read(move |engine| {
            let receipts = engine.receipts(session.as_deref()).map_err(Failure::from)?;
            let inside = sessions_inside(
                engine,
                &workspace,
                receipts.iter().map(|receipt| &receipt.session_id),
            )?;
            Ok(receipts
                .into_iter()
                .filter(|receipt| inside.contains(&receipt.session_id))
                .collect())
        })
        .await?
        .map_err(|error: Failure| ApiError::internal("reading the receipts failed", &*error))
}

/// A failure of a read the audit routes make (the engine's or the store's error, kept typed so
/// that [`ApiError::internal`] can tell SQLite's words from ours).
type Failure = Box<dyn std::error::Error + Send + Sync>;

/// The sessions of `session_ids` that lie in `workspace` (a session deleted since lies in none).
fn sessions_inside<'a>(
    engine: &Engine<OpenCodeStore>,
    workspace: &Workspace,
    session_ids: impl Iterator<Item = &'a String>,
) -> Result<HashSet<String>, Failure> {
    let scope = workspace.scope();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut inside = HashSet::new();
    for session_id in session_ids {
        if !seen.insert(session_id) {
            continue;
        }
        let owner = engine.store().owner(session_id).map_err(Failure::from)?;
        if owner.is_some_and(|o| scope.admits(&o.as_ownership()).is_ok()) {
            inside.insert(session_id.clone());
        }
    }
    Ok(inside)
}
