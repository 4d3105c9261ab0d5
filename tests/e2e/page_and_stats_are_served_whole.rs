//! The page is served without the password (it holds no data; the API calls it makes need
//! the password), with every file it loads and a policy that keeps it to its own origin; the
//! stats route answers what `stats --json` prints, the largest sessions limited to the
//! workspace's.

use crate::common;

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::Method;
use common::app::{json_request, test_workspaces, App};
use common::http::{parse, OTHER_WORKSPACE, WORKSPACE};
use common::Fixture;
use serde_json::Value;

/// The files `text` names: `src="/page/..."`/`href="/page/..."` and `from "./....js"`.
fn named_files(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for marker in ["\"/page/", "from \"./"] {
        for (at, _) in text.match_indices(marker) {
            let rest = &text[at + marker.len()..];
            let end = rest.find('"').expect("a closing quote");
            names.insert(rest[..end].to_string());
        }
    }
    names
}

/// `serve` says where the page is, and the page is there.
#[test]
fn serve_prints_the_page_url_and_the_page_answers_there() {
    use std::io::{BufRead, BufReader, Read, Write};
    let fx = Fixture::new();
    let mut child = crate::common::cli::session_prune()
        .arg("--db")
        .arg(&fx.db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("SESSION_PRUNE_PASSWORD")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let listening = lines.next().unwrap().unwrap();
    let address = listening
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{listening}"))
        .to_string();
    assert_eq!(
        lines.next().unwrap().unwrap(),
        format!("the page: open http://{address}/ in a browser")
    );
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("content-type: text/html; charset=utf-8\r\n"),
        "{answer}"
    );
}

#[test]
fn the_page_and_every_file_it_loads_are_served_without_the_password() {
    let fx = Fixture::new();
    let app = App::with(&fx, test_workspaces(), Some("s3cret"));
    let page = app.answer(json_request(Method::GET, "/", Body::empty()));
    assert_eq!(page.status, 200);
    assert_eq!(page.headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(
        page.headers["content-security-policy"],
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
    // Every file the page names, and every module those name, is served; none is missing.
    let mut seen = BTreeSet::new();
    let mut next: Vec<String> = named_files(&page.body).into_iter().collect();
    while let Some(name) = next.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let file = app.answer(json_request(
            Method::GET,
            &format!("/page/{name}"),
            Body::empty(),
        ));
        assert_eq!(file.status, 200, "{name}");
        let kind = if name.ends_with(".css") {
            "text/css"
        } else {
            "text/javascript"
        };
        assert_eq!(
            file.headers["content-type"],
            format!("{kind}; charset=utf-8"),
            "{name}"
        );
        next.extend(named_files(&file.body));
    }
    assert_eq!(
        seen,
        [
            "api.js",
            "app.css",
            "app.js",
            "clean.js",
            "events.js",
            "messages.js",
            "open-session.js",
            "overview.js",
            "panel.js",
            "reasons.js",
            "session.js",
            "sessions.js",
            "state.js",
            "stream.js",
            "upkeep-status.js",
            "upkeep.js",
        ]
        .map(String::from)
        .into_iter()
        .collect()
    );
    // Any other name is a 404 (the files are built into the binary: nothing is read from the
    // disk); a path that is no route is one behind the password, as every unknown route.
    for (path, expected) in [
        ("/page/index.html", 404),
        ("/page/..%2FCargo.toml", 404),
        ("/page/../Cargo.toml", 401),
        ("/page/", 401),
        ("/page/app.js/x", 401),
    ] {
        let (status, _) = app.get(path);
        assert_eq!(status, expected, "{path}");
    }
    assert_eq!(app.get("/health").0, 401);
    assert_eq!(
        app.get(&format!("/api/workspaces/{WORKSPACE}/stats")).0,
        401
    );
}

#[test]
fn stats_answer_what_the_cli_prints_with_the_workspaces_largest_sessions() {
    let fx = Fixture::new();
    let cli = common::cli::run(&fx.db, &["stats", "--json"]);
    common::cli::assert_exit(&cli, 0);
    let printed = common::cli::json(&cli);
    let app = App::with(&fx, test_workspaces(), None);
    let (status, body) = app.get(&format!("/api/workspaces/{WORKSPACE}/stats"));
    assert_eq!(status, 200, "{body}");
    // Every fixture session lies in the workspace's directory: the same document.
    assert_eq!(parse(&body), printed);
    let (_, body) = app.get(&format!("/api/workspaces/{WORKSPACE}/stats?top=3"));
    let three = parse(&body);
    assert_eq!(
        three["sessions"],
        Value::Array(printed["sessions"].as_array().unwrap()[..3].to_vec())
    );
    // A workspace that holds none of them: the file's volumes, no session.
    let (_, body) = app.get(&format!("/api/workspaces/{OTHER_WORKSPACE}/stats"));
    let other = parse(&body);
    assert_eq!(other["sessions"], Value::Array(vec![]));
    assert_eq!(other["tables"], printed["tables"]);
    // Read-only: the file is unchanged.
    let digest = fx.file_digest();
    app.get(&format!("/api/workspaces/{WORKSPACE}/stats?top=100"));
    assert_eq!(fx.file_digest(), digest);
}

#[test]
fn a_database_that_cannot_be_measured_is_a_500_without_sqlites_words() {
    let fx = Fixture::new();
    // Damaged on purpose: the audit on drop would report it.
    fx.skip_audit();
    // Pages of table rows overwritten (a damaged disk): the scan of every row fails on them.
    fx.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    let len = std::fs::metadata(&fx.db).unwrap().len();
    let mut bytes = std::fs::read(&fx.db).unwrap();
    let from = usize::try_from(len / 2).unwrap();
    bytes[from..from + 64 * 1024].fill(0xA5);
    std::fs::write(&fx.db, &bytes).unwrap();
    let digest = fx.file_digest();
    let app = App::with(&fx, test_workspaces(), None);
    let (status, body) = app.get(&format!("/api/workspaces/{WORKSPACE}/stats"));
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        parse(&body),
        serde_json::json!({ "error": "measuring the database failed: the server's log says why" })
    );
    assert_eq!(fx.file_digest(), digest);
}

#[test]
fn stats_are_estimated_unless_asked_exact_and_a_word_that_is_no_answer_is_a_400() {
    let fx = Fixture::work();
    let printed = |extra: &[&str]| {
        let mut args = vec!["--json", "stats"];
        args.extend_from_slice(extra);
        let out = common::cli::run(&fx.db, &args);
        common::cli::assert_exit(&out, 0);
        common::cli::json(&out)
    };
    // The work fixture's sessions lie outside the test workspace: the server lists none of
    // them, the CLI every one; the rest is the same document.
    let without_sessions = |mut doc: Value| {
        doc.as_object_mut().expect("a document").remove("sessions");
        doc
    };
    let estimated = without_sessions(printed(&[]));
    let exact = without_sessions(printed(&["--exact"]));
    assert_ne!(estimated["estimate"], Value::Null);
    assert_eq!(exact["estimate"], Value::Null);
    let app = App::with(&fx, test_workspaces(), None);
    let route = format!("/api/workspaces/{WORKSPACE}/stats");
    for (query, expected) in [
        ("", &estimated),
        ("?exact=false", &estimated),
        ("?exact=true", &exact),
        ("?top=10&exact=true", &exact),
    ] {
        let (status, body) = app.get(&format!("{route}{query}"));
        assert_eq!(status, 200, "{query}: {body}");
        let answer = parse(&body);
        assert_eq!(answer["sessions"], Value::Array(vec![]), "{query}");
        assert_eq!(&without_sessions(answer), expected, "{query}");
    }
    let digest = fx.file_digest();
    for bad in [
        "?exact=yes",
        "?exact=",
        "?exact=TRUE",
        "?exact=true&exact=false",
    ] {
        let (status, body) = app.get(&format!("{route}{bad}"));
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(parse(&body)["field"], "exact", "{bad}");
    }
    assert_eq!(fx.file_digest(), digest);
}
