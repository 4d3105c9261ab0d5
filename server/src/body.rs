//! Request bodies: read whole, at most 1 MiB (CodeNomad's broker `bodyLimit`), as UTF-8 text
//! for the contract parsers.

use axum::body::Body;
use axum::http::header::CONTENT_LENGTH;
use axum::http::HeaderMap;
use pruning_engine::contract::MAX_REQUEST_BYTES;

use super::error::ApiError;

/// Longest a client may take to send a request body.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads a request body of at most [`MAX_REQUEST_BYTES`] bytes.
///
/// Errors: [`ApiError::TooLarge`] (413) when the declared `Content-Length` or the bytes sent
/// exceed the limit (nothing past the limit is read); [`ApiError::BadBody`] (400) when the
/// body is not UTF-8 or the connection fails mid-body; [`ApiError::BodyTimeout`] (408) when
/// the body takes longer than [`BODY_TIMEOUT`].
pub async fn read(headers: &HeaderMap, body: Body) -> Result<String, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_REQUEST_BYTES as u64) {
        return Err(ApiError::TooLarge);
    }
    let reading = axum::body::to_bytes(body, MAX_REQUEST_BYTES);
    let bytes = tokio::time::timeout(BODY_TIMEOUT, reading)
        .await
        .map_err(|_| ApiError::BodyTimeout(BODY_TIMEOUT))?
        .map_err(|error| {
            let too_large = std::error::Error::source(&error)
                .is_some_and(|cause| cause.is::<http_body_util::LengthLimitError>());
            if too_large {
                ApiError::TooLarge
            } else {
                ApiError::BadBody(format!("the request body could not be read: {error}"))
            }
        })?;
    String::from_utf8(bytes.to_vec())
        .map_err(|_| ApiError::BadBody("the request body is not UTF-8 text".into()))
}
