//! The server bounds its connections: one that sends half a request head (or nothing) is
//! closed after the header-read timeout, a keep-alive connection with no request in flight is
//! closed after the idle timeout, an event stream outlives the idle timeout, and connections
//! beyond the limit wait unaccepted until the ones served close, after which `/health`
//! answers again. The timeouts and the limit are shortened through the server's hidden
//! environment variables.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::http::{events_path, Server, Sse, WORKSPACE};
use common::Fixture;

const HEADER_READ_TIMEOUT: &str = "SESSION_PRUNE_SERVE_HEADER_READ_TIMEOUT";
const IDLE_TIMEOUT: &str = "SESSION_PRUNE_SERVE_IDLE_TIMEOUT";
const MAX_CONNECTIONS: &str = "SESSION_PRUNE_SERVE_MAX_CONNECTIONS";

/// The longest any read in these tests waits.
const READ_LIMIT: Duration = Duration::from_secs(30);

/// Serves `db` with the test workspace, a 100 ms heartbeat and `env`.
fn start(fx: &Fixture, env: &[(&str, &str)]) -> Server {
    let args: Vec<String> = [
        "--workspace",
        &format!("{WORKSPACE}={}", common::http::FIXTURE_DIRECTORY),
        "--heartbeat",
        "100ms",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    Server::start_exactly(&fx.db, &args, env)
}

/// A connection to `server` whose reads give up after [`READ_LIMIT`].
fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(&server.address).expect("connect");
    stream.set_read_timeout(Some(READ_LIMIT)).expect("timeout");
    stream
}

/// One `read`, tried again when a signal interrupted it: a read with a timeout
/// (`SO_RCVTIMEO`) is not restarted by the kernel after a signal handler ran (signal(7)).
fn read_once(stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Reads until the server closes the connection; returns what it sent. Panics if it stays open
/// for [`READ_LIMIT`].
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match read_once(stream, &mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("the server kept the connection open: {e} ({:?})", e.kind()),
        }
    }
}

/// Sends `GET /health` on a keep-alive connection and reads exactly its response; returns the
/// status.
fn health_keep_alive(stream: &mut TcpStream) -> u16 {
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    read_response(stream)
}

/// Reads one response with a `Content-Length` body; returns its status.
fn read_response(stream: &mut TcpStream) -> u16 {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = read_once(stream, &mut byte).expect("response head");
        assert_eq!(n, 1, "the connection closed mid-response: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).expect("ASCII head");
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().expect("length"))
        })
        .expect("content-length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).expect("body");
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status")
}

#[test]
fn half_a_request_head_is_closed_after_the_header_read_timeout() {
    let fx = Fixture::new();
    let server = start(
        &fx,
        &[(HEADER_READ_TIMEOUT, "500ms"), (IDLE_TIMEOUT, "60s")],
    );
    let timeout = Duration::from_millis(500);

    // Each instant is taken before the connection exists, so before the server's timer starts.
    let started = Instant::now();
    let mut half = connect(&server);
    half.write_all(b"GET /health HTTP/1.1\r\nHost: local")
        .expect("send");
    assert_eq!(read_to_close(&mut half), b"", "closed without an answer");
    assert!(started.elapsed() >= timeout, "not before the timeout");

    let started = Instant::now();
    let mut silent = connect(&server);
    assert_eq!(read_to_close(&mut silent), b"", "closed without an answer");
    assert!(started.elapsed() >= timeout, "not before the timeout");

    // A complete request head in time is answered on the same kind of connection.
    let mut prompt = connect(&server);
    assert_eq!(health_keep_alive(&mut prompt), 200);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let fx = Fixture::new();
    let server = start(
        &fx,
        &[(HEADER_READ_TIMEOUT, "200ms"), (IDLE_TIMEOUT, "1500ms")],
    );
    let mut stream = connect(&server);
    assert_eq!(health_keep_alive(&mut stream), 200);
    // The header-read timeout bounds only the first request head: the connection is still
    // served after it.
    std::thread::sleep(Duration::from_millis(600));
    // Taken before the request is sent, so before the server's idle timer starts.
    let sent = Instant::now();
    assert_eq!(health_keep_alive(&mut stream), 200);
    assert_eq!(read_to_close(&mut stream), b"", "closed without an answer");
    assert!(
        sent.elapsed() >= Duration::from_millis(1500),
        "not before the timeout"
    );
}

#[test]
fn connections_beyond_the_limit_wait_until_the_idle_ones_are_closed() {
    const LIMIT: usize = 8;
    let fx = Fixture::new();
    let limit = LIMIT.to_string();
    let server = start(
        &fx,
        &[
            (HEADER_READ_TIMEOUT, "4s"),
            (IDLE_TIMEOUT, "4s"),
            (MAX_CONNECTIONS, &limit),
        ],
    );
    // Eight connections served at once, left idle.
    let mut held: Vec<TcpStream> = (0..LIMIT)
        .map(|_| {
            let mut stream = connect(&server);
            assert_eq!(health_keep_alive(&mut stream), 200);
            stream
        })
        .collect();

    // The ninth connects (the kernel queues it) but is not accepted: its request is not
    // answered while the eight are open (for 4 s after their answers).
    let mut ninth = connect(&server);
    ninth
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    ninth
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let waiting = read_once(&mut ninth, &mut byte).expect_err("no answer beyond the limit");
    assert!(
        matches!(waiting.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{waiting:?}"
    );

    // The server closes the eight idle ones; then the ninth is accepted and answered.
    for stream in &mut held {
        assert_eq!(read_to_close(stream), b"", "closed without an answer");
    }
    ninth.set_read_timeout(Some(READ_LIMIT)).expect("timeout");
    assert_eq!(read_response(&mut ninth), 200);

    // And `/health` on a fresh connection answers.
    let (status, body) = common::http::get(&server.url("/health"));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn an_event_stream_outlives_the_idle_timeout() {
    let fx = Fixture::new();
    let server = start(
        &fx,
        &[(HEADER_READ_TIMEOUT, "300ms"), (IDLE_TIMEOUT, "300ms")],
    );
    let mut sse = Sse::open(&server.address, &events_path(WORKSPACE), None);
    // Heartbeats come at most every 100 ms: 20 of them span at least 2 s, several idle
    // timeouts.
    for _ in 0..20 {
        let event = sse.next().expect("the stream stays open");
        assert_eq!(event.event, "heartbeat");
    }
    let (status, printed) = server.stop();
    assert_eq!(status.code(), Some(0), "{printed}");
    assert!(sse.ended_cleanly(), "the stream ends with the last chunk");
}
