//! JSON documents: the bytes every JSON answer carries, the same bytes `session-prune --json`
//! prints for the same result (pretty-printed, one trailing newline).

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The document bytes of `value`: pretty-printed JSON and a newline.
///
/// Errors: serde_json's, for a value that cannot be JSON (a map with non-string keys).
pub fn bytes<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    Ok(text)
}

/// A `200 application/json` answer (or `500` with a JSON error, for a value that cannot be
/// serialized, which no type of this crate is).
pub fn json<T: Serialize + ?Sized>(value: &T) -> Response {
    match bytes(value) {
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
