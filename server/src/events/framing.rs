//! How an event stream writes its events (`?framing=` of the events route; docs/http.md,
//! "Events in CodeNomad's framing").
//!
//! - [`Framing::Named`] (the default): each event under its own SSE `event:` name, its data
//!   the bare payload.
//! - [`Framing::CodeNomad`]: what CodeNomad's own event transport sends and its UI and TUI
//!   read with `EventSource.onmessage`: unnamed frames whose data is the envelope
//!   `{type, location: {directory}, data}`, `location.directory` being the directory of the
//!   event's session (its receivers ignore events of another directory). A resync is
//!   `{type: "server.connected"}`, on which CodeNomad's receivers reconcile every loaded
//!   session; a heartbeat is an `id:` line and a comment, which moves the client's
//!   `Last-Event-ID` without dispatching anything.
//!
//! Either way every journal event carries its `id:` (left out for an identical retry's
//! announcement a stream already passed), so replay from a cursor works the same.

use pruning_engine::PrunedEvent;
use serde::Serialize;
use serde_json::json;

use super::{HeartbeatData, ResyncData, HEARTBEAT, RESYNC};
use crate::upkeep::{UpkeepRun, UPKEEP_EVENT_TYPE};

/// The `type` of CodeNomad's event that orders a reconciliation of every loaded session.
pub const SERVER_CONNECTED: &str = "server.connected";

/// How a stream frames its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Named SSE events with bare payloads.
    Named,
    /// CodeNomad's envelope in unnamed frames.
    CodeNomad,
}

impl Framing {
    /// The framing `?framing=VALUE` names: `named` or `codenomad`; `None` for another value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "named" => Some(Self::Named),
            "codenomad" => Some(Self::CodeNomad),
            _ => None,
        }
    }

    /// Appends a journal event of a session in `directory`, with its `id:` unless `with_id` is
    /// false, each line ended by `\n`, then the empty line that ends the event. Its data is
    /// compact JSON on one line (serde_json writes no raw line break).
    pub fn event(self, event: &PrunedEvent, directory: &str, with_id: bool, chunk: &mut Vec<u8>) {
        if self == Self::Named {
            chunk.extend_from_slice(b"event: ");
            chunk.extend_from_slice(event.event_type.as_bytes());
            chunk.push(b'\n');
        }
        if with_id {
            chunk.extend_from_slice(b"id: ");
            chunk.extend_from_slice(itoa::Buffer::new().format(event.seq).as_bytes());
            chunk.push(b'\n');
        }
        chunk.extend_from_slice(b"data: ");
        // Strings and numbers always serialize, and a `Vec` always takes the bytes: there is
        // no error to meet.
        let _ = match self {
            Self::Named => serde_json::to_writer(&mut *chunk, &event.announced_data()),
            Self::CodeNomad => serde_json::to_writer(
                &mut *chunk,
                &Envelope {
                    kind: event.event_type,
                    location: Some(Location { directory }),
                    data: event.announced_data(),
                },
            ),
        };
        chunk.extend_from_slice(b"\n\n");
    }

    /// A heartbeat at `cursor`: a `heartbeat` event `{cursor, time}`, or in CodeNomad's framing
    /// the `id:` and a comment (nothing is dispatched; the client's resume point moves).
    pub fn heartbeat(self, cursor: u64) -> String {
        match self {
            Self::Named => {
                let data = json!(HeartbeatData {
                    cursor,
                    time: pruning_engine::now_ms(),
                });
                format!("event: {HEARTBEAT}\nid: {cursor}\ndata: {data}\n\n")
            }
            Self::CodeNomad => format!("id: {cursor}\n: heartbeat\n\n"),
        }
    }

    /// An order to reload everything, the stream going on after `resume_after`: a `resync`
    /// event `{firstKept, resumeAfter}`, or CodeNomad's `server.connected`.
    pub fn resync(self, first_kept: u64, resume_after: u64) -> String {
        match self {
            Self::Named => {
                let data = json!(ResyncData {
                    first_kept,
                    resume_after,
                });
                format!("event: {RESYNC}\nid: {resume_after}\ndata: {data}\n\n")
            }
            Self::CodeNomad => {
                let data = json!({ "type": SERVER_CONNECTED });
                format!("id: {resume_after}\ndata: {data}\n\n")
            }
        }
    }

    /// Appends a finished upkeep run, with no `id:` (a run is no journal event): an
    /// `rpc.codenomad.session-pruning.upkeep` event, or that type in CodeNomad's envelope
    /// (without `location`: a run is of no one session).
    pub fn upkeep_run(self, run: &UpkeepRun, chunk: &mut Vec<u8>) {
        // Numbers and strings only: it always serializes, on one line.
        let _ = match self {
            Self::Named => {
                chunk.extend_from_slice(b"event: ");
                chunk.extend_from_slice(UPKEEP_EVENT_TYPE.as_bytes());
                chunk.extend_from_slice(b"\ndata: ");
                serde_json::to_writer(&mut *chunk, run)
            }
            Self::CodeNomad => {
                chunk.extend_from_slice(b"data: ");
                serde_json::to_writer(
                    &mut *chunk,
                    &Envelope::<&UpkeepRun> {
                        kind: UPKEEP_EVENT_TYPE,
                        location: None,
                        data: run,
                    },
                )
            }
        };
        chunk.extend_from_slice(b"\n\n");
    }
}

/// CodeNomad's event envelope: `{type, location?: {directory}, data}`.
#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<Location<'a>>,
    data: T,
}

/// Where an event's session lives: `{directory}`.
#[derive(Serialize)]
struct Location<'a> {
    directory: &'a str,
}
