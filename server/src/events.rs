//! `GET /api/workspaces/{id}/session-pruning/events`: the committed prunes of the workspace's
//! sessions as Server-Sent Events, replayed from a cursor, then live.
//!
//! Every SSE `id:` is a journal sequence number. A client resumes with `Last-Event-ID` (what
//! `EventSource` sends on reconnect) or `?since=SEQ` (the header wins): the stream replays
//! every journaled event after it, then goes live, with no gap and no duplicate. The event
//! types:
//!
//! - `rpc.codenomad.session-pruning.pruned`, data `{sessionID, messageID, revision}` (the
//!   contract's event; `revision` is the content hash after the prune). An identical retry
//!   announces the same event again; when a stream has already passed it, without `id:` (so
//!   the client's resume point does not move back): dedupe by `messageID` and `revision`.
//! - `heartbeat`, data `{cursor, time}` (ms since the epoch), after each quiet interval; its
//!   `id:` is the cursor, which moves past events of other workspaces, so a client that
//!   resumes from it does not scan them again.
//! - `resync`, data `{firstKept, resumeAfter}`: the cursor is older than the journal keeps (or
//!   newer than its last event: another journal). Reload everything; live events after
//!   `resumeAfter` follow.
//! - `rpc.codenomad.session-pruning.upkeep`, data an `UpkeepRun` (`{run, startedAt, tookMs,
//!   status, counts}`), after each run of `serve --auto-clean`, on every workspace's stream,
//!   live only and without `id:` (no journal event: the run's prunes are, each announced as
//!   above).
//!
//! With `?framing=codenomad` the same events come in CodeNomad's own framing (unnamed frames,
//! the envelope `{type, location: {directory}, data}`; see `framing`).
//!
//! A subscriber that falls behind (a client that stops reading) is caught up from the
//! journal when it reads again, never dropped. The stream ends cleanly when the server shuts
//! down.
//!
//! Deliveries ready at once (a replay, a burst) are written together, about 64 KiB at a time,
//! each event's frame written straight into that chunk. Replay reads the journal on the
//! stream's own task, up to 1,024 events per read (a local redb read of about 0.3 ms);
//! everything that touches SQLite runs on the blocking pool. Within one chunk, a stream
//! decides once whether a session lies in its workspace and reuses the answer for that
//! session's next events as long as no owner was read meanwhile (`AppState::owner_holds`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::{FutureExt as _, StreamExt as _};
use pruning_engine::{Delivery, JournalReplay, PrunedEvent, RecvError, Scope, Subscription};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::error::ApiError;
use super::query;
use super::responses::{BadRequest, Internal, NotFound, Unauthorized};
use super::state::{AppState, OwnerStamp};
use super::upkeep::UpkeepRun;

mod framing;

pub use framing::Framing;

/// The SSE event type of a heartbeat.
pub const HEARTBEAT: &str = "heartbeat";
/// The SSE event type of a resync order.
pub const RESYNC: &str = "resync";
/// How long a stream waits before reading the journal again after a failed read.
const RETRY_AFTER_READ_ERROR: Duration = Duration::from_secs(1);
/// Deliveries that are ready at once (a replay, a burst) go out together, in writes of about
/// this many bytes.
const CHUNK_BYTES: usize = 64 * 1024;
/// Room for a chunk and the event that takes it past [`CHUNK_BYTES`] (an event of ids at their
/// longest is under 1 KiB; escapes could make it longer, which costs a reallocation only).
const CHUNK_CAPACITY: usize = CHUNK_BYTES + 4 * 1024;

/// The data of a `heartbeat` event: `{cursor, time}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Heartbeat)]
pub struct HeartbeatData {
    /// The stream's cursor (also the event's `id:`): every event up to it was sent or belongs
    /// to another workspace.
    cursor: u64,
    /// When it was sent, ms since the Unix epoch.
    time: i64,
}

/// The data of a `resync` event: `{firstKept, resumeAfter}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Resync)]
pub struct ResyncData {
    /// The oldest event the journal keeps.
    #[serde(rename = "firstKept")]
    first_kept: u64,
    /// The stream goes on with the events after this one (also the event's `id:`).
    #[serde(rename = "resumeAfter")]
    resume_after: u64,
}

/// Opens the event stream of a workspace.
///
/// Errors: 404 for an unknown workspace; 400 for a `Last-Event-ID` or `since` that is not a
/// sequence number, a `framing` that is neither `named` nor `codenomad`, or another query
/// parameter; 500 when the journal cannot be read.
#[utoipa::path(
    get,
    path = "/api/workspaces/{id}/session-pruning/events",
    summary = "Server-Sent Events: committed prunes of the workspace's sessions, replayed after \
        the cursor, then live",
    description = "Each `id:` is a journal sequence number. Resume with the Last-Event-ID \
        header (wins) or ?since=SEQ: no gap, no duplicate. Event types: \
        `rpc.codenomad.session-pruning.pruned` and `rpc.codenomad.session-pruning.restored` \
        (data: the `PrunedEventData` schema); `rpc.codenomad.session-pruning.compacted` (data: \
        the `CompactedEventData` schema); `heartbeat` (data: `Heartbeat`, id = its cursor) after each quiet interval; `resync` \
        (data: `Resync`) when the cursor is older than the journal keeps or past its end: \
        reload everything; `rpc.codenomad.session-pruning.upkeep` (data: `UpkeepRun`, no id, \
        live only) after each run of the clean on a schedule.",
    params(
        ("id" = String, Path, description = "A workspace id from GET /api/workspaces"),
        ("since" = Option<u64>, Query, description = "Replay the events after this sequence number"),
        ("Last-Event-ID" = Option<u64>, Header, description = "As `since`, and wins over it"),
        ("framing" = Option<String>, Query, description = "`named` (the default) or `codenomad`: \
            unnamed frames whose data is CodeNomad's envelope `{type, location: {directory}, \
            data}`, `server.connected` for a resync, heartbeats as an id and a comment"),
    ),
    responses(
        (status = 200, description = "An endless event stream", body = String, content_type = "text/event-stream"),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    Path(workspace): Path<String>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let workspace = state.workspace(workspace).await?;
    let params = query::parse(raw.as_deref(), &["since", "framing"])?;
    let framing = match params.get("framing") {
        None => Framing::Named,
        Some(text) => Framing::parse(text).ok_or_else(|| ApiError::BadParameter {
            field: "framing".into(),
            detail: format!(
                "framing must be `named` or `codenomad`, got `{}`",
                text.chars().take(80).collect::<String>()
            ),
        })?,
    };
    let since = match params.get("since") {
        Some(text) => sequence("since", text)?,
        None => 0,
    };
    let mut last_ids = headers.get_all("last-event-id").iter();
    let since = match (last_ids.next(), last_ids.next()) {
        (None, _) => since,
        (Some(value), None) => sequence("Last-Event-ID", value.to_str().unwrap_or("\u{fffd}"))?,
        (Some(_), Some(_)) => {
            return Err(ApiError::BadParameter {
                field: "Last-Event-ID".into(),
                detail: "Last-Event-ID is given twice; send one".into(),
            })
        }
    };
    let (first, last) = state
        .read(|engine| {
            let journal = engine.journal();
            let first = journal.first_seq().map_err(|e| e.to_string())?;
            let last = journal.last_seq().map_err(|e| e.to_string())?;
            Ok((first, last))
        })
        .await?
        .map_err(|error: String| {
            ApiError::Internal(format!("the journal is unreadable: {error}"))
        })?;
    // A cursor past the journal's last event was made by another journal: what it saw is not
    // what this one holds.
    let (since, opening) = if since > last {
        (last, Some(framing.resync(first.unwrap_or(last + 1), last)))
    } else {
        (since, None)
    };
    let mut heartbeat = tokio::time::interval_at(
        Instant::now() + state.options().heartbeat,
        state.options().heartbeat,
    );
    heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let feed = Feed {
        subscription: state.hub().subscribe(since),
        upkeep: Some(state.upkeep().subscribe()),
        scope: workspace.scope(),
        state,
        heartbeat,
        opening,
        failed: false,
        decided: None,
        framing,
    };
    let chunks = futures_util::stream::unfold(feed, |mut feed| async move {
        feed.next().await.map(|chunk| (chunk, feed))
    });
    let body = Body::from_stream(chunks.map(Ok::<Bytes, Infallible>));
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    Ok((headers, body).into_response())
}

/// One subscriber's stream state.
struct Feed {
    state: AppState,
    subscription: Subscription<JournalReplay>,
    /// The upkeep's finished runs (`None` once its channel closed).
    upkeep: Option<broadcast::Receiver<Arc<UpkeepRun>>>,
    scope: Scope,
    heartbeat: Interval,
    /// A resync to send before anything else.
    opening: Option<String>,
    /// An event's workspace could not be read: the stream ends after what it has sent, so
    /// that the client resumes from its last id and gets that event then.
    failed: bool,
    /// Whether the session of the last event admitted or passed over in the chunk being
    /// written lies in the workspace. Events written together were ready together: one look
    /// at the session's owner serves them all, unless the owner cache changes meanwhile.
    decided: Option<Decided>,
    /// How events are written.
    framing: Framing,
}

/// A session's place in a stream's workspace, decided from the owner stamped `stamp`: its
/// directory when it lies inside, `None` when it does not.
struct Decided {
    session_id: String,
    inside: Option<String>,
    stamp: OwnerStamp,
}

impl Feed {
    /// The next chunk of the stream: one SSE event, or all those ready at once (up to about
    /// [`CHUNK_BYTES`]); `None` when the stream ends (server shutdown).
    async fn next(&mut self) -> Option<Bytes> {
        if let Some(opening) = self.opening.take() {
            return Some(Bytes::from(opening));
        }
        if self.failed {
            return None;
        }
        let mut chunk = Vec::new();
        let shutdown = self.state.shutdown().clone();
        while chunk.is_empty() {
            // What was decided before a wait may be out of date after it.
            self.decided = None;
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                delivery = self.subscription.recv() => match delivery {
                    Ok(delivery) => {
                        if !self.write(delivery, &mut chunk).await {
                            return None;
                        }
                    }
                    Err(RecvError::Closed) => return None,
                    Err(error) => {
                        tracing::error!(
                            error = error.to_string().as_str(),
                            "event stream: reading the journal failed; retrying"
                        );
                        tokio::select! {
                            () = shutdown.cancelled() => return None,
                            () = tokio::time::sleep(RETRY_AFTER_READ_ERROR) => {}
                        }
                    }
                },
                _ = self.heartbeat.tick() => {
                    chunk = self.framing.heartbeat(self.subscription.cursor()).into_bytes();
                }
                run = next_run(&mut self.upkeep) => self.framing.upkeep_run(&run, &mut chunk),
            }
        }
        // `recv` is cancel safe: polling it once and dropping it loses nothing.
        while chunk.len() < CHUNK_BYTES {
            match self.subscription.recv().now_or_never() {
                Some(Ok(delivery)) => {
                    // More than one delivery is ready: room for a whole chunk at once.
                    if chunk.capacity() < CHUNK_CAPACITY {
                        chunk.reserve_exact(CHUNK_CAPACITY - chunk.len());
                    }
                    if !self.write(delivery, &mut chunk).await {
                        self.failed = true;
                        break;
                    }
                }
                // A closed hub or a failed read is met again by the next call.
                Some(Err(_)) | None => break,
            }
        }
        self.heartbeat.reset();
        Some(Bytes::from(chunk))
    }

    /// Appends a delivery's SSE text (nothing for an event of another workspace). `false` when
    /// the event's workspace cannot be read: nothing is appended and the stream must end.
    async fn write(&mut self, delivery: Delivery<PrunedEvent>, chunk: &mut Vec<u8>) -> bool {
        match delivery {
            Delivery::Event(event) => {
                let admitted = match self.admits(&event).await {
                    Ok(admitted) => admitted,
                    Err(error) => {
                        tracing::error!(
                            seq = event.seq,
                            error = error.to_string().as_str(),
                            "event stream: the session of an event cannot be read; the stream \
                             ends so that its client resumes from its last id"
                        );
                        return false;
                    }
                };
                if let Some(directory) = admitted {
                    // An identical retry announces an older event again: sent without `id:`,
                    // so that a client's resume point (its last event id) never moves back.
                    let again = event.seq < self.subscription.cursor();
                    self.framing.event(&event, &directory, !again, chunk);
                }
            }
            Delivery::Resync { first_kept } => {
                let resync = self.framing.resync(first_kept, self.subscription.cursor());
                chunk.extend_from_slice(resync.as_bytes());
            }
        }
        true
    }

    /// The directory of the event's session when it lies in this stream's workspace, `None`
    /// when it does not (a session that no longer exists lies in none). Errors: the database
    /// cannot be read.
    async fn admits(&mut self, event: &PrunedEvent) -> Result<Option<String>, String> {
        let session_id = &event.data.session_id;
        if let Some(decided) = &self.decided {
            if decided.session_id == *session_id && self.state.owner_holds(decided.stamp) {
                return Ok(decided.inside.clone());
            }
        }
        let Some((owner, stamp)) = self.state.cached_owner(session_id).await? else {
            return Ok(None);
        };
        let inside = self
            .scope
            .admits(&owner.as_ownership())
            .is_ok()
            .then(|| owner.directory.clone());
        match &mut self.decided {
            Some(decided) => {
                decided.session_id.clone_from(session_id);
                decided.inside.clone_from(&inside);
                decided.stamp = stamp;
            }
            None => {
                self.decided = Some(Decided {
                    session_id: session_id.clone(),
                    inside: inside.clone(),
                    stamp,
                })
            }
        }
        Ok(inside)
    }
}

/// The upkeep's next finished run. A stream that fell more than the channel holds behind skips
/// the oldest (the last run is always in `GET /api/session-pruning/upkeep`). Cancel safe (as
/// `broadcast::Receiver::recv`); pending for ever once the channel closed.
async fn next_run(runs: &mut Option<broadcast::Receiver<Arc<UpkeepRun>>>) -> Arc<UpkeepRun> {
    loop {
        let Some(receiver) = runs.as_mut() else {
            return std::future::pending().await;
        };
        match receiver.recv().await {
            Ok(run) => return run,
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => *runs = None,
        }
    }
}

/// A cursor from a header or query parameter: a sequence number (0 = from the first event).
fn sequence(field: &str, text: &str) -> Result<u64, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    let digits = text.bytes().all(|b| b.is_ascii_digit());
    let parsed = if digits { text.parse().ok() } else { None };
    parsed.ok_or_else(|| ApiError::BadParameter {
        field: field.to_string(),
        detail: format!(
            "{field} must be an event id (a sequence number such as 42), got `{}`",
            text.chars().take(80).collect::<String>()
        ),
    })
}

#[cfg(test)]
mod tests {
    use pruning_engine::PrunedEventData;
    use uuid::Uuid;

    use super::*;

    fn event(seq: u64, message_id: &str) -> PrunedEvent {
        PrunedEvent {
            seq,
            id: Uuid::nil(),
            event_type: pruning_engine::PRUNED_EVENT_TYPE,
            data: PrunedEventData {
                session_id: "ses_a".into(),
                message_id: message_id.into(),
                revision: "0f".repeat(32),
            },
            removed_count: 3,
            committed_at_ms: 1_700_000_000_000,
            bytes_removed: None,
        }
    }

    #[test]
    fn a_compacted_frame_carries_the_session_snapshots_and_bytes() {
        let mut compacted = event(9, "");
        compacted.event_type = pruning_engine::COMPACTED_EVENT_TYPE;
        compacted.removed_count = 40;
        compacted.bytes_removed = Some(123_456);
        let mut chunk = Vec::new();
        Framing::Named.event(&compacted, "/w", true, &mut chunk);
        assert_eq!(
            String::from_utf8(chunk).expect("UTF-8"),
            "event: rpc.codenomad.session-pruning.compacted\nid: 9\n\
             data: {\"sessionID\":\"ses_a\",\"snapshots\":40,\"bytes\":123456}\n\n"
        );
    }

    #[test]
    fn a_pruned_frame_is_event_id_and_data_lines_then_an_empty_line() {
        let mut chunk = b"event: heartbeat\nid: 41\ndata: {}\n\n".to_vec();
        Framing::Named.event(&event(42, "msg_1"), "/w", true, &mut chunk);
        let revision = "0f".repeat(32);
        assert_eq!(
            String::from_utf8(chunk).expect("UTF-8"),
            format!(
                "event: heartbeat\nid: 41\ndata: {{}}\n\n\
                 event: rpc.codenomad.session-pruning.pruned\nid: 42\n\
                 data: {{\"sessionID\":\"ses_a\",\"messageID\":\"msg_1\",\"revision\":\"{revision}\"}}\n\n"
            )
        );
    }

    #[test]
    fn a_pruned_frame_sent_again_has_no_id_and_its_data_escaped_on_one_line() {
        let mut chunk = Vec::new();
        Framing::Named.event(&event(7, "msg_\"é\"\n\u{1}"), "/w", false, &mut chunk);
        let revision = "0f".repeat(32);
        assert_eq!(
            String::from_utf8(chunk).expect("UTF-8"),
            format!(
                "event: rpc.codenomad.session-pruning.pruned\n\
                 data: {{\"sessionID\":\"ses_a\",\"messageID\":\"msg_\\\"é\\\"\\n\\u0001\",\"revision\":\"{revision}\"}}\n\n"
            )
        );
    }

    #[test]
    fn codenomads_framing_is_an_unnamed_frame_of_its_envelope() {
        let mut chunk = Vec::new();
        Framing::CodeNomad.event(&event(42, "msg_1"), "/work/a \"b\"", true, &mut chunk);
        Framing::CodeNomad.event(&event(40, "msg_0"), "/work/a", false, &mut chunk);
        let revision = "0f".repeat(32);
        assert_eq!(
            String::from_utf8(chunk).expect("UTF-8"),
            format!(
                "id: 42\n\
                 data: {{\"type\":\"rpc.codenomad.session-pruning.pruned\",\
                 \"location\":{{\"directory\":\"/work/a \\\"b\\\"\"}},\
                 \"data\":{{\"sessionID\":\"ses_a\",\"messageID\":\"msg_1\",\"revision\":\"{revision}\"}}}}\n\n\
                 data: {{\"type\":\"rpc.codenomad.session-pruning.pruned\",\
                 \"location\":{{\"directory\":\"/work/a\"}},\
                 \"data\":{{\"sessionID\":\"ses_a\",\"messageID\":\"msg_0\",\"revision\":\"{revision}\"}}}}\n\n"
            )
        );
    }

    #[test]
    fn codenomads_heartbeat_moves_the_id_and_its_resync_is_server_connected() {
        assert_eq!(Framing::CodeNomad.heartbeat(9), "id: 9\n: heartbeat\n\n");
        assert_eq!(
            Framing::CodeNomad.resync(3, 8),
            "id: 8\ndata: {\"type\":\"server.connected\"}\n\n"
        );
        assert_eq!(Framing::parse("codenomad"), Some(Framing::CodeNomad));
        assert_eq!(Framing::parse("named"), Some(Framing::Named));
        assert_eq!(Framing::parse("CodeNomad"), None);
    }
}
