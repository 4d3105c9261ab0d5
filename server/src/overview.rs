//! `GET /api/workspaces/{id}/stats[?top=N][&exact=true]`: where the bytes of the database are
//! (its tables, event types, technical content, copies, spill files, file sizes) and the
//! workspace's largest sessions, the page's overview. Read-only, on a browsing connection, in
//! one snapshot. The technical content and the copies are estimated from a sample unless
//! `exact=true` (which reads every row: on 1 GB, seconds).

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use pruning_opencode::{Exactness, Overview, OVERVIEW_TOP_MAX};

use super::error::ApiError;
use super::responses::{BadRequest, Internal, NotFound, Unauthorized};
use super::state::AppState;
use super::{document, query};

/// Sessions listed when `top` is not given (as `session-prune stats`).
const DEFAULT_TOP: usize = 10;

/// `GET .../stats[?top=N][&exact=true]` -> `{databaseBytes, walBytes, freeBytes, tables,
/// events, technical, copies, spill, estimate, sessions}`: the `stats --json` document, with
/// the largest `N` (1 to 100, default 10) of the workspace's sessions. The volumes describe the
/// whole database file; `estimate` is `null` when every figure is exact (`exact=true`).
#[utoipa::path(
    get,
    path = "/api/workspaces/{id}/stats",
    summary = "Where the bytes of the database are, and the workspace's largest sessions",
    params(
        ("id" = String, Path, description = "A workspace id from GET /api/workspaces"),
        ("top" = Option<usize>, Query, description = "How many of the largest sessions to list, 1 to 100 (default 10)"),
        ("exact" = Option<bool>, Query, description = "`true`: read every row for exact technical and copy figures (slow on a large file); `false` (the default): estimate them from a sample"),
    ),
    responses(
        (status = 200, description = "The volumes and the largest sessions", body = Overview),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn stats(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let mut query = query::parse(raw.as_deref(), &["top", "exact"])?;
    let top = match query.remove("top") {
        None => DEFAULT_TOP,
        Some(text) => parse_top(&text)?,
    };
    let exactness = match query.remove("exact").as_deref() {
        None | Some("false") => Exactness::Estimated,
        Some("true") => Exactness::Exact,
        Some(other) => {
            return Err(ApiError::BadParameter {
                field: "exact".into(),
                detail: format!("`exact` must be `true` or `false`, not `{other}`"),
            })
        }
    };
    let scope = workspace.scope();
    let overview = state
        .browse(move |lease| {
            lease.overview(top, exactness, &|owner| {
                scope.admits(&owner.as_ownership()).is_ok()
            })
        })
        .await?
        .map_err(|error| {
            // SQLite's words go to the log; the answer says where they are.
            tracing::error!(
                route = "stats",
                error = error.to_string().as_str(),
                "failed: measuring the database failed"
            );
            ApiError::Internal(
                "measuring the database failed: the server's log says why".to_string(),
            )
        })?;
    Ok(document::compact(&overview))
}

/// `top` as a count of 1 to [`OVERVIEW_TOP_MAX`].
fn parse_top(text: &str) -> Result<usize, ApiError> {
    match text.parse::<usize>() {
        Ok(top) if (1..=OVERVIEW_TOP_MAX).contains(&top) => Ok(top),
        _ => Err(ApiError::BadParameter {
            field: "top".into(),
            detail: format!(
                "`top` must be a whole number from 1 to {OVERVIEW_TOP_MAX}, not `{text}`"
            ),
        }),
    }
}
