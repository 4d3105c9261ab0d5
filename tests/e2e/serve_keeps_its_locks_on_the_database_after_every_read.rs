//! A process's POSIX locks on a file go with any of its descriptors of that file: a read of the
//! database outside SQLite (a header check, say) beside `serve`'s open connections would drop
//! the locks SQLite holds, and another process closing the database would then take the WAL
//! from under the server. After every kind of read route, the server still holds its lock on
//! the database file (`/proc/locks`).

use crate::common;
use common::http::{get, post, with_messages, Server, WORKSPACE};

const SESSION: &str = "ses_locks_kept";

/// The lock entries of `/proc/locks` that process `pid` holds on inode `inode`.
fn locks_held(pid: u32, inode: u64) -> usize {
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks
        .lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.iter().any(|field| *field == pid.to_string())
                && fields
                    .iter()
                    .any(|field| field.rsplit(':').next() == Some(&inode.to_string()))
        })
        .count()
}

#[test]
fn every_read_route_leaves_the_servers_lock_on_the_database() {
    use std::os::unix::fs::MetadataExt as _;
    let (fx, messages) = with_messages(SESSION, 1);
    let server = Server::start(&fx.db, &[]);
    let inode = std::fs::metadata(&fx.db).unwrap().ino();
    let held = locks_held(server.pid(), inode);
    assert!(held > 0, "the server holds no lock on the database");
    let history = |route: &str| {
        server.url(&format!(
            "/api/workspaces/{WORKSPACE}/session-history/{route}"
        ))
    };
    let session = serde_json::json!({ "sessionID": SESSION }).to_string();
    let reads: Vec<(u16, String)> = vec![
        post(&history("outline"), &session),
        post(
            &history("window"),
            &serde_json::json!({ "sessionID": SESSION, "target": {"kind": "latest"} }).to_string(),
        ),
        post(&history("assets"), &session),
        get(&server.url(&format!("/api/workspaces/{WORKSPACE}/sessions"))),
        get(&server.url(&format!("/api/workspaces/{WORKSPACE}/stats"))),
        post(
            &server.route("preview"),
            &serde_json::json!({ "sessionID": SESSION, "messageID": messages[0] }).to_string(),
        ),
        post(&server.route("history"), &session),
        get(&server.route("receipts")),
        get(&server.route("audit")),
        get(&server.url("/health")),
    ];
    for (at, (status, body)) in reads.iter().enumerate() {
        assert_eq!(*status, 200, "read {at}: {body}");
    }
    assert_eq!(locks_held(server.pid(), inode), held);
}
