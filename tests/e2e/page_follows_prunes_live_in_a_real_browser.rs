//! The page served at `GET /`, in a real headless Chromium: it asks for the password, lists the
//! sessions, navigates a 2,000-message session (outline, window loading as it scrolls), prunes
//! a message; a second tab on the same session redraws exactly that message without a
//! reload; after a server restart the second tab resumes from its last event id and shows the
//! prunes it missed; a clean of another session runs its dry run, then applies with progress.

use crate::common;

use common::browser::{screenshot_folder, Browser};
use common::http::{with_messages, Server, FIXTURE_DIRECTORY, WORKSPACE};
use serde_json::json;

const SESSION: &str = "ses_page_2000";
/// A second session, for the clean.
const SMALL: &str = "ses_page_clean";
const PASSWORD: &str = "page-secret";

fn message(n: usize) -> String {
    format!("msg_http_{n:04}")
}

/// The article of message `id` in the current tab, as a script expression.
fn article(id: &str) -> String {
    format!("document.querySelector('article[data-message-id=\"{id}\"]')")
}

/// Whether the article of `id` is drawn and its tool parts are `tools`.
fn shows_tools(id: &str, tools: usize) -> String {
    let a = article(id);
    format!("return !!{a} && {a}.querySelectorAll('.part[data-type=\"tool\"]').length === {tools}")
}

fn start(db: &std::path::Path, listen: &str) -> Server {
    Server::start_exactly(
        db,
        &[
            "--workspace".into(),
            format!("{WORKSPACE}={FIXTURE_DIRECTORY}"),
            "--heartbeat".into(),
            "200ms".into(),
            "--listen".into(),
            listen.into(),
        ],
        &[("SESSION_PRUNE_PASSWORD", PASSWORD)],
    )
}

/// Previews message `id` from its button in the current tab (its one tool part ticked) and
/// prunes it from the panel; returns the panel's answer.
async fn prune_in_page(browser: &Browser, id: &str) -> String {
    browser
        .click(&format!("article[data-message-id=\"{id}\"] button.preview"))
        .await;
    browser
        .until(
            "the preview",
            "return document.querySelectorAll('#panel-body label.choice input:checked').length === 1",
        )
        .await;
    browser.click("#panel-body button.prune").await;
    let result = browser
        .until(
            "the prune's answer",
            "return document.querySelector('#panel-body .result')?.textContent",
        )
        .await;
    result.as_str().expect("text").to_string()
}

/// Opens the page on the session in a new tab and gives the password.
async fn open_page(browser: &Browser, server: &Server) -> fantoccini::wd::WindowHandle {
    let url = server.url(&format!("/#ws={WORKSPACE}&session={SESSION}"));
    let tab = browser.open_tab(&url).await;
    browser
        .until(
            "the password prompt",
            "return document.getElementById('password').open",
        )
        .await;
    browser.type_into("#password-input", PASSWORD).await;
    browser.click("#password-form button").await;
    browser
        .until(
            "the outline of 2,000 messages",
            "return document.querySelectorAll('#outline-list li').length === 2000",
        )
        .await;
    browser
        .until(
            "the event stream live",
            "return document.getElementById('events-status').className === 'live'",
        )
        .await;
    tab
}

#[tokio::test(flavor = "current_thread")]
async fn the_page_prunes_and_every_open_page_follows_the_events() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let (fx, _) = with_messages(SESSION, 2000);
    let conn = fx.sql();
    common::generate::add_session(&conn, SMALL);
    for n in 0..40 {
        common::generate::insert_message(&conn, SMALL, &format!("msg_clean_{n:02}"), 1, 200);
    }
    // A skill's output is instructions the model goes on following: a clean keeps it.
    conn.execute(
        "UPDATE part SET data = json_set(data, '$.tool', 'skill') \
         WHERE message_id = 'msg_clean_07' AND json_extract(data, '$.type') = 'tool'",
        [],
    )
    .unwrap();
    drop(conn);
    let first = start(&fx.db, "127.0.0.1:0");
    let address = first.address.clone();

    // The first tab: the sessions list, then the latest window of the session.
    let one = open_page(&browser, &first).await;
    let sizes = browser
        .until(
            "the session in the sessions list",
            &format!("return document.querySelector('#sessions-list li[data-session-id=\"{SESSION}\"] .sizes')?.textContent"),
        )
        .await;
    assert!(
        sizes.as_str().expect("text").contains("2000 messages · v1"),
        "{sizes}"
    );
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('#messages-list article').length")
            .await,
        json!(200)
    );
    assert_eq!(
        browser
            .eval("return document.querySelector('#messages-list article:last-child').dataset.messageId")
            .await,
        json!(message(1999))
    );
    // Scrolling to the top reads the window before it (184 new messages, 16 shared).
    browser
        .eval("document.getElementById('messages').scrollTop = 0; return true")
        .await;
    browser
        .until(
            "the older window",
            "return document.querySelectorAll('#messages-list article').length === 384",
        )
        .await;
    let ids = browser
        .eval("return [...document.querySelectorAll('#messages-list article')].map(a => a.dataset.messageId)")
        .await;
    let expected: Vec<String> = (1616..2000).map(message).collect();
    assert_eq!(ids, json!(expected), "oldest first, no gap, no repeat");

    // The outline jumps far back: a window around message 100.
    browser
        .click(&format!(
            "#outline-list li[data-message-id=\"{}\"]",
            message(100)
        ))
        .await;
    browser
        .until("message 100", &shows_tools(&message(100), 1))
        .await;

    // The second tab, on the same place.
    let two = open_page(&browser, &first).await;
    browser
        .click(&format!(
            "#outline-list li[data-message-id=\"{}\"]",
            message(100)
        ))
        .await;
    browser
        .until(
            "message 100 in the second tab",
            &shows_tools(&message(100), 1),
        )
        .await;

    // The first tab previews message 100 and prunes it.
    browser.switch(&one).await;
    let result = prune_in_page(&browser, &message(100)).await;
    assert!(result.starts_with("pruned 1 part(s)"), "{result}");
    browser
        .until("message 100 redrawn", &shows_tools(&message(100), 0))
        .await;

    // The second tab follows without a reload: exactly that message read again, and of the
    // outline only the chunk that changed (seq 0 to 511) and the live tail (seq 1536 to 1999).
    browser.switch(&two).await;
    browser
        .until(
            "message 100 redrawn in the second tab",
            &shows_tools(&message(100), 0),
        )
        .await;
    assert_eq!(
        browser
            .eval("return window.sessionPrune.reloadedMessages")
            .await,
        json!([message(100)])
    );
    browser
        .until(
            "the outline revalidated",
            "return window.sessionPrune.outlineRowsRead === 512 + 464",
        )
        .await;
    assert_eq!(
        browser
            .eval(&format!(
                "return document.querySelector('#outline-list li[data-message-id=\"{}\"] .marks').textContent",
                message(100)
            ))
            .await,
        json!("")
    );
    assert_eq!(
        browser.eval("return window.sessionPrune.lastEventId").await,
        json!(1)
    );
    assert_eq!(
        browser.eval("return location.hash").await,
        json!(format!("#ws={WORKSPACE}&session={SESSION}"))
    );

    // The server goes away; two prunes are made while it is down; it comes back on the same
    // port. The second tab resumes after event 1 and shows both.
    let (status, _) = first.stop();
    assert_eq!(status.code(), Some(0));
    common::cli::prune_all(&fx.db, SESSION, &message(101));
    common::cli::prune_all(&fx.db, SESSION, &message(102));
    let second = start(&fx.db, &address);
    browser
        .until(
            "the missed prunes",
            "return window.sessionPrune.lastEventId === 3",
        )
        .await;
    browser
        .until("message 101 redrawn", &shows_tools(&message(101), 0))
        .await;
    browser
        .until("message 102 redrawn", &shows_tools(&message(102), 0))
        .await;
    assert_eq!(
        browser
            .eval("return window.sessionPrune.reloadedMessages")
            .await,
        json!([message(100), message(101), message(102)])
    );
    assert_eq!(
        browser
            .eval("return [...document.querySelectorAll('#log li[data-type$=\"pruned\"]')].map(l => l.dataset.eventId)")
            .await,
        json!(["3", "2", "1"])
    );
    assert_eq!(
        browser
            .eval("return window.sessionPrune.eventsApplied")
            .await,
        json!(3)
    );
    browser
        .until("the message untouched", &shows_tools(&message(103), 1))
        .await;
    browser
        .screenshot(&screenshot_folder().join("page.png"))
        .await;

    // A clean of the small session from the first tab: the dry run counts, the apply prunes
    // with progress.
    browser.switch(&one).await;
    browser
        .click(&format!("#sessions-list li[data-session-id=\"{SMALL}\"] a"))
        .await;
    browser
        .until(
            "the small session",
            "return document.querySelectorAll('#outline-list li').length === 40",
        )
        .await;
    browser.click("#clean").await;
    // The server plans it as `clean --keep-last-turns 2`: a session of fewer user turns than
    // kept (it has none) keeps every message.
    let dry = browser
        .until(
            "the clean's dry run",
            "return document.querySelector('#panel-body .summary')?.textContent.startsWith('Dry run') && document.querySelector('#panel-body .summary').textContent",
        )
        .await;
    assert!(
        dry.as_str().expect("text").starts_with(
            "Dry run: 0 message(s), 0 tool and reasoning part(s), 0 B would be pruned. 0 \
             assistant message(s) looked at, and 40 more left alone in the last 2 turn(s). \
             Text and skill output are never removed."
        ),
        "{dry}"
    );
    // A value that is not a whole number plans nothing and says what is taken.
    browser
        .eval("const k = document.getElementById('keep-turns'); k.value = '0.5'; k.dispatchEvent(new Event('change')); return true")
        .await;
    browser
        .until(
            "the clean's refusal of a turn count that is not whole",
            "const t = document.querySelector('#panel-body .summary')?.textContent ?? ''; \
             return t === 'Keep the last turns: a whole number from 0 to 4294967295.' \
             && document.querySelector('#panel-body button.apply').disabled",
        )
        .await;
    // Keeping no turn takes them all but the one holding only skill output.
    browser
        .eval("const k = document.getElementById('keep-turns'); k.value = '0'; k.dispatchEvent(new Event('change')); return true")
        .await;
    let dry = browser
        .until(
            "the clean's dry run keeping no turn",
            "const t = document.querySelector('#panel-body .summary')?.textContent ?? ''; return t.startsWith('Dry run: 39') && t",
        )
        .await;
    let dry = dry.as_str().expect("text");
    assert!(
        dry.starts_with("Dry run: 39 message(s), 39 tool and reasoning part(s), "),
        "{dry}"
    );
    assert!(
        dry.contains(
            " would be pruned. 40 assistant message(s) looked at, and 0 more left alone in the \
             last 0 turn(s); 1 with nothing to prune. Text and skill output are never removed."
        ),
        "{dry}"
    );
    assert_eq!(
        browser
            .eval("return document.getElementById('keep-turns').value")
            .await,
        json!("0")
    );
    browser.click("#panel-body button.apply").await;
    let done = browser
        .until(
            "the clean's end",
            "const t = document.querySelector('#panel-body .summary')?.textContent ?? ''; return t.startsWith('Done') && t",
        )
        .await;
    assert_eq!(done, json!("Done: 39 of 39 message(s); 39 pruned."));
    let left: String = fx
        .sql()
        .query_row(
            &format!(
                "SELECT group_concat(json_extract(data, '$.tool')) FROM part \
                 WHERE session_id = '{SMALL}' AND json_extract(data, '$.type') = 'tool'"
            ),
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(left, "skill");
    assert_eq!(
        browser
            .eval("return document.querySelector('#panel-body progress').value")
            .await,
        json!(39)
    );
    // Once every event of the clean is applied the clean's report is still there (a message
    // previewed earlier does not take the panel back), and no message of the big session was
    // read again in the other tab: the events named none of them.
    browser
        .until(
            "the clean's events",
            "return window.sessionPrune.eventsApplied === 42",
        )
        .await;
    assert_eq!(
        browser
            .eval("return document.querySelector('#panel-body .summary').textContent")
            .await,
        json!("Done: 39 of 39 message(s); 39 pruned.")
    );
    browser.switch(&two).await;
    browser
        .until(
            "the clean's events in the second tab",
            "return window.sessionPrune.eventsApplied === 42",
        )
        .await;
    assert_eq!(
        browser
            .eval("return window.sessionPrune.reloadedMessages.length")
            .await,
        json!(3)
    );

    // Seven tabs on one browser: they share one event stream (a browser gives an origin six
    // connections), so every one still loads and follows. The last prunes message 103; the
    // second tab, which reads no stream of its own, redraws it.
    for _ in 0..5 {
        open_page(&browser, &second).await;
    }
    browser
        .click(&format!(
            "#outline-list li[data-message-id=\"{}\"]",
            message(103)
        ))
        .await;
    browser
        .until("message 103", &shows_tools(&message(103), 1))
        .await;
    prune_in_page(&browser, &message(103)).await;
    browser
        .until(
            "message 103 redrawn in the seventh tab",
            &shows_tools(&message(103), 0),
        )
        .await;
    browser.switch(&two).await;
    browser
        .until(
            "message 103 redrawn in the second tab",
            &shows_tools(&message(103), 0),
        )
        .await;
    assert_eq!(
        browser
            .eval("return window.sessionPrune.reloadedMessages")
            .await,
        json!([message(100), message(101), message(102), message(103)])
    );
    browser.close().await;
    drop(second);
}
