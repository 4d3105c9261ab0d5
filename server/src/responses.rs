//! The reusable error answers of the OpenAPI document, each an `ErrorBody` (`ApiError`'s
//! response): the handlers' `#[utoipa::path]` name them by these types. Nothing was journaled
//! or written for any of them.

use utoipa::{IntoResponses, ToResponse};

use super::error::ErrorBody;

/// Malformed JSON, an unknown key, a bound broken, or a bad parameter; nothing was done.
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct BadRequest(ErrorBody);

/// A password is set and the request does not carry it (with a `WWW-Authenticate` challenge).
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct Unauthorized(ErrorBody);

/// The session does not belong to the workspace, or a page of an origin neither the server's
/// own nor named by `--allow-origin` asked to write; nothing was done.
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct Forbidden(ErrorBody);

/// No such workspace (or receipt).
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct NotFound(ErrorBody);

/// The request body did not arrive within 30 s; nothing was done.
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct BodyTimeout(ErrorBody);

/// The body is over 1 MiB; nothing was done.
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct TooLarge(ErrorBody);

/// A write whose body is not declared `application/json` (what a page of another site could
/// send without a CORS preflight); nothing was done.
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct NotJson(ErrorBody);

/// The database or the journal could not be read; the message says which.
#[derive(ToResponse)]
#[allow(dead_code)]
pub struct Internal(ErrorBody);

/// The error answers the four contract routes (preview, prune, history, prune-batch) share,
/// listed once for their `#[utoipa::path]` (each route adds its `200`).
#[derive(IntoResponses)]
#[allow(dead_code)]
pub enum ContractFailures {
    /// See [`BadRequest`].
    #[response(status = 400)]
    BadRequest(#[ref_response] BadRequest),
    /// See [`Unauthorized`].
    #[response(status = 401)]
    Unauthorized(#[ref_response] Unauthorized),
    /// See [`Forbidden`].
    #[response(status = 403)]
    Forbidden(#[ref_response] Forbidden),
    /// See [`NotFound`].
    #[response(status = 404)]
    NotFound(#[ref_response] NotFound),
    /// See [`BodyTimeout`].
    #[response(status = 408)]
    BodyTimeout(#[ref_response] BodyTimeout),
    /// See [`TooLarge`].
    #[response(status = 413)]
    TooLarge(#[ref_response] TooLarge),
    /// See [`Internal`].
    #[response(status = 500)]
    Internal(#[ref_response] Internal),
}

/// The error answers of the routes that write (prune, prune-batch, restore): those of
/// [`ContractFailures`] and `415` for a body not sent as JSON; their `403` is also a page of a
/// foreign origin (`forgery`).
#[derive(IntoResponses)]
#[allow(dead_code)]
pub enum WriteFailures {
    /// See [`BadRequest`].
    #[response(status = 400)]
    BadRequest(#[ref_response] BadRequest),
    /// See [`Unauthorized`].
    #[response(status = 401)]
    Unauthorized(#[ref_response] Unauthorized),
    /// See [`Forbidden`].
    #[response(status = 403)]
    Forbidden(#[ref_response] Forbidden),
    /// See [`NotFound`].
    #[response(status = 404)]
    NotFound(#[ref_response] NotFound),
    /// See [`BodyTimeout`].
    #[response(status = 408)]
    BodyTimeout(#[ref_response] BodyTimeout),
    /// See [`TooLarge`].
    #[response(status = 413)]
    TooLarge(#[ref_response] TooLarge),
    /// See [`NotJson`].
    #[response(status = 415)]
    NotJson(#[ref_response] NotJson),
    /// See [`Internal`].
    #[response(status = 500)]
    Internal(#[ref_response] Internal),
}
