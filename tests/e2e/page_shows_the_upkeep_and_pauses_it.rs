//! The page in a real headless Chromium beside `serve --auto-clean`: its upkeep view says what
//! the last run did once the run's event arrives, the event log shows the run, and the pause
//! switch pauses the schedule on the server.

use crate::common;

use common::browser::Browser;
use common::http::{get, parse, with_messages, Server, WORKSPACE};
use serde_json::json;

const SESSION: &str = "ses_page_upkeep";

/// Runs a blocking client call (reqwest's blocking client, a process) beside the browser's.
fn blocking<T>(call: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(call)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_each_run_and_pauses_the_schedule() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (fx, _) = with_messages(SESSION, 4);
    let server =
        blocking(|| Server::start(&fx.db, &["--auto-clean", "2s", "--keep-last-turns", "0"]));
    browser
        .open_tab(&server.url(&format!("/#ws={WORKSPACE}&session={SESSION}")))
        .await;
    browser
        .until(
            "the upkeep before its first run",
            "return !document.getElementById('upkeep').hidden && \
             document.getElementById('upkeep-body').textContent === 'No clean has run yet.'",
        )
        .await;
    browser
        .until(
            "the first run drawn",
            "return document.getElementById('upkeep-body').textContent.startsWith('Last clean: run 1 ')",
        )
        .await;
    let (_, state) = blocking(|| get(&server.url("/api/session-pruning/upkeep")));
    let pruned = parse(&state)["lastRun"]["counts"]["pruned"].clone();
    assert!(pruned.as_u64() > Some(0), "{state}");
    let shown = browser
        .eval("return document.getElementById('upkeep-body').textContent")
        .await;
    assert!(
        shown
            .as_str()
            .is_some_and(|text| text.contains(&format!("Pruned {pruned} message(s)"))),
        "{shown}"
    );
    assert_eq!(
        browser
            .eval(
                "return document.querySelector('#log li[data-type=\"rpc.codenomad.session-pruning.upkeep\"] code')?.textContent"
            )
            .await,
        json!("(run)")
    );

    browser.click("#upkeep-pause").await;
    browser
        .until(
            "the schedule paused",
            "return document.getElementById('upkeep-pause').textContent === 'Resume' && \
             document.getElementById('upkeep-state').textContent.startsWith('paused')",
        )
        .await;
    let (_, state) = blocking(|| get(&server.url("/api/session-pruning/upkeep")));
    assert_eq!(parse(&state)["paused"], true, "{state}");
    blocking(|| server.stop());
    browser.close().await;
}
