//! JSON answers: the bytes of [`pruning_engine::contract::document`] (the same bytes
//! `session-prune --json` prints for the same result) as a `200 application/json` response.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A `200 application/json` answer (or `500` with a JSON error, for a value that cannot be
/// serialized, which no type of this crate is).
pub fn json<T: Serialize + ?Sized>(value: &T) -> Response {
    respond(pruning_engine::contract::document(value))
}

/// [`json`] in the browsing routes' compact form ([`pruning_engine::browse::document`]).
pub fn compact<T: Serialize + ?Sized>(value: &T) -> Response {
    respond(pruning_engine::browse::document(value))
}

fn respond(document: serde_json::Result<Vec<u8>>) -> Response {
    match document {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(error) => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            format!(
                "{}\n",
                serde_json::json!({ "error": format!("the answer could not be serialized: {error}") })
            ),
        )
            .into_response(),
    }
}
