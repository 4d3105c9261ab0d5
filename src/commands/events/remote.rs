//! `events --follow --url URL [--cursor-file F]`: a client of a running `serve`'s event stream
//! (`GET /api/workspaces/{id}/session-pruning/events`), for a TUI that must learn what it
//! missed. It prints each event once, in order; after any drop (the server restarted, the
//! machine slept, the network went away) it reconnects with `Last-Event-ID` set to the last id
//! it saw, so the server replays exactly the events it missed. With `--cursor-file` that id
//! outlives the client: a client started again resumes from it.
//!
//! What it prints, a line each (`--json`: `{"id", "event", "data"}`, the stream's frame):
//! - a prune or restore: `#ID TYPE session S message M revision R`;
//! - the same event announced again by an identical retry (the stream sends it without an id,
//!   or, for a retry of the newest event, with an id not past the cursor): the same line with
//!   `(again)` for `#ID` (`"id": null`);
//! - a `resync` (the server's journal no longer holds every event after the cursor, or is
//!   another journal): a line saying so and from where it goes on; the TUI must reload.
//!
//! Heartbeats print nothing; their id (the stream's cursor, past other workspaces' events) is
//! kept like an event's. Connection news goes to stderr.

use std::time::Duration;

use futures_util::StreamExt as _;
use pruning_server::{HEARTBEAT, RESYNC};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};
use sse_stream::SseByteStream;

use super::cursor_file::{CursorFile, Kept};
use crate::cli::error::ConfigError;
use crate::commands::Outcome;
use crate::output;
use crate::output::say;

/// The first wait before reconnecting, doubled after each failed attempt up to
/// [`MOST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(250);
/// The longest wait between attempts.
const MOST_RETRY: Duration = Duration::from_secs(5);
/// A stream that sends nothing for this long (no event, no heartbeat: the server's heartbeat
/// is at most 1 h, 15 s by default) is taken as lost and reconnected.
const STALLED_AFTER: Duration = Duration::from_secs(90);
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A validated `events --follow --url` invocation.
#[derive(Debug)]
pub struct Remote {
    url: reqwest::Url,
    cursor_file: Option<std::path::PathBuf>,
    since: Option<u64>,
    /// `Bearer PASSWORD`, when there is a password.
    authorization: Option<reqwest::header::HeaderValue>,
    json: bool,
}

impl Remote {
    /// Checks the flags: `url` must be an `http://` URL with a host (the server speaks plain
    /// HTTP, on loopback unless told otherwise). `since` is where a client without a cursor
    /// file (or with an empty one) starts; `None`: at the journal's first event. The password
    /// is `SESSION_PRUNE_PASSWORD`'s, as `serve` reads it.
    ///
    /// Errors: [`ConfigError::EventsUrl`].
    pub fn new(
        url: &str,
        cursor_file: Option<std::path::PathBuf>,
        since: Option<u64>,
        json: bool,
    ) -> Result<Self, ConfigError> {
        let invalid = |detail: &str| ConfigError::EventsUrl {
            url: url.to_string(),
            detail: detail.to_string(),
        };
        let parsed = reqwest::Url::parse(url).map_err(|error| invalid(&error.to_string()))?;
        match parsed.scheme() {
            "http" => {}
            "https" => return Err(invalid("https is not spoken here: `serve` listens on plain HTTP (put a TLS proxy in front and follow it over http on its machine)")),
            _ => return Err(invalid("give an http:// URL")),
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(invalid("the URL has no host"));
        }
        let password = match std::env::var("SESSION_PRUNE_PASSWORD") {
            Ok(password) => Some(password).filter(|p| !p.is_empty()),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => return Err(ConfigError::EmptyPassword),
        };
        // The header carries the password's UTF-8 bytes, as `serve` compares them; one that no
        // header can carry (a control character, a space at either end) is refused, as `serve`
        // refuses it.
        let authorization = match password {
            None => None,
            Some(password) if password.trim() != password => {
                return Err(ConfigError::EmptyPassword)
            }
            Some(password) => Some(
                reqwest::header::HeaderValue::from_bytes(format!("Bearer {password}").as_bytes())
                    .map_err(|_| ConfigError::EmptyPassword)?,
            ),
        };
        Ok(Self {
            url: parsed,
            cursor_file,
            since,
            authorization,
            json,
        })
    }

    /// Follows the stream until the process is stopped.
    ///
    /// Errors: [`ConfigError::CursorFile`] (a cursor file that cannot be used),
    /// [`ConfigError::Remote`] when the server refuses the request itself (a wrong or missing
    /// password, an unknown workspace, a URL that is no event stream): trying again would not
    /// help. An unreachable server is waited for, never an error.
    pub fn run(self) -> anyhow::Result<Outcome> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(self.follow())
    }

    async fn follow(self) -> anyhow::Result<Outcome> {
        let (mut file, kept) = match &self.cursor_file {
            Some(path) => {
                let (file, kept) = CursorFile::open(path)?;
                (Some(file), kept)
            }
            None => (None, None),
        };
        let mut database = kept.as_ref().and_then(|k| k.database.clone());
        let mut epoch = kept.as_ref().and_then(|k| k.epoch);
        let mut cursor = kept.map(|k| k.id).or(self.since);
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(STALLED_AFTER)
            .build()?;
        let mut delay = FIRST_RETRY;
        loop {
            // A server restarted on another database has another journal: the id means
            // nothing there.
            let identity = match self.identity(&client).await {
                Ok(identity) => identity,
                Err(why) => {
                    // No stream is read before the server says which database it serves.
                    eprintln!(
                        "cannot follow {} ({why}); trying again in {} ms",
                        self.url,
                        delay.as_millis()
                    );
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(MOST_RETRY);
                    continue;
                }
            };
            if let Some(now) = identity {
                if let Some(was) = database.as_ref().filter(|was| **was != now.database) {
                    self.print_database_resync(cursor, was, &now)?;
                    cursor = Some(now.last_seq);
                } else if epoch.is_some_and(|was| was != now.epoch) {
                    // The same database with a journal started after the loss of the one this
                    // cursor came from: its numbers go on, and the server sends a resync if
                    // events after the cursor were lost with it.
                    eprintln!(
                        "the server's journal is now epoch {} (the one before was lost); following on after {}",
                        now.epoch,
                        position(cursor)
                    );
                }
                epoch = Some(now.epoch);
                database = Some(now.database);
            }
            match self.connect(&client, cursor).await {
                Ok(response) => {
                    // Kept once the server took the request: a refused one leaves the file.
                    if let (Some(file), Some(id)) = (file.as_mut(), cursor) {
                        file.keep(Kept {
                            id,
                            database: database.clone(),
                            epoch,
                        })?;
                    }
                    eprintln!("following {} after {}", self.url, position(cursor));
                    delay = FIRST_RETRY;
                    let why = self
                        .read(response, &mut cursor, &mut file, database.as_deref(), epoch)
                        .await?;
                    eprintln!(
                        "the stream ended ({why}); reconnecting after {}",
                        position(cursor)
                    );
                }
                Err(Attempt::Refused(error)) => return Err(error.into()),
                Err(Attempt::Failed(why)) => {
                    eprintln!(
                        "cannot follow {} ({why}); trying again in {} ms",
                        self.url,
                        delay.as_millis()
                    );
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MOST_RETRY);
        }
    }

    /// The database the server serves now and its newest event (`GET /health` at the URL's
    /// origin); `Ok(None)` when the server answers without saying (the stream's own answer
    /// then tells whether it is one).
    ///
    /// Errors: the server cannot be reached (or fails, 5xx), in words: try again.
    async fn identity(&self, client: &reqwest::Client) -> Result<Option<Identity>, String> {
        let Ok(url) = self.url.join("/health") else {
            return Ok(None);
        };
        let mut request = client.get(url);
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        let response = request.send().await.map_err(|error| cause(&error))?;
        if response.status().is_server_error() {
            return Err(format!("the server answered {}", response.status()));
        }
        if !response.status().is_success() {
            return Ok(None);
        }
        let text = response.text().await.map_err(|error| cause(&error))?;
        let health: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(health["databaseID"]
            .as_str()
            .zip(health["lastSeq"].as_u64())
            .map(|(database, last_seq)| Identity {
                database: database.to_string(),
                last_seq,
                // A server that names no epoch has only ever had its first journal.
                epoch: health["journalEpoch"].as_u64().unwrap_or(1),
            }))
    }

    /// Opens the stream after `cursor` (`None`: from the journal's first event).
    async fn connect(
        &self,
        client: &reqwest::Client,
        cursor: Option<u64>,
    ) -> Result<reqwest::Response, Attempt> {
        let mut request = client
            .get(self.url.clone())
            .header(ACCEPT, "text/event-stream");
        if let Some(cursor) = cursor {
            request = request.header("Last-Event-ID", cursor.to_string());
        }
        if let Some(authorization) = &self.authorization {
            request = request.header(AUTHORIZATION, authorization.clone());
        }
        let response = request
            .send()
            .await
            .map_err(|error| Attempt::Failed(cause(&error)))?;
        let status = response.status();
        if status.is_success() {
            let stream = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            if !stream {
                return Err(self.refused(
                    status,
                    "the answer is not an event stream: give the URL of GET /api/workspaces/ID/session-pruning/events".into(),
                ));
            }
            return Ok(response);
        }
        if status.is_server_error() || status == reqwest::StatusCode::REQUEST_TIMEOUT {
            return Err(Attempt::Failed(format!("the server answered {status}")));
        }
        let detail = match status {
            reqwest::StatusCode::UNAUTHORIZED if self.authorization.is_some() => {
                "the server does not take this password (SESSION_PRUNE_PASSWORD)".to_string()
            }
            reqwest::StatusCode::UNAUTHORIZED => {
                "the server needs its password: set SESSION_PRUNE_PASSWORD".to_string()
            }
            _ => {
                // The server's own words say what is wrong (an unknown workspace names the
                // route that lists them).
                let body = response.text().await.unwrap_or_default();
                let said = serde_json::from_str::<Value>(&body)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_string))
                    .unwrap_or(body);
                said
            }
        };
        Err(self.refused(status, detail))
    }

    fn refused(&self, status: reqwest::StatusCode, detail: String) -> Attempt {
        Attempt::Refused(ConfigError::Remote {
            url: self.url.to_string(),
            status: status.as_u16(),
            detail,
        })
    }

    /// Prints the events of one connection until it ends; returns why it ended.
    ///
    /// Errors: writing stdout or the cursor file failed.
    async fn read(
        &self,
        response: reqwest::Response,
        cursor: &mut Option<u64>,
        file: &mut Option<CursorFile>,
        database: Option<&str>,
        epoch: Option<u64>,
    ) -> anyhow::Result<String> {
        let mut events = SseByteStream::new(response.bytes_stream());
        while let Some(next) = events.next().await {
            let frame = match next {
                Ok(frame) => frame,
                Err(error) => return Ok(cause(&error)),
            };
            let id = frame.id.as_deref().and_then(|id| id.parse::<u64>().ok());
            let kind = frame.event.unwrap_or_else(|| "message".into());
            let data: Value = frame
                .data
                .as_deref()
                .and_then(|d| serde_json::from_str(d).ok())
                .unwrap_or(Value::Null);
            if kind == HEARTBEAT {
                // Nothing to print; only the stream's cursor moves.
            } else if kind == RESYNC {
                self.print_resync(*cursor, &data)?;
            } else if id.is_none_or(|id| cursor.is_some_and(|c| id <= c)) {
                // An identical retry's announcement: the stream replays only events after the
                // cursor, so one without an id, or not past the cursor (a retry of the newest
                // event), was printed before. It is printed as such and moves nothing.
                self.print_event(None, &kind, &data)?;
                continue;
            } else {
                self.print_event(id, &kind, &data)?;
            }
            if let Some(id) = id {
                *cursor = Some(id);
                if let Some(file) = file {
                    file.keep(Kept {
                        id,
                        database: database.map(str::to_string),
                        epoch,
                    })?;
                }
            }
        }
        Ok("the server closed it".into())
    }

    fn print_event(&self, id: Option<u64>, kind: &str, data: &Value) -> anyhow::Result<()> {
        if self.json {
            return output::json_line(&json!({ "id": id, "event": kind, "data": data }));
        }
        let number = id.map_or_else(|| "(again)".to_string(), |id| format!("#{id}"));
        let text = |key: &str| output::printable(data[key].as_str().unwrap_or("?")).to_string();
        if kind == pruning_engine::COMPACTED_EVENT_TYPE {
            let count = |key: &str| data[key].as_u64().map_or("?".into(), |n| n.to_string());
            say!(
                "{number} {} session {} snapshots {} bytes {}",
                output::printable(kind),
                text("sessionID"),
                count("snapshots"),
                count("bytes")
            )?;
            return Ok(());
        }
        say!(
            "{number} {} session {} message {} revision {}",
            output::printable(kind),
            text("sessionID"),
            text("messageID"),
            text("revision")
        )?;
        Ok(())
    }

    /// The server serves another database than the events printed so far came from: a resync,
    /// going on after its newest event.
    fn print_database_resync(
        &self,
        cursor: Option<u64>,
        was: &str,
        now: &Identity,
    ) -> anyhow::Result<()> {
        if self.json {
            let data = json!({ "databaseID": now.database, "resumeAfter": now.last_seq });
            return output::json_line(
                &json!({ "id": now.last_seq, "event": RESYNC, "data": data }),
            );
        }
        say!(
            "resync: the server now serves another database ({}, was {}), whose events are numbered anew, so {} means nothing there: reload everything; following on after #{}",
            output::printable(&now.database),
            output::printable(was),
            position(cursor),
            now.last_seq
        )?;
        Ok(())
    }

    fn print_resync(&self, cursor: Option<u64>, data: &Value) -> anyhow::Result<()> {
        if self.json {
            let id = data["resumeAfter"].as_u64();
            return output::json_line(&json!({ "id": id, "event": RESYNC, "data": data }));
        }
        say!(
            "resync: the server's journal does not go on from {} (it keeps the events from #{} on: older ones were trimmed, or it is another journal): reload everything; following on after #{}",
            position(cursor),
            data["firstKept"],
            data["resumeAfter"]
        )?;
        Ok(())
    }
}

/// What `GET /health` says of the server's database.
struct Identity {
    /// `databaseID`: the database the journal is bound to.
    database: String,
    /// `lastSeq`: its journal's newest event.
    last_seq: u64,
    /// `journalEpoch`: the journal's epoch (1 when the server does not say).
    epoch: u64,
}

/// Why one attempt did not give a stream.
enum Attempt {
    /// The server refused the request itself: trying again would not help.
    Refused(ConfigError),
    /// The server could not be reached or failed: try again.
    Failed(String),
}

/// `#N`, or the start of the journal.
fn position(cursor: Option<u64>) -> String {
    cursor.map_or_else(|| "the journal's start".into(), |c| format!("#{c}"))
}

/// An error and its causes in one line.
fn cause(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
