//! `POST .../session-pruning/restore` restores only the receipts of its workspace's sessions:
//! another workspace's receipt is answered as an unknown one (`blocked/not_deletable`, nothing
//! journaled or written), before and after it was restored; a malformed body is 400; in its own
//! workspace the restore is done once and an identical retry gets the same receipt.

use crate::common;

use common::app::App;
use common::archive::{prune_archived, rows_digest};
use common::http::OTHER_WORKSPACE;
use common::*;

fn restore_in(app: &App, workspace: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, text) = app.post(
        &format!("/api/workspaces/{workspace}/session-pruning/restore"),
        body,
    );
    (status, serde_json::from_str(&text).expect("JSON"))
}

#[test]
fn a_receipt_restores_only_in_its_own_workspace() {
    let fx = Fixture::new();
    let pruned = prune_archived(&fx.db, MANY_TURNS, TURN5, None);
    let body = format!(r#"{{"receiptID":"{pruned}"}}"#);
    let journaled = || {
        let journal = pruning_engine::Journal::open_read_only(&fx.journal).expect("journal");
        format!("{:?}", journal.intents().expect("intents"))
    };
    let intents = journaled();
    {
        let app = App::start(&fx);
        let before = rows_digest(&fx.db);
        let (status, answer) = restore_in(&app, OTHER_WORKSPACE, &body);
        assert_eq!(status, 200);
        assert_eq!(answer["status"], "blocked");
        assert_eq!(answer["reason"], "not_deletable");
        for bad in [
            r#"{"receiptID":"nope"}"#,
            r#"{}"#,
            &format!(r#"{{"receiptID":"{pruned}","x":1}}"#),
        ] {
            let (status, _) = restore_in(&app, "work", bad);
            assert_eq!(status, 400, "{bad}");
        }
        assert_eq!(rows_digest(&fx.db), before);
        app.stop();
    }
    assert_eq!(journaled(), intents);

    let app = App::start(&fx);
    let (status, first) = restore_in(&app, "work", &body);
    assert_eq!(status, 200);
    assert_eq!(first["status"], "restored", "{first}");
    let (_, retry) = restore_in(&app, "work", &body);
    assert_eq!(retry, first);
    let (_, elsewhere) = restore_in(&app, OTHER_WORKSPACE, &body);
    assert_eq!(elsewhere["reason"], "not_deletable");
    app.stop();
}
