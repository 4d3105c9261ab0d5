//! The HTTP API's error answers: one status per kind, and a JSON body
//! `{"error": "what went wrong and what to do", "field": "the request field"}` (`field` only
//! when one is at fault). Contract refusals are not errors: they are `200` answers in the
//! contract's `{status:"blocked", reason}` shape.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use pruning_engine::{ContractError, StoreError};
use serde::Serialize;

/// Why a request was not carried out. Nothing was journaled or written for any of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// 401: a password is set and the request does not carry it.
    #[error("this server needs its password: send `Authorization: Bearer PASSWORD` or HTTP basic auth with it as the password")]
    Unauthorized,
    /// 400: the body breaks the contract (malformed JSON, an unknown key, a bound).
    #[error("invalid pruning request: {0}")]
    Contract(#[from] ContractError),
    /// 400: the body could not be read as text.
    #[error("{0}")]
    BadBody(String),
    /// 400: a query parameter or header is malformed or unknown.
    #[error("{detail}")]
    BadParameter {
        /// The parameter (`since`, `Last-Event-ID`, `sessionID`, ...).
        field: String,
        /// What is wrong with it.
        detail: String,
    },
    /// 413: the body is over 1 MiB.
    #[error(
        "the request body is over the 1 MiB limit ({} bytes)",
        pruning_engine::contract::MAX_REQUEST_BYTES
    )]
    TooLarge,
    /// 408: the body did not arrive within the given time.
    #[error("the request body did not arrive within {} s", .0.as_secs())]
    BodyTimeout(std::time::Duration),
    /// 403: the session (or the receipt's session) does not belong to the workspace.
    #[error("session {session_id} does not belong to workspace {workspace} (its directory is outside {directory})")]
    Forbidden {
        /// The session asked for.
        session_id: String,
        /// The workspace of the route.
        workspace: String,
        /// The workspace's directory.
        directory: String,
    },
    /// 403: a server without a password answers only requests that name a loopback host
    /// (`host::loopback_only`): another `Host` is what a page of another site sends through
    /// DNS rebinding.
    #[error("this server has no password and answers only requests for localhost, 127.0.0.1 or [::1], not for {0}: open it at http://127.0.0.1:PORT/, or set a password (`SESSION_PRUNE_PASSWORD`) to serve it under another name")]
    ForeignHost(String),
    /// 403: a server without a password answers only requests that name their host
    /// (`host::loopback_only`).
    #[error("this server has no password and answers only requests that name their host (`Host: 127.0.0.1:PORT`, as HTTP/1.1 requires)")]
    NoHost,
    /// 403: a request to a writing route from a page of an origin that is neither the
    /// server's own nor named by `serve --allow-origin` (`forgery`), password or not.
    #[error("a page of {0} may not write through this server: only its own pages and the origins `session-prune serve --allow-origin ORIGIN` names may prune, restore or change the schedule")]
    ForeignOrigin(String),
    /// 415: a writing route's body is not declared `application/json` (`forgery`): the types
    /// a page of another site can send without asking first are refused.
    #[error("send the body as JSON, with `Content-Type: application/json`")]
    NotJson,
    /// 404: no such workspace (`GET /api/workspaces` lists them).
    #[error("there is no workspace {0}: GET /api/workspaces lists them")]
    UnknownWorkspace(String),
    /// 404: no such route or resource.
    #[error("{0}")]
    NotFound(String),
    /// 405: the route exists with another method.
    #[error("method not allowed on this route (see GET /openapi.json)")]
    MethodNotAllowed,
    /// 500: the database or the journal failed; the message says which.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A 500 answer for `what` failing with `error`. SQLite's own words (which may quote SQL)
    /// never reach the answer: a [`StoreError::Storage`] is answered in our words and logged
    /// whole on the server's log; any other error is answered with its message.
    pub fn internal(what: &str, error: &(dyn std::error::Error + 'static)) -> Self {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(current) = cause {
            if let Some(StoreError::Storage(_)) = current.downcast_ref::<StoreError>() {
                tracing::error!(what, error = %error, "the database could not be read as expected");
                return Self::Internal(format!(
                    "{what}: the database is not what this version can read (the server's log has SQLite's words); `session-prune stats` on the command line says more"
                ));
            }
            cause = current.source();
        }
        Self::Internal(format!("{what}: {error}"))
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Contract(ContractError::BodyTooLarge { .. }) | Self::TooLarge => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Self::Contract(_) | Self::BadBody(_) | Self::BadParameter { .. } => {
                StatusCode::BAD_REQUEST
            }
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::Forbidden { .. }
            | Self::ForeignHost(_)
            | Self::NoHost
            | Self::ForeignOrigin(_) => StatusCode::FORBIDDEN,
            Self::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::UnknownWorkspace(_) | Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The request field at fault, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Contract(error) => error.field(),
            Self::BadParameter { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// The body of every error answer: `{error, field?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// What went wrong and what to do.
    pub error: String,
    /// The request field at fault, when one is (left out otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub field: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.to_string(),
            field: self.field().map(str::to_string),
        };
        let mut response = (self.status(), super::document::json(&body)).into_response();
        if matches!(self, Self::Unauthorized) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(r#"Basic realm="session-prune", charset="UTF-8""#),
            );
        }
        response
    }
}
