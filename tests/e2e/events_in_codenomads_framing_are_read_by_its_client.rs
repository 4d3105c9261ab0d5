//! The event stream in CodeNomad's own framing (`?framing=codenomad`), read the way its client
//! reads a stream: an `EventSource` whose `onmessage` sees only unnamed events, each `data`
//! parsed as the envelope `{type, location: {directory}, data}`, resuming with the last event
//! id it kept. Every prune arrives once with its session's directory, a reconnection replays
//! exactly what came after its id, a heartbeat moves that id without dispatching anything, and
//! a cursor the journal cannot serve is answered with `server.connected` (reconcile everything).

use std::io::{BufRead, BufReader};

use serde_json::{json, Value};

use crate::common;
use common::http::{
    client, get, parse, prune_all, with_messages, Server, FIXTURE_DIRECTORY, WORKSPACE,
};

const SESSION: &str = "ses_codenomad_framing";

/// A client of the stream as CodeNomad's is: the WHATWG `EventSource` parsing rules, and only
/// what reaches `onmessage`.
struct EventSourceClient {
    reader: BufReader<reqwest::blocking::Response>,
    /// The last event ID string, as `EventSource` keeps it (sent back on reconnection).
    last_event_id: String,
}

impl EventSourceClient {
    fn open(server: &Server, last_event_id: Option<&str>) -> Self {
        let mut request = client()
            .get(server.url(&format!(
                "/api/workspaces/{WORKSPACE}/session-pruning/events?framing=codenomad"
            )))
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().expect("open the stream");
        assert_eq!(response.status().as_u16(), 200);
        Self {
            reader: BufReader::new(response),
            last_event_id: last_event_id.unwrap_or_default().to_string(),
        }
    }

    /// The next `message` event's data, parsed as `JSON.parse` would, after the event's
    /// dispatch set the last event id. Blocks that dispatch nothing (no data) or another type
    /// of event (which `onmessage` never sees) still set the id, as the standard says.
    fn next_message(&mut self) -> Value {
        let (mut kind, mut data, mut id_buffer) = (String::new(), String::new(), None);
        loop {
            let mut line = String::new();
            let read = self.reader.read_line(&mut line).expect("read the stream");
            assert!(read > 0, "the stream ended");
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if let Some(id) = id_buffer.take() {
                    self.last_event_id = id;
                }
                let dispatched = !data.is_empty() && (kind.is_empty() || kind == "message");
                if dispatched {
                    let text = data.strip_suffix('\n').unwrap_or(&data);
                    return serde_json::from_str(text).expect("JSON.parse of the data");
                }
                (kind, data) = (String::new(), String::new());
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => kind = value.to_string(),
                "data" => {
                    data.push_str(value);
                    data.push('\n');
                }
                "id" if !value.contains('\0') => id_buffer = Some(value.to_string()),
                _ => {}
            }
        }
    }
}

/// The envelope CodeNomad's client expects of a prune `pruned` answered for `message`.
fn envelope(message: &str, pruned: &Value) -> Value {
    json!({
        "type": "rpc.codenomad.session-pruning.pruned",
        "location": { "directory": FIXTURE_DIRECTORY },
        "data": { "sessionID": SESSION, "messageID": message, "revision": pruned["revision"] },
    })
}

#[test]
fn prunes_arrive_once_in_the_envelope_and_replay_from_the_last_event_id() {
    let (fx, messages) = with_messages(SESSION, 3);
    let server = Server::start(&fx.db, &[]);
    let first = prune_all(&server, SESSION, &messages[0]);
    let second = prune_all(&server, SESSION, &messages[1]);

    let mut stream = EventSourceClient::open(&server, None);
    assert_eq!(stream.next_message(), envelope(&messages[0], &first));
    assert_eq!(stream.last_event_id, "1");
    assert_eq!(stream.next_message(), envelope(&messages[1], &second));
    assert_eq!(stream.last_event_id, "2");
    // Live, after the replay.
    let third = prune_all(&server, SESSION, &messages[2]);
    assert_eq!(stream.next_message(), envelope(&messages[2], &third));
    assert_eq!(stream.last_event_id, "3");
    drop(stream);

    // A client that kept id 1 gets exactly what came after it.
    let mut resumed = EventSourceClient::open(&server, Some("1"));
    assert_eq!(resumed.next_message(), envelope(&messages[1], &second));
    assert_eq!(resumed.next_message(), envelope(&messages[2], &third));
    assert_eq!(resumed.last_event_id, "3");
}

#[test]
fn a_cursor_the_journal_cannot_serve_is_answered_with_server_connected() {
    let (fx, messages) = with_messages(SESSION, 2);
    let server = Server::start(&fx.db, &[]);
    let first = prune_all(&server, SESSION, &messages[0]);
    // Another journal's cursor, past this one's last event.
    let mut stream = EventSourceClient::open(&server, Some("99"));
    assert_eq!(stream.next_message(), json!({ "type": "server.connected" }));
    assert_eq!(stream.last_event_id, "1");
    // Heartbeats (every 100 ms) dispatch nothing: the next message is the next prune.
    std::thread::sleep(std::time::Duration::from_millis(350));
    let second = prune_all(&server, SESSION, &messages[1]);
    assert_eq!(stream.next_message(), envelope(&messages[1], &second));
    assert_eq!(stream.last_event_id, "2");
    assert_ne!(first["revision"], second["revision"]);
}

#[test]
fn another_framing_is_refused_naming_the_parameter() {
    let (fx, _) = with_messages(SESSION, 1);
    let server = Server::start(&fx.db, &[]);
    let (status, body) = get(&server.url(&format!(
        "/api/workspaces/{WORKSPACE}/session-pruning/events?framing=json"
    )));
    assert_eq!(status, 400, "{body}");
    assert_eq!(parse(&body)["field"], "framing", "{body}");
}
