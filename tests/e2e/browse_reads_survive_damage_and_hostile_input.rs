//! The browsing reads under hostile input and damage: checkpoints at the integer limits are
//! answered (not a failed read) and leave every reader usable; an inverted cursor is a 400; a
//! row of the wrong type is `unsupported_storage`; an interrupt of a finished read never
//! reaches the request its connection is lent to next; answers are compact JSON.

use pruning_engine::browse::{Target, WindowRequest, WindowResult};
use pruning_opencode::{Browser, StoreOptions};
use serde_json::json;

use crate::common::app::App;
use crate::common::browse::{call, history_route, V2_SESSION};
use crate::common::{Fixture, MANY_TURNS, TURN1};

#[test]
fn checkpoints_at_the_integer_limits_leave_the_readers_usable() {
    let fx = Fixture::new();
    let app = App::start(&fx);
    let digest = "0".repeat(64);
    for through in [json!(i64::MAX), json!(u64::MAX)] {
        let body = json!({"sessionID": MANY_TURNS, "known": [{"after": -1, "through": through, "digest": digest}]});
        let (status, answer) = call(&app, "outline", &body);
        assert_eq!(
            (status, answer["status"].clone()),
            (200, json!("outline")),
            "{answer}"
        );
        assert_eq!(answer["total"], 30);
        assert_eq!(answer["entries"].as_array().unwrap().len(), 30);
    }
    for _ in 0..8 {
        let (status, answer) = call(
            &app,
            "window",
            &json!({"sessionID": MANY_TURNS, "target": {"kind": "latest"}}),
        );
        assert_eq!(
            (status, answer["status"].clone()),
            (200, json!("window")),
            "{answer}"
        );
    }
    let inverted = json!({"sessionID": MANY_TURNS, "cursor": {"after": 5, "through": 3}});
    let (status, answer) = call(&app, "outline", &inverted);
    assert_eq!(
        (status, answer["field"].clone()),
        (400, json!("cursor")),
        "{answer}"
    );
}

#[test]
fn rows_of_the_wrong_type_are_unsupported_storage() {
    let fx = Fixture::new();
    fx.exec(&format!(
        "UPDATE part SET data = x'ff00fe' WHERE message_id = '{TURN1}' AND data LIKE '%step-start%';
         UPDATE session_message SET seq = 'abc' WHERE session_id = '{V2_SESSION}'
           AND seq = (SELECT max(seq) FROM session_message WHERE session_id = '{V2_SESSION}');"
    ));
    let before = fx.file_digest();
    let app = App::start(&fx);
    let blocked = json!({"status": "blocked", "reason": "unsupported_storage"});
    let around = json!({"sessionID": MANY_TURNS, "target": {"kind": "around", "messageID": TURN1}});
    assert_eq!(call(&app, "window", &around), (200, blocked.clone()));
    assert_eq!(
        call(&app, "outline", &json!({"sessionID": V2_SESSION})),
        (200, blocked)
    );
    // The rest of the V1 session still outlines: the damaged part counts as neither kind.
    let (_, outline) = call(&app, "outline", &json!({"sessionID": MANY_TURNS}));
    assert_eq!(outline["entries"][1]["tools"], 1, "{outline}");
    let (status, body) = app.post(
        &history_route("outline"),
        &json!({"sessionID": MANY_TURNS}).to_string(),
    );
    assert_eq!(status, 200);
    assert_eq!(body.lines().count(), 1, "compact JSON, one line");
    drop(app);
    assert_eq!(fx.file_digest(), before);
}

#[test]
fn an_interrupt_after_its_read_ended_never_reaches_the_next_request() {
    let fx = Fixture::new();
    let browser = Browser::open(&fx.db, StoreOptions::default()).expect("browser");
    let request = WindowRequest {
        session_id: MANY_TURNS.into(),
        target: Target::Latest {},
    };
    let first = browser.lease().expect("lease");
    let stale = first.interrupt_handle();
    drop(first);
    let next = browser.lease().expect("the same connection, lent again");
    stale.interrupt();
    let result = next
        .window(&request)
        .expect("the next read is not interrupted");
    assert!(matches!(result, WindowResult::Window { .. }), "{result:?}");
    // An interrupt while the lease holds its connection but runs nothing is harmless (SQLite
    // clears it when the next statement starts): the next read answers whole.
    next.interrupt_handle().interrupt();
    let after = next
        .window(&request)
        .expect("an interrupt between reads is harmless");
    assert_eq!(format!("{after:?}"), format!("{result:?}"));
    drop(next);
    let again = browser.lease().expect("lease");
    assert!(matches!(
        again.window(&request).expect("a usable reader"),
        WindowResult::Window { .. }
    ));
}
