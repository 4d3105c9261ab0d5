//! A real `serve` on loopback, after prunes, takes a bounded storm of hostile requests (every
//! route, every method, malformed and oversized bodies, wrong types, nulls, unknown keys, ids
//! past their bounds, numbers past every range, bad cursors, foreign origins, forms a page could
//! send): none is answered with a 5xx, the server stays up and answers, and neither the
//! database nor the journal changes by a byte.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common;
use common::http::{get, prune_all, with_messages, Server, WORKSPACE};

const SESSION: &str = "ses_hostile";
/// Requests sent: bounded in count (and each in time), so the test stays a few seconds long.
const REQUESTS: usize = 1_500;

/// A deterministic generator (xorshift64), so a failure is the same on every run.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[(self.next() % from.len() as u64) as usize]
    }
}

/// Values of every wrong kind a field may be given.
fn hostile_values(message: &str) -> Vec<Value> {
    vec![
        Value::Null,
        json!(""),
        json!("x".repeat(257)),
        json!(-1),
        json!(2.5),
        json!(1e300),
        json!(u64::MAX),
        json!(i64::MIN),
        json!([]),
        json!([-1]),
        json!([0, 0]),
        json!([100_001]),
        json!({}),
        json!(true),
        json!("../../etc/passwd"),
        json!("\u{0}\u{1f}\"\\"),
        json!(message),
        json!("zz".repeat(32)),
    ]
}

/// One hostile body: broken text, too deep, too large, or a prune's fields with one of them
/// replaced by a wrong value (or an unknown key added).
fn hostile_body(dice: &mut Dice, message: &str) -> String {
    let fields = [
        "sessionID",
        "messageID",
        "revision",
        "indexes",
        "candidates",
        "receiptID",
        "cursor",
        "query",
        "purpose",
        "includeTechnical",
        "target",
        "after",
        "known",
        "keepLastTurns",
        "paused",
        "content",
    ];
    match dice.next() % 8 {
        0 => "{\"sessionID\":".to_string(),
        1 => "[".repeat(10_000),
        2 => "not json at all \u{7f}".to_string(),
        3 => format!("{{\"sessionID\":\"{}\"}}", "y".repeat(1_100_000)),
        _ => {
            // The revision is never one (not hex): no body can be a well-formed prune, whose
            // refusal would be journaled.
            let mut body = json!({ "sessionID": SESSION, "messageID": message, "revision": "Z".repeat(64), "indexes": [1] });
            let field = *dice.pick(&fields);
            let values = hostile_values(message);
            body[field] = dice.pick(&values).clone();
            body.to_string()
        }
    }
}

#[test]
fn a_storm_of_hostile_requests_gets_no_5xx_and_changes_nothing() {
    let (fx, messages) = with_messages(SESSION, 2);
    let server = Server::start(&fx.db, &["--archive"]);
    prune_all(&server, SESSION, &messages[0]);
    let before = (fx.file_digest(), fx.journal_digest());
    // A fresh connection per request: a server that answers before reading a large body closes
    // that connection, and a pooled client could send the next request on it as it closes.
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");
    let routes = [
        "preview",
        "prune",
        "prune-batch",
        "restore",
        "history",
        "receipts",
        "audit",
        "clean-plan",
        "events?since=abc",
        "events?since=-1",
        "events?framing=xml",
        "events?unknown=1",
        "nope",
        "../../../etc/passwd",
        "%00",
    ];
    let long = "w".repeat(300);
    let workspaces = [
        WORKSPACE, WORKSPACE, WORKSPACE, WORKSPACE, WORKSPACE, "nowhere", "..", "%2e%2e", &long,
    ];
    let content_types = [
        "application/json",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin1",
    ];
    let origins = ["", "http://evil.example", "null"];
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..REQUESTS {
        let workspace = *dice.pick(&workspaces);
        let route = *dice.pick(&routes);
        let prefix = match dice.next() % 4 {
            0 => "session-history",
            _ => "session-pruning",
        };
        let route = match (prefix, dice.next() % 4) {
            ("session-history", 0) => "outline",
            ("session-history", 1) => "window",
            ("session-history", 2) => "assets",
            _ => route,
        };
        let url = server.url(&format!("/api/workspaces/{workspace}/{prefix}/{route}"));
        let method = *dice.pick(&[
            "GET", "POST", "PUT", "DELETE", "OPTIONS", "POST", "POST", "POST", "POST", "POST",
        ]);
        let mut request = client.request(method.parse().expect("method"), &url);
        let mut large = false;
        if method != "GET" {
            let body = hostile_body(&mut dice, &messages[1]);
            large = body.len() > 1024 * 1024;
            request = request
                .header("content-type", *dice.pick(&content_types))
                .body(body);
        }
        let origin = *dice.pick(&origins);
        if !origin.is_empty() {
            request = request.header("origin", origin);
        }
        if dice.next() % 5 == 0 {
            request = request.header(
                "last-event-id",
                *dice.pick(&["x", "-3", "1e3", "99999999999999999999999"]),
            );
        }
        let status = match request.send() {
            Ok(response) => response.status().as_u16(),
            // An answer that comes before a body over 1 MiB was read (413, 404 for an unknown
            // workspace) ends the connection under the upload: the client sees its write fail.
            Err(_) if large => {
                let (status, body) = get(&server.url("/health"));
                assert_eq!(status, 200, "request {n}: {body}");
                continue;
            }
            Err(e) => panic!("request {n} ({method} {url}) failed: {e:?}"),
        };
        assert!(
            status < 500,
            "request {n}: {method} {url} answered {status}"
        );
        *statuses.entry(status).or_default() += 1;
    }
    // Still up, and every bad request was turned away without a write.
    let (status, body) = get(&server.url("/health"));
    assert_eq!(status, 200, "{body}");
    assert!(
        statuses
            .keys()
            .all(|status| *status >= 400 || *status == 200 || *status == 204),
        "{statuses:?}"
    );
    eprintln!("statuses: {statuses:?}");
    drop(server);
    assert_eq!(
        (fx.file_digest(), fx.journal_digest()),
        before,
        "{statuses:?}"
    );
}
