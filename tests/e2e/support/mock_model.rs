//! The mock model OpenCode talks to in the interop tests: an OpenAI-compatible server (axum) on
//! loopback that answers every chat completion with a fixed text, streamed as server-sent
//! `chat.completion.chunk` events when asked to stream, and records every request it receives.
//!
//! Tags in the newest user message script a turn (streamed requests only):
//! - `[[bash:COMMAND]]`: while that message is the newest, a call of the shell tool running
//!   COMMAND (OpenCode 1.x names it `bash`, OpenCode 2 `shell`: the name the request offers);
//! - `[[reason:TEXT]]`: TEXT in upper case streamed as reasoning (`reasoning_content`) before
//!   that call or text;
//! - `[[say:TEXT]]`: the closing text is [`REPLY_TEXT`], a space and TEXT in upper case.
//!
//! (Upper case, so that a canary written in lower case in the prompt is found in a later request
//! only where the model's reasoning or text carried it.)
//! - `[[slow:SECS]]`: the closing text streamed over SECS seconds, a word every 250 ms, so that
//!   a run holds its session that long.
//!
//! A compaction request of OpenCode 2 (it asks for a fixed template and checks the answer) gets
//! [`SUMMARY_TEXT`], which follows that template.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use futures_util::{stream, StreamExt};
use serde_json::{json, Value};
use tokio::runtime::Runtime;

/// Text the mock streams for every chat request that is not a title request.
pub const REPLY_TEXT: &str = "Continued after prune.";
/// Text the mock answers to a title request.
pub const TITLE_TEXT: &str = "Fixture title";
/// What OpenCode 2 writes in a compaction request it checks the answer of.
const SUMMARY_TEMPLATE_ASK: &str = "You MUST use this format for your response";
/// The summary of a compaction request of OpenCode 2: the sections its template names, in its
/// order, the first one carrying `SUMMARY_CANARY`.
pub const SUMMARY_TEXT: &str = "## Objective\n- SUMMARY_CANARY continue the fixture work\n\n\
## Requirements\n- (none)\n\n## Decisions\n- (none)\n\n## Work State\n### Completed\n- the \
turns so far\n\n### Active\n- (none)\n\n### Blocked\n- (none)\n\n## Next Move\n1. go on\n\n\
## Relevant Files\n- `README.txt`: read\n\n## Important Context\n- (none)";
/// The pause between the words of a `[[slow:SECS]]` reply.
const SLOW_PACE: Duration = Duration::from_millis(250);

/// A turn whose shell call prints `TOOL_CANARY_n`, whose reasoning holds `REASONING_CANARY_n`
/// and whose closing text holds `TEXT_CANARY_n`: the prompt itself holds none of the three (the
/// command prints its canary in pieces, the mock upper-cases the others).
pub fn canary_turn(n: u32) -> String {
    format!(
        "Turn {n}: run the check. [[bash:printf '%s_%s_{n}' TOOL CANARY]] \
         [[reason:reasoning_canary_{n} thinking]] [[say:text_canary_{n}]]"
    )
}

/// What a request to the mock was taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A chat completion without tools whose system prompt mentions a title.
    Title,
    /// Any other chat completion (a turn, or a summary).
    Chat,
    /// Anything else (a model list, an unknown path).
    Other,
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// HTTP method.
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Headers as received (names lowercased).
    pub headers: Vec<(String, String)>,
    /// The raw body (lossy UTF-8).
    pub body: String,
    /// How the mock classified it.
    pub kind: RequestKind,
}

impl ModelRequest {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The session OpenCode sent this request for: its `x-opencode-session-id` header
    /// (OpenCode 1.x, 2.1), or `x-opencode-session` (OpenCode 2.0).
    pub fn session_id(&self) -> Option<&str> {
        self.header("x-opencode-session-id")
            .or_else(|| self.header("x-opencode-session"))
    }

    /// The text of the newest `user` message of a chat request.
    pub fn last_user_text(&self) -> Option<String> {
        let body = self.json();
        let messages = body.get("messages")?.as_array()?;
        messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| content_text(&m["content"]))
    }
}

type Requests = Arc<Mutex<Vec<ModelRequest>>>;

/// The mock on `127.0.0.1:0`: every method and path is answered (`POST …/chat/completions` as a
/// chat completion, anything else with a one-model list) and recorded. Title requests get
/// [`TITLE_TEXT`], every other chat request [`REPLY_TEXT`], `finish_reason` `stop`. Dropping it
/// stops the server.
pub struct MockModel {
    addr: SocketAddr,
    requests: Requests,
    /// Runs the server; dropping it closes the listener and every connection.
    _runtime: Runtime,
}

impl MockModel {
    /// Binds a free loopback port and starts serving on a runtime of its own.
    pub fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("start the mock model's runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the mock model");
        let addr = listener.local_addr().expect("mock model address");
        let requests = Requests::default();
        let app = Router::new()
            .fallback(answer)
            .layer(DefaultBodyLimit::disable())
            .with_state(Arc::clone(&requests));
        runtime.spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("mock model: {e}");
            }
        });
        Self {
            addr,
            requests,
            _runtime: runtime,
        }
    }

    /// The provider base URL: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// A copy of every request received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }
}

fn lock(requests: &Requests) -> std::sync::MutexGuard<'_, Vec<ModelRequest>> {
    requests.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records the request and answers it.
async fn answer(
    State(requests): State<Requests>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = String::from_utf8_lossy(&body).into_owned();
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let kind = classify(&method, uri.path(), &parsed);
    lock(&requests).push(ModelRequest {
        method: method.to_string(),
        path: uri
            .path_and_query()
            .map_or_else(|| uri.path().to_string(), ToString::to_string),
        headers: headers
            .iter()
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes());
                (name.as_str().to_string(), value.trim().to_string())
            })
            .collect(),
        body,
        kind,
    });
    let text = match kind {
        RequestKind::Other => {
            let models = json!({"object": "list", "data": [{"id": "fixture", "object": "model"}]});
            return Json(models).into_response();
        }
        RequestKind::Title => TITLE_TEXT.to_string(),
        RequestKind::Chat => closing_text(&parsed),
    };
    if parsed["stream"] != true {
        return Json(completion(&text)).into_response();
    }
    let turn = Turn::of(&parsed).filter(|_| kind == RequestKind::Chat);
    let reasoning = turn.as_ref().and_then(|turn| turn.reasoning.clone());
    let mut events = reasoning
        .map(|text| reasoning_chunks(&text))
        .unwrap_or_default();
    let pace = match turn.as_ref().and_then(|turn| turn.call.clone()) {
        Some((tool, command)) => {
            events.extend(tool_call_chunks(&tool, &command));
            None
        }
        None => {
            events.extend(chunks(&text));
            turn.and_then(|turn| turn.slow_secs)
                .map(|secs| (secs, events.len()))
        }
    };
    match pace {
        Some((secs, count)) => {
            // The words spread over `secs`, at most one every SLOW_PACE.
            let gap = (Duration::from_secs(secs) / u32::try_from(count.max(1)).unwrap_or(1))
                .max(SLOW_PACE);
            let paced = stream::iter(events).then(move |event| async move {
                tokio::time::sleep(gap).await;
                Ok::<_, Infallible>(event)
            });
            Sse::new(paced).into_response()
        }
        None => Sse::new(stream::iter(events.into_iter().map(Ok::<_, Infallible>))).into_response(),
    }
}

/// What the tags of the newest message, when it is the user's, ask of this step.
#[derive(Debug, Clone, Default)]
struct Turn {
    /// `(tool name, command)` of a `[[bash:COMMAND]]` step.
    call: Option<(String, String)>,
    /// `[[reason:TEXT]]`.
    reasoning: Option<String>,
    /// `[[slow:SECS]]`.
    slow_secs: Option<u64>,
}

impl Turn {
    /// `None` when the newest message is not the user's (a tool result: the turn's last step).
    fn of(body: &Value) -> Option<Self> {
        let newest = body["messages"].as_array()?.last()?;
        if newest["role"] != "user" {
            return None;
        }
        let text = content_text(&newest["content"]);
        let offered = |name: &str| {
            body["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|tool| tool["function"]["name"] == name))
        };
        let tool = if !offered("bash") && offered("shell") {
            "shell"
        } else {
            "bash"
        };
        Some(Self {
            call: tag(&text, "bash").map(|command| (tool.to_string(), command)),
            reasoning: tag(&text, "reason").map(|text| text.to_uppercase()),
            slow_secs: tag(&text, "slow").and_then(|secs| secs.parse().ok()),
        })
    }
}

/// The text of the first `[[NAME:TEXT]]` in `text`.
fn tag(text: &str, name: &str) -> Option<String> {
    let open = format!("[[{name}:");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find("]]")?;
    Some(text[start..end].to_string())
}

/// The closing text of a chat request: [`SUMMARY_TEXT`] for OpenCode 2's compaction, else
/// [`REPLY_TEXT`], followed by the `[[say:TEXT]]` of the newest user message in upper case.
fn closing_text(body: &Value) -> String {
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if messages
        .iter()
        .any(|m| content_text(&m["content"]).contains(SUMMARY_TEMPLATE_ASK))
    {
        return SUMMARY_TEXT.to_string();
    }
    let newest_user = messages.iter().rev().find(|m| m["role"] == "user");
    match newest_user.and_then(|m| tag(&content_text(&m["content"]), "say")) {
        Some(say) => format!("{REPLY_TEXT} {}", say.to_uppercase()),
        None => REPLY_TEXT.to_string(),
    }
}

/// A title request is a chat completion without tools whose system messages mention a title.
fn classify(method: &Method, path: &str, body: &Value) -> RequestKind {
    if method != Method::POST || !path.ends_with("/chat/completions") {
        return RequestKind::Other;
    }
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let system: String = body["messages"]
        .as_array()
        .map(|messages| {
            let system = messages.iter().filter(|m| m["role"] == "system");
            let texts: Vec<String> = system.map(|m| content_text(&m["content"])).collect();
            texts.join(" ")
        })
        .unwrap_or_default();
    if !has_tools && system.to_ascii_lowercase().contains("title") {
        RequestKind::Title
    } else {
        RequestKind::Chat
    }
}

/// Text of an OpenAI message `content` (a string or a list of `{type, text}` parts).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn usage() -> Value {
    json!({"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105})
}

/// A whole `chat.completion` answering `text`.
fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-interop",
        "object": "chat.completion",
        "created": 0,
        "model": "fixture",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"
        }],
        "usage": usage()
    })
}

/// A call of the shell tool `tool` running `command`, as `chat.completion.chunk` events: the
/// role, the whole call in one delta, an empty delta with `finish_reason: "tool_calls"` and
/// usage, then `[DONE]`.
fn tool_call_chunks(tool: &str, command: &str) -> Vec<Event> {
    let arguments = json!({"command": command, "description": "Run the scripted command"});
    let call = json!({
        "index": 0,
        "id": "call_interop",
        "type": "function",
        "function": {"name": tool, "arguments": arguments.to_string()}
    });
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-interop",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fixture",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let mut last = chunk(json!({}), json!("tool_calls"));
    last["usage"] = usage();
    [
        chunk(json!({"role": "assistant"}), Value::Null),
        chunk(json!({"tool_calls": [call]}), Value::Null),
        last,
    ]
    .into_iter()
    .map(|chunk| chunk.to_string())
    .chain(["[DONE]".to_string()])
    .map(|data| Event::default().data(data))
    .collect()
}

/// `text` as `chat.completion.chunk` events: the role, one chunk per word, an empty delta with
/// `finish_reason: "stop"` and usage, then `[DONE]`.
fn chunks(text: &str) -> Vec<Event> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-interop",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fixture",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let words = text
        .split_inclusive(' ')
        .map(|piece| chunk(json!({"content": piece}), Value::Null));
    let mut last = chunk(json!({}), json!("stop"));
    last["usage"] = usage();
    std::iter::once(chunk(json!({"role": "assistant"}), Value::Null))
        .chain(words)
        .chain([last])
        .map(|chunk| chunk.to_string())
        .chain(["[DONE]".to_string()])
        .map(|data| Event::default().data(data))
        .collect()
}

/// `text` as reasoning (`reasoning_content` deltas, one per word) after the role: the start of a
/// streamed answer, which the tool call or the text follows in the same stream.
fn reasoning_chunks(text: &str) -> Vec<Event> {
    let chunk = |delta: Value| {
        json!({
            "id": "chatcmpl-interop",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fixture",
            "choices": [{"index": 0, "delta": delta, "finish_reason": Value::Null}]
        })
    };
    std::iter::once(chunk(json!({"role": "assistant"})))
        .chain(
            text.split_inclusive(' ')
                .map(|piece| chunk(json!({"reasoning_content": piece}))),
        )
        .map(|chunk| Event::default().data(chunk.to_string()))
        .collect()
}
