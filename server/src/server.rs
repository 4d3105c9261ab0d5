//! The router (every route, the authentication layer, JSON answers for unknown routes) and the
//! server loop with graceful shutdown (connections are accepted and bounded in `connections`).

use std::future::Future;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;

use super::connections::{self, ConnectionLimits};
use super::error::ApiError;
use super::routes::{public_routes, routes};
use super::state::AppState;

/// Every route of the API, behind the password check when one is set (the page and its assets
/// are served without it: `page`), and, when origins are
/// allowed ([`crate::ServerOptions::allowed_origins`]), the CORS layer outside it: it answers
/// a browser's preflight (`OPTIONS` with `Access-Control-Request-Method`, which carries no
/// password) and adds the CORS headers to every answer to an allowed origin, refusals
/// included, so that a page can read them. Another origin gets no CORS header: its browser
/// withholds the answer. Outside both, a server without a password answers only requests for
/// a loopback host (`host`: no DNS rebinding).
pub fn router(state: AppState) -> Router {
    let (routes, _) = routes().split_for_parts();
    let (public, _) = public_routes().split_for_parts();
    let origins = state.options().allowed_origins.clone();
    let state_for_host = state.clone();
    let router = routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .merge(public)
        .with_state(state);
    let router = if origins.is_empty() {
        router
    } else {
        router.layer(super::cors::layer(&origins))
    };
    router
        .layer(middleware::from_fn_with_state(
            state_for_host,
            super::host::loopback_only,
        ))
        .layer(middleware::from_fn(log_refused))
}

/// Logs one line per request answered with an HTTP error: `warn` for a refusal (4xx: a bad
/// request, a missing password, an unknown route), `error` for a failure (5xx), with the
/// method, the path (no query: it may hold ids only, but a log needs none) and the status.
/// A refusal the contract answers `200 {blocked}` is logged where it is decided.
async fn log_refused(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    if status.is_server_error() {
        tracing::error!(%method, path, status = status.as_u16(), "failed");
    } else if status.is_client_error() {
        tracing::warn!(%method, path, status = status.as_u16(), "refused");
    }
    response
}

/// How long connections may stay open after the stop signal: a client that stopped reading
/// its event stream, or a request whose body never ends, does not keep the server (and the
/// journal) forever. Engine calls already running finish regardless (see [`serve`]).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `router(state)` on `listener` within [`ConnectionLimits::for_this_process`] until
/// `signal` completes; see [`serve_with`].
///
/// # Cancel safety
///
/// As [`serve_with`].
///
/// Errors: as [`serve_with`].
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(
        listener,
        state,
        ConnectionLimits::for_this_process(),
        signal,
    )
    .await
}

/// Serves `router(state)` on `listener` within `limits` until `signal` completes, then shuts
/// down gracefully: no new connection is accepted, event streams end, requests in flight are
/// answered. With a schedule ([`crate::ServerOptions::upkeep`]) the upkeep runs beside the
/// connections, and a run in progress stops after its current batch. Returns once every
/// connection is closed and the upkeep has stopped, or [`SHUTDOWN_GRACE`] after the signal,
/// dropping the connections left; an engine call (a prune) already on the blocking pool runs
/// to its end either way, and the runtime's shutdown waits for it.
///
/// # Cancel safety
///
/// Dropping the returned future closes the listener; connections already open are served
/// until they end or the runtime stops, and a prune already on the blocking pool still runs to
/// its end (it never depends on the connection).
///
/// Errors: none at present (an accept error is logged and accepting goes on); the
/// `io::Result` leaves room for listener errors.
pub async fn serve_with(
    listener: TcpListener,
    state: AppState,
    limits: ConnectionLimits,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shutdown = state.shutdown().clone();
    let stopping = shutdown.clone();
    let upkeep = tokio::spawn(super::upkeep::schedule(state.clone()));
    let server = connections::serve(listener, router(state), limits, async move {
        signal.await;
        stopping.cancel();
    });
    let deadline = async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        () = server => {}
        () = deadline => {
            tracing::warn!(
                graceSeconds = SHUTDOWN_GRACE.as_secs(),
                "stopping: connections still open after the grace period were closed"
            );
        }
    }
    // A run of the upkeep in progress stops after its current batch and is announced.
    if let Err(error) = upkeep.await {
        tracing::error!(
            error = error.to_string().as_str(),
            "stopping: the upkeep's schedule ended badly"
        );
    }
    Ok(())
}

async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match &state.options().password {
        Some(password) if !password.admits(request.headers()) => {
            ApiError::Unauthorized.into_response()
        }
        _ => next.run(request).await,
    }
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route (GET /openapi.json lists them)".into())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
