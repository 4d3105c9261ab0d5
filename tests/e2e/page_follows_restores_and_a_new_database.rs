//! The page in a real headless Chromium, on events that repeat a revision and on a server that
//! comes back with another database: a prune, its restore and the same prune again are three
//! events, each drawn (the message loses its tool part, gets it back, loses it again); and
//! when the server at the page's address now serves another database, whose journal numbers
//! its events anew, the page says so and reads everything again instead of taking that
//! journal's events for the ones it missed.

use crate::common;

use common::browser::Browser;
use common::http::{parse, post, prune_all_keeping_request, with_messages, Server, WORKSPACE};
use serde_json::json;

const SESSION: &str = "ses_page_restore";

/// Runs a blocking client call (reqwest's blocking client, a process) beside the browser's.
fn blocking<T>(call: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(call)
}

fn shows_tools(id: &str, tools: usize) -> String {
    let a = format!("document.querySelector('article[data-message-id=\"{id}\"]')");
    format!("return !!{a} && {a}.querySelectorAll('.part[data-type=\"tool\"]').length === {tools}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_draws_each_event_and_starts_anew_on_another_database() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (fx, messages) = with_messages(SESSION, 4);
    let server = blocking(|| Server::start(&fx.db, &["--archive"]));
    let address = server.address.clone();
    browser
        .open_tab(&server.url(&format!("/#ws={WORKSPACE}&session={SESSION}")))
        .await;
    let last = &messages[3];
    browser.until("the message", &shows_tools(last, 1)).await;
    browser
        .until(
            "the event stream live",
            "return document.getElementById('events-status').className === 'live'",
        )
        .await;

    // Prune, restore, prune again: the first and the third carry the same revision.
    let (request, first) = blocking(|| prune_all_keeping_request(&server, SESSION, last));
    browser
        .until("the prune drawn", &shows_tools(last, 0))
        .await;
    let receipt = fx
        .sql()
        .query_row("SELECT id FROM session_prune_receipt", [], |row| {
            row.get::<_, String>(0)
        })
        .expect("the receipt");
    let (status, restored) = blocking(|| {
        post(
            &server.route("restore"),
            &json!({ "receiptID": receipt }).to_string(),
        )
    });
    assert_eq!(status, 200, "{restored}");
    browser
        .until("the restore drawn", &shows_tools(last, 1))
        .await;
    let (status, again) = blocking(|| post(&server.route("prune"), &request));
    assert_eq!(status, 200, "{again}");
    let again = parse(&again);
    assert_eq!(again["status"], "pruned", "{again}");
    assert_eq!(again["revision"], first["revision"]);
    browser
        .until("the prune drawn again", &shows_tools(last, 0))
        .await;
    assert_eq!(
        browser
            .eval("return window.sessionPrune.eventsApplied")
            .await,
        json!(3)
    );
    assert_eq!(
        browser.eval("return window.sessionPrune.lastEventId").await,
        json!(3)
    );

    // The same address, another database: one event in its journal.
    blocking(|| server.stop());
    let (other, others) = with_messages(SESSION, 4);
    blocking(|| common::cli::prune_all(&other.db, SESSION, &others[0]));
    let server = blocking(|| Server::start(&other.db, &["--listen", &address]));
    browser
        .until(
            "the notice of another database",
            "return document.getElementById('notice').textContent === 'The server now serves another database: everything was read again.'",
        )
        .await;
    // Read again: the last message has its tool part (this database never pruned it).
    browser
        .until("the other database's message", &shows_tools(last, 1))
        .await;
    let (_, health) = blocking(|| common::http::get(&server.url("/health")));
    let database = parse(&health)["databaseID"]
        .as_str()
        .expect("id")
        .to_string();
    let stored = browser
        .eval(&format!(
            "return localStorage.getItem('session-prune.lastEventId.{database}.{WORKSPACE}')"
        ))
        .await;
    assert_eq!(
        stored,
        json!("1"),
        "the page follows the new journal from its newest event"
    );
    blocking(|| prune_all_keeping_request(&server, SESSION, last));
    browser
        .until("a prune of the new database", &shows_tools(last, 0))
        .await;
    assert_eq!(
        browser.eval("return window.sessionPrune.lastEventId").await,
        json!(2)
    );
    browser.close().await;
    blocking(|| drop(server));
}
