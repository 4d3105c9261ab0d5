//! `GET /api/session-pruning/upkeep` (where the clean on a schedule stands) and `POST` with
//! `{paused}` (pause or resume it): the page's upkeep view. The schedule itself is `upkeep`.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::error::ApiError;
use super::responses::{
    BadRequest, BodyTimeout, Forbidden, NotFound, NotJson, TooLarge, Unauthorized,
};
use super::state::AppState;
use super::upkeep::{UpkeepChange, UpkeepStatus};
use super::{body, document, forgery};

/// `GET /api/session-pruning/upkeep` -> `{enabled, everyMs, paused, runningSince, nextRunAt,
/// lastRun, runs}` (times in ms since the epoch). A server started without `--auto-clean`
/// answers `enabled: false`.
#[utoipa::path(
    get,
    path = "/api/session-pruning/upkeep",
    summary = "Where the clean on a schedule (`serve --auto-clean`) stands: last run, next run, \
        paused",
    responses(
        (status = 200, description = "The schedule", body = UpkeepStatus),
        (status = 401, response = Unauthorized),
    )
)]
pub async fn upkeep(State(state): State<AppState>) -> Response {
    document::json(&state.upkeep().status())
}

/// `POST /api/session-pruning/upkeep {paused}` -> the schedule as `GET` answers it. Pausing
/// stops a run in progress after its current batch; resuming schedules the next run one
/// interval from now.
///
/// Errors: 415 for a body not sent as `application/json` and 403 for a page of a foreign origin
/// (`forgery`, as every route that writes); 400 for a body that is not `{"paused":
/// true|false}`; 404 on a server started without `--auto-clean`; 408 and 413 for a body that
/// is late or over 1 MiB (as every route).
#[utoipa::path(
    post,
    path = "/api/session-pruning/upkeep",
    summary = "Pause or resume the clean on a schedule",
    request_body = UpkeepChange,
    responses(
        (status = 200, description = "The schedule, changed", body = UpkeepStatus),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 408, response = BodyTimeout),
        (status = 413, response = TooLarge),
        (status = 415, response = NotJson),
    )
)]
pub async fn change_upkeep(
    State(state): State<AppState>,
    headers: HeaderMap,
    request: Body,
) -> Result<Response, ApiError> {
    forgery::refuse_forgeable(&state, &headers)?;
    let text = body::read(&headers, request).await?;
    let refused = |error: serde_json::Error| {
        ApiError::BadBody(format!(
            "the body must be {{\"paused\": true}} or {{\"paused\": false}}: {error}"
        ))
    };
    // An object, read as one: serde would take a JSON array as the fields in order.
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(refused)?;
    let change: UpkeepChange =
        serde_json::from_value(serde_json::Value::Object(object)).map_err(refused)?;
    match state.upkeep().set_paused(change.paused) {
        Some(status) => Ok(document::json(&status)),
        None => Err(ApiError::NotFound(
            "this server cleans on no schedule: start it with `session-prune serve \
             --auto-clean 1h` (and the clean's policy flags) to have one"
                .into(),
        )),
    }
}
