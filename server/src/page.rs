//! The page of our own (docs/ARCHITECTURE.md, "The page"): `GET /` and its script and style,
//! built into the binary from `server/page/`, so that `session-prune serve` and a browser are
//! all a person needs. They are served without the password: they hold no data, and the page
//! asks for the password itself when `GET /health` answers `401`, then sends it with every API
//! call. Every other byte it shows comes from the API routes.

use axum::extract::Path;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::responses::NotFound;

/// What the page may load: its own script and style, and calls to its own origin (the API and
/// the event stream); images only as `data:` URIs (attachments). Nothing inline, no frames.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// `GET /`: the page.
#[utoipa::path(
    get,
    path = "/",
    summary = "The page: where the bytes are, sessions, a session's outline and messages, \
        prunes and receipts, kept current by the event stream (no password needed to load it)",
    responses((status = 200, description = "The page", body = String, content_type = "text/html")),
    security(()),
)]
pub async fn index() -> Response {
    asset(
        include_str!("../page/index.html"),
        "text/html; charset=utf-8",
    )
}

/// The page's scripts and style, by name (docs/ARCHITECTURE.md, "The page", says what each
/// holds): the controller `app.js`, the declared state `state.js`, the views `overview.js`,
/// `sessions.js`, `session.js`, `panel.js` and `upkeep.js`; `api.js`, `stream.js`, `messages.js`,
/// `reasons.js`; the pure modules `events.js`, `open-session.js`, `clean.js` and
/// `upkeep-status.js` (unit-tested by `node --test server/page/test/`); `app.css`.
const ASSETS: &[(&str, &str, &str)] = &[
    script("app.js", include_str!("../page/app.js")),
    script("state.js", include_str!("../page/state.js")),
    script("overview.js", include_str!("../page/overview.js")),
    script("sessions.js", include_str!("../page/sessions.js")),
    script("session.js", include_str!("../page/session.js")),
    script("panel.js", include_str!("../page/panel.js")),
    script("api.js", include_str!("../page/api.js")),
    script("stream.js", include_str!("../page/stream.js")),
    script("messages.js", include_str!("../page/messages.js")),
    script("reasons.js", include_str!("../page/reasons.js")),
    script("events.js", include_str!("../page/events.js")),
    script("open-session.js", include_str!("../page/open-session.js")),
    script("clean.js", include_str!("../page/clean.js")),
    script("upkeep.js", include_str!("../page/upkeep.js")),
    script("upkeep-status.js", include_str!("../page/upkeep-status.js")),
    (
        "app.css",
        include_str!("../page/app.css"),
        "text/css; charset=utf-8",
    ),
];

/// One of the page's scripts: its name, its text and the JavaScript type.
const fn script(
    name: &'static str,
    body: &'static str,
) -> (&'static str, &'static str, &'static str) {
    (name, body, JAVASCRIPT)
}

const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// `GET /page/{name}`: one of the page's scripts or its style; `404` for any other name.
#[utoipa::path(
    get,
    path = "/page/{name}",
    summary = "One of the page's scripts or its style",
    params(("name" = String, Path, description = "A script of the page (`app.js`, `state.js`, `api.js`, `stream.js`, ...: each one `app.js` imports) or `app.css`")),
    responses(
        (
            status = 200,
            description = "The script or style",
            content((String = "text/javascript"), (String = "text/css"))
        ),
        (status = 404, response = NotFound),
    ),
    security(()),
)]
pub async fn file(Path(name): Path<String>) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|(known, _, _)| *known == name)
        .map(|(_, body, content_type)| asset(body, content_type))
        .ok_or_else(|| ApiError::NotFound(format!("the page has no file `{name}`")))
}

/// One asset with its type, the page's policy, and `no-cache` (a browser revalidates, so a new
/// binary's page is never mixed with an old script).
fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}
