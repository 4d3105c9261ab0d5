//! `GET /api/workspaces/{id}/stats[?top=N]`: where the bytes of the database are (its tables,
//! event types, technical content, spill files, file sizes) and the workspace's largest
//! sessions, the page's overview. Read-only, on a browsing connection, in one snapshot.

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use pruning_adapters::opencode::{Overview, OVERVIEW_TOP_MAX};

use super::error::ApiError;
use super::responses::{BadRequest, Internal, NotFound, Unauthorized};
use super::state::AppState;
use super::{document, query};

/// Sessions listed when `top` is not given (as `session-prune stats`).
const DEFAULT_TOP: usize = 10;

/// `GET .../stats[?top=N]` -> `{databaseBytes, walBytes, freeBytes, tables, events, technical,
/// spill, sessions}`: the `stats --json` document, with the largest `N` (1 to 100, default 10)
/// of the workspace's sessions. The volumes describe the whole database file.
#[utoipa::path(
    get,
    path = "/api/workspaces/{id}/stats",
    summary = "Where the bytes of the database are, and the workspace's largest sessions",
    params(
        ("id" = String, Path, description = "A workspace id from GET /api/workspaces"),
        ("top" = Option<usize>, Query, description = "How many of the largest sessions to list, 1 to 100 (default 10)"),
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
    let top = match query::parse(raw.as_deref(), &["top"])?.remove("top") {
        None => DEFAULT_TOP,
        Some(text) => parse_top(&text)?,
    };
    let scope = workspace.scope();
    let overview = state
        .browse(move |lease| {
            lease.overview(top, &|owner| scope.admits(&owner.as_ownership()).is_ok())
        })
        .await?
        .map_err(|error| {
            // SQLite's words go to the log; the answer says where they are.
            eprintln!("failed: stats: measuring the database failed: {error}");
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
