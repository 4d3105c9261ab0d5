//! `GET /openapi.json`: the OpenAPI 3.1 description of every route, kept beside the code in
//! `openapi.json` (a test checks that it lists exactly the routes the router serves).

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

/// The document's text.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Serves the document.
pub async fn document() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}
