//! The server's connections, bounded in time and in number.
//!
//! A client that opens connections and sends nothing, or half a request head, would otherwise
//! hold a file descriptor and about 20 KiB of buffers per connection for as long as it likes:
//! enough of them exhaust the process's descriptors, and `/health` stops answering. So:
//!
//! - a new connection must send its first complete request head within
//!   [`ConnectionLimits::header_read_timeout`], or it is closed;
//! - a connection with no request in flight is closed when its next request head is not
//!   complete [`ConnectionLimits::idle_timeout`] after the previous response ended (hyper's
//!   header-read timer, which runs only between requests: an event stream, or any response
//!   still being sent, is never cut by it);
//! - at most [`ConnectionLimits::max_connections`] connections are served at once; the next
//!   ones are not accepted and wait in the kernel's listen backlog until one closes, so that
//!   the descriptors the journal and the database need are always left.
//!
//! A closed connection is dropped without an answer (the client reads the end of the stream):
//! no request was in flight on it.
//!
//! Connections are served by hyper's HTTP/1 server, one task each, with hyper-util's tokio
//! glue and its graceful shutdown (on the stop signal, idle connections close at once and the
//! others after their response).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service as _};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How long a new connection may take to send its first complete request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may wait, with no request in flight, until its next request head is
/// complete.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The most connections served at once, unless the descriptor limit leaves fewer (see
/// [`max_connections`]).
pub const MAX_CONNECTIONS: usize = 1024;

/// File descriptors left to the rest of the process when the connection limit is derived from
/// `RLIMIT_NOFILE`: the database with its `-wal` and `-shm` files, the journal, spill files
/// being removed, the listener, the runtime's own and the standard streams, with room to spare.
pub const DESCRIPTOR_HEADROOM: u64 = 64;

/// How long the accept loop waits before accepting again after an error that is not about one
/// connection (such as running out of descriptors).
const ACCEPT_RETRY: Duration = Duration::from_secs(1);

/// The bounds the server puts on its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a new connection may take to send its first complete request head.
    pub header_read_timeout: Duration,
    /// How long a connection may wait, with no request in flight, until its next request head
    /// is complete.
    pub idle_timeout: Duration,
    /// The most connections served at once (values below 1 count as 1); the next ones wait in
    /// the kernel's listen backlog.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// [`HEADER_READ_TIMEOUT`], [`IDLE_TIMEOUT`] and [`max_connections`] of this process.
    pub fn for_this_process() -> Self {
        Self {
            header_read_timeout: HEADER_READ_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections: max_connections(),
        }
    }
}

/// [`MAX_CONNECTIONS`], or fewer when the process's soft `RLIMIT_NOFILE` minus
/// [`DESCRIPTOR_HEADROOM`] is smaller (at least 1).
pub fn max_connections() -> usize {
    match rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
        None => MAX_CONNECTIONS,
        Some(soft) => usize::try_from(soft.saturating_sub(DESCRIPTOR_HEADROOM))
            .unwrap_or(MAX_CONNECTIONS)
            .clamp(1, MAX_CONNECTIONS),
    }
}

/// Accepts connections on `listener` and serves `router` on each, within `limits`, until
/// `signal` completes; then closes the listener, shuts every connection down gracefully and
/// returns once all are closed.
///
/// # Cancel safety
///
/// Dropping the future closes the listener; the connection tasks already spawned keep running
/// until they end or the runtime stops.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    signal: impl Future<Output = ()>,
) {
    let mut signal = std::pin::pin!(signal);
    let most = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let permits = Arc::new(Semaphore::new(most));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout);
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let mut full = false;
    loop {
        if permits.available_permits() == 0 && !full {
            tracing::warn!(
                connections = most,
                "connection limit reached: new connections wait until one closes"
            );
        }
        full = permits.available_permits() == 0;
        // Accepting only with a permit in hand leaves the connections beyond the limit in the
        // kernel's backlog. Both steps are cancel safe.
        let next = async {
            let permit = Arc::clone(&permits).acquire_owned().await;
            (permit, listener.accept().await)
        };
        let (permit, accepted) = tokio::select! {
            () = &mut signal => break,
            next = next => next,
        };
        // The semaphore is never closed.
        let Ok(permit) = permit else { break };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(connection(
                    stream,
                    router.clone(),
                    Arc::clone(&builder),
                    graceful.watcher(),
                    limits.header_read_timeout,
                    permit,
                ));
            }
            Err(error) if about_one_connection(&error) => {}
            Err(error) => {
                tracing::error!(
                    %error,
                    retrySeconds = ACCEPT_RETRY.as_secs(),
                    "accepting connections failed; trying again"
                );
                tokio::select! {
                    () = &mut signal => break,
                    () = tokio::time::sleep(ACCEPT_RETRY) => {}
                }
            }
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Serves one connection, holding `permit` until it closes: closes it when no complete request
/// head arrived within `header_read_timeout` of its acceptance.
async fn connection(
    stream: TcpStream,
    router: Router,
    builder: Arc<http1::Builder>,
    watcher: Watcher,
    header_read_timeout: Duration,
    permit: OwnedSemaphorePermit,
) {
    let first_head = CancellationToken::new();
    let service = {
        let first_head = first_head.clone();
        let router = TowerToHyperService::new(router);
        service_fn(move |request: hyper::Request<Incoming>| {
            first_head.cancel();
            router.call(request)
        })
    };
    let served = watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
    let mut served = std::pin::pin!(served);
    tokio::select! {
        biased;
        // An error is the client's (a malformed request, a reset, a head not complete in time):
        // the connection is over either way, and hyper has answered what deserved an answer.
        ended = served.as_mut() => log_malformed(&ended),
        in_time = tokio::time::timeout(header_read_timeout, first_head.cancelled()) => {
            if in_time.is_ok() {
                log_malformed(&served.await);
            }
        }
    }
    drop(permit);
}

/// Logs a request hyper refused before it reached the router (a head it cannot parse, or too
/// large): one `WARN refused` line, as the router's refusals get. Resets and timeouts are a
/// client going away, not a request refused, and are not logged.
fn log_malformed<E: std::error::Error + 'static>(ended: &Result<(), E>) {
    let Err(error) = ended else {
        return;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(now) = cause {
        if let Some(hyper_error) = now.downcast_ref::<hyper::Error>() {
            if hyper_error.is_parse() || hyper_error.is_parse_too_large() {
                let error = hyper_error.to_string();
                tracing::warn!(
                    error = error.as_str(),
                    "refused: a request that is not HTTP"
                );
            }
            return;
        }
        cause = now.source();
    }
}

/// Whether an accept error concerns only the connection being accepted (the next accept may
/// well succeed at once).
fn about_one_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
    )
}
