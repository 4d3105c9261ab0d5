//! The server's router in this process: the engine over a fixture, `pruning_server::router`
//! over it, and requests sent with `tower::ServiceExt::oneshot`, as `session-prune serve` would
//! answer them on a socket (everything but the socket: tests of connections, shutdown and
//! signals run the real server, `super::http::Server`).
#![allow(dead_code)]

use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, HeaderMap, Method, Request, Response};
use http_body_util::BodyExt as _;
use pruning_server::{AppState, Password, ServerOptions, UpkeepOptions, Workspace, Workspaces};
use serde_json::Value;
use tower::ServiceExt as _;

use super::http::{FIXTURE_DIRECTORY, OTHER_WORKSPACE, WORKSPACE};
use super::Fixture;

/// The router over an engine on a fixture, with its own runtime.
pub struct App {
    router: axum::Router,
    /// Declared after the router: dropped last, it waits for the engine calls still running,
    /// which hold the last handles to the engine (and the journal).
    runtime: tokio::runtime::Runtime,
}

/// A whole answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// The test workspaces: `work` = the fixture's directory, `elsewhere` = `/elsewhere`.
pub fn test_workspaces() -> Workspaces {
    Workspaces::Given(vec![
        Workspace {
            id: WORKSPACE.into(),
            directory: FIXTURE_DIRECTORY.into(),
        },
        Workspace {
            id: OTHER_WORKSPACE.into(),
            directory: "/elsewhere".into(),
        },
    ])
}

impl App {
    /// As `serve --workspace work=... --workspace elsewhere=/elsewhere --heartbeat 100ms`.
    pub fn start(fx: &Fixture) -> Self {
        Self::with(fx, test_workspaces(), None)
    }

    /// With the given workspaces and password, a 100 ms heartbeat and the default 30 s quiet
    /// period (as `serve` has them).
    pub fn with(fx: &Fixture, workspaces: Workspaces, password: Option<&str>) -> Self {
        Self::build(fx, workspaces, password, false, None)
    }

    /// [`App::with`] the test workspaces and a schedule of one run an hour (`serve
    /// --auto-clean 1h`), whose clean is never run: the router alone runs no schedule
    /// (`serve_with` does), so its routes answer from a schedule that stays as it is set.
    pub fn scheduled(fx: &Fixture, password: Option<&str>) -> Self {
        let upkeep = UpkeepOptions {
            every: Duration::from_secs(3600),
            clean: pruning_clean::Clean::default(),
            archive_keep: None,
            explain: std::sync::Arc::new(|failure: &str| failure.to_string()),
        };
        Self::build(fx, test_workspaces(), password, false, Some(upkeep))
    }

    /// [`App::with`] on a runtime whose clock is paused: when nothing else can run, it jumps
    /// to the next timer, so a timeout is reached at once (no test waits for it).
    pub fn paused(fx: &Fixture, workspaces: Workspaces, password: Option<&str>) -> Self {
        Self::build(fx, workspaces, password, true, None)
    }

    fn build(
        fx: &Fixture,
        workspaces: Workspaces,
        password: Option<&str>,
        paused: bool,
        upkeep: Option<UpkeepOptions>,
    ) -> Self {
        let options = ServerOptions {
            password: password.map(|p| Password::new(p.into()).expect("a usable password")),
            workspaces,
            heartbeat: Duration::from_millis(100),
            allowed_origins: Vec::new(),
            upkeep,
        };
        let state = AppState::new(std::sync::Arc::new(fx.engine()), options);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(paused)
            .build()
            .expect("runtime");
        Self {
            router: pruning_server::router(state),
            runtime,
        }
    }

    /// The route of `name` (`preview`, `prune`, ...) in the test workspace.
    pub fn route(&self, name: &str) -> String {
        format!("/api/workspaces/{WORKSPACE}/session-pruning/{name}")
    }

    /// Sends `request`, with `Host: localhost` when it names no host (as every client on a
    /// socket does); the response with its body unread (an event stream never ends).
    pub fn send(&self, mut request: Request<Body>) -> Response<Body> {
        if !request.headers().contains_key(header::HOST) {
            let localhost = header::HeaderValue::from_static("localhost");
            request.headers_mut().insert(header::HOST, localhost);
        }
        let router = self.router.clone();
        match self.runtime.block_on(router.oneshot(request)) {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// Sends `request` and reads the whole answer.
    pub fn answer(&self, request: Request<Body>) -> Answer {
        let response = self.send(request);
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = self
            .runtime
            .block_on(response.into_body().collect())
            .expect("the body")
            .to_bytes();
        Answer {
            status,
            headers,
            body: String::from_utf8(bytes.to_vec()).expect("a UTF-8 body"),
        }
    }

    /// The next piece of a body being read (`None` at its end).
    pub fn next_chunk(&self, body: &mut Body) -> Option<Bytes> {
        loop {
            let frame = self.runtime.block_on(body.frame())?.expect("the body");
            if let Ok(data) = frame.into_data() {
                return Some(data);
            }
        }
    }

    /// `POST path` with `body` (JSON); the status and the body text.
    pub fn post(&self, path: &str, body: &str) -> (u16, String) {
        let answer = self.answer(json_request(
            Method::POST,
            path,
            Body::from(body.to_string()),
        ));
        (answer.status, answer.body)
    }

    /// `GET path`; the status and the body text.
    pub fn get(&self, path: &str) -> (u16, String) {
        let answer = self.answer(json_request(Method::GET, path, Body::empty()));
        (answer.status, answer.body)
    }

    /// Drops the router and waits for the engine calls still running: the journal is closed
    /// when this returns.
    pub fn stop(self) {
        let Self { router, runtime } = self;
        drop(router);
        drop(runtime);
    }
}

/// A request for `path` with a JSON content type and, for a body of known size, its
/// `Content-Length` (as clients send them).
pub fn json_request(method: Method, path: &str, body: Body) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(length) = HttpBody::size_hint(&body).exact().filter(|n| *n > 0) {
        request = request.header(header::CONTENT_LENGTH, length);
    }
    request.body(body).expect("a request")
}
