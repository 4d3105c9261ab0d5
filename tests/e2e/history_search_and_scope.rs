//! History search is case-insensitive beyond ASCII and covers tool and reasoning parts only when
//! asked; a directory scope takes nested directories and the `global` project and leaves out
//! siblings, other projects and other workspaces; unreadable and incomplete rows are counted as
//! skipped; a session that is missing or outside the scope is refused.

use crate::common;

use common::{prune_listing, ROWS_ONLY};

use common::v2::{V2Fixture, V2_SESSION};
use pruning_engine::history::{history_with, HistoryPage, SearchKind};
use pruning_engine::{BlockedReason, HistoryRequest, HistoryResult, Purpose, Scope};
use pruning_opencode::{OpenCodeStore, StoreOptions};

fn store(fx: &V2Fixture) -> OpenCodeStore {
    OpenCodeStore::open(&fx.db, StoreOptions::default()).unwrap()
}

fn search(session: Option<&str>, query: &str, technical: bool) -> HistoryRequest {
    HistoryRequest::new(
        session.map(str::to_string),
        query.into(),
        technical,
        Purpose::Search,
        None,
    )
    .unwrap()
}

fn page(store: &OpenCodeStore, request: &HistoryRequest) -> HistoryPage {
    match history_with(store, request, ROWS_ONLY).unwrap().result {
        HistoryResult::Page(page) => page,
        other => panic!("{other:?}"),
    }
}

fn assistant(created: i64, content: &str) -> String {
    format!(r#"{{"time":{{"created":{created},"completed":{created}}},"content":{content}}}"#)
}

#[test]
fn search_is_case_insensitive_and_technical_parts_are_optional() {
    let fx = V2Fixture::new();
    fx.insert_message(
        V2_SESSION,
        "msg_text_hit",
        "assistant",
        3,
        &assistant(
            3,
            r#"[{"type":"text","id":"t","text":"Une réflexion profonde"}]"#,
        ),
    );
    fx.insert_message(
        V2_SESSION,
        "msg_tool_hit",
        "assistant",
        4,
        &assistant(
            4,
            r#"[{"type":"text","id":"t","text":"done"},{"type":"tool","id":"c","name":"bash","state":{"status":"completed","input":"{}","content":[{"type":"text","text":"RÉFLEXION in output"}],"structured":{}},"time":{"created":4}}]"#,
        ),
    );
    let store = store(&fx);
    let all = page(&store, &search(Some(V2_SESSION), "RÉFLEXION", true));
    let found: Vec<(&str, u32, SearchKind, &str)> = all
        .hits
        .iter()
        .map(|h| {
            (
                h.message_id.as_str(),
                h.part_index,
                h.kind,
                h.excerpt.as_str(),
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (
                "msg_text_hit",
                0,
                SearchKind::Text,
                "Une réflexion profonde"
            ),
            ("msg_tool_hit", 1, SearchKind::Tool, "RÉFLEXION in output"),
        ]
    );
    assert_eq!(all.hits[0].role, "assistant");
    assert_eq!(all.hits[0].session_id, V2_SESSION);
    let text_only = page(&store, &search(Some(V2_SESSION), "réflexion", false));
    let ids: Vec<&str> = text_only
        .hits
        .iter()
        .map(|h| h.message_id.as_str())
        .collect();
    assert_eq!(ids, vec!["msg_text_hit"]);
    // A user message's own text is part 0.
    let user = page(&store, &search(Some(V2_SESSION), "LIST NUMBERS", false));
    assert_eq!(user.hits.len(), 1);
    assert_eq!(
        (
            user.hits[0].role.as_str(),
            user.hits[0].part_index,
            user.hits[0].kind
        ),
        ("user", 0, SearchKind::Text)
    );
    // An empty query finds nothing but still counts.
    let empty = page(&store, &search(Some(V2_SESSION), "", true));
    assert!(empty.hits.is_empty());
    assert_eq!((empty.scanned, empty.tools, empty.reasoning), (4, 2, 1));
}

/// Sessions around `/repo`, each with one message saying "needle".
fn sessions_around_repo() -> V2Fixture {
    let fx = V2Fixture::new();
    fx.exec(
        "INSERT INTO project VALUES ('prj_other', '/', 1, 1, '[]');
         INSERT INTO project VALUES ('global', '/', 1, 1, '[]');",
    );
    let sessions = [
        ("ses_repo", "/repo", "prj", None),
        ("ses_nested", "/repo/deep/er", "prj", None),
        ("ses_global", "/repo/scratch", "global", None),
        ("ses_sibling", "/repo-other", "prj", None),
        ("ses_other_project", "/repo", "prj_other", None),
        ("ses_workspace", "/repo", "prj", Some("wrk_1")),
        ("ses_other_workspace", "/repo", "prj", Some("wrk_2")),
        ("ses_dotdot", "/repo/../etc", "prj", None),
    ];
    for (i, (id, directory, project, workspace)) in sessions.iter().enumerate() {
        fx.sql()
            .execute(
                "INSERT INTO session_v2 (id, project_id, workspace_id, slug, directory, title, version, time_created, time_updated)
                 VALUES (?1, ?2, ?3, 's', ?4, 't', '2', 1, 1)",
                rusqlite::params![id, project, workspace, directory],
            )
            .unwrap();
        fx.insert_message(
            id,
            &format!("msg_{id}"),
            "user",
            10 + i as i64,
            r#"{"time":{"created":1},"text":"the needle"}"#,
        );
    }
    fx
}

fn hits_in(fx: &V2Fixture, scope: Scope) -> Vec<String> {
    let request = search(None, "needle", true).within(scope);
    page(&store(fx), &request)
        .hits
        .into_iter()
        .map(|h| h.session_id)
        .collect()
}

#[test]
fn a_directory_scope_takes_nested_directories_and_the_global_project() {
    let fx = sessions_around_repo();
    let scope = Scope {
        directory: Some("/repo".into()),
        project_id: Some("prj".into()),
        workspace_id: None,
    };
    // In scan order: session by session, by session id.
    assert_eq!(
        hits_in(&fx, scope.clone()),
        vec![
            "ses_global",
            "ses_nested",
            "ses_other_workspace",
            "ses_repo",
            "ses_workspace"
        ]
    );
    let workspace = Scope {
        workspace_id: Some("wrk_1".into()),
        ..scope
    };
    assert_eq!(hits_in(&fx, workspace), vec!["ses_workspace"]);
    assert_eq!(hits_in(&fx, Scope::default()).len(), 8);
}

#[test]
fn a_session_outside_the_scope_or_missing_is_refused() {
    let fx = sessions_around_repo();
    let store = store(&fx);
    let scope = Scope {
        directory: Some("/repo".into()),
        ..Scope::default()
    };
    for session in ["ses_sibling", "ses_dotdot", "ses_nowhere"] {
        let request = search(Some(session), "needle", true).within(scope.clone());
        let outcome = history_with(&store, &request, ROWS_ONLY).unwrap();
        assert_eq!(
            outcome.result,
            HistoryResult::Blocked {
                reason: BlockedReason::NotDeletable
            },
            "{session}"
        );
    }
}

#[test]
fn incomplete_malformed_and_oversize_messages_are_skipped() {
    let fx = V2Fixture::new();
    fx.insert_message(
        V2_SESSION,
        "msg_incomplete",
        "assistant",
        3,
        r#"{"time":{"created":3},"content":[{"type":"reasoning","id":"r","text":"still thinking"}]}"#,
    );
    fx.insert_message(V2_SESSION, "msg_malformed", "assistant", 4, "{not json");
    fx.exec(&format!(
        "INSERT INTO session_message VALUES ('msg_not_utf8', '{V2_SESSION}', 'user', 6, 6, 6,
           CAST(x'7b2274657874223a2266ff6f6f227d' AS TEXT))"
    ));
    let huge = format!(
        r#"{{"time":{{"created":5,"completed":6}},"content":[{{"type":"text","id":"t","text":"{}"}}]}}"#,
        "x".repeat(16 * 1024 * 1024)
    );
    fx.insert_message(V2_SESSION, "msg_oversize", "assistant", 5, &huge);
    let request = prune_listing(V2_SESSION);
    let outcome = history_with(&store(&fx), &request, ROWS_ONLY).unwrap();
    let HistoryResult::Page(page) = outcome.result else {
        panic!("{:?}", outcome.result)
    };
    assert_eq!((page.scanned, page.skipped), (6, 4));
    let why: Vec<(&str, &str)> = outcome
        .skipped
        .iter()
        .map(|(id, why)| (id.as_str(), why.as_str()))
        .collect();
    assert_eq!(
        why,
        vec![
            ("msg_incomplete", "the assistant message is not complete (a run may still be writing it, or was killed)"),
            ("msg_malformed", "V2 message msg_malformed does not hold a JSON object"),
            ("msg_oversize", "V2 message msg_oversize is over the 16777216-byte budget"),
            ("msg_not_utf8", "V2 message msg_not_utf8 does not hold UTF-8 text"),
        ]
    );
    // The readable messages: the user turn and the fixture's assistant message.
    assert_eq!((page.tools, page.reasoning), (1, 1));
    let candidates: Vec<&str> = page
        .candidates
        .iter()
        .map(|c| c.message_id.as_str())
        .collect();
    assert_eq!(candidates, vec![common::v2::V2_ASSISTANT]);
    assert_eq!(page.cursor, None);
}
