//! The plugin's server (`npm/session-prune/plugin/server.mjs`, docs/plugin.md "The server"),
//! driven by Node as OpenCode's Bun drives it: a second process of the same database attaches
//! to the server the first started; a copy of the database, copied with the registration beside
//! it, is another file and never attaches to the original's server; a `session-prune serve`
//! started outside OpenCode is named in the answer, and is not started against again and again.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::cli::BINARY;
use crate::common::http::Server;
use crate::common::Fixture;

use serde_json::Value;

/// The plugin's folder in the source tree.
fn plugin_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("npm/session-prune/plugin")
}

/// Node running `server(options)` for `database` `calls` times, printing one JSON line per
/// call (`{url, pid, attached}` or `{error}`), then waiting for its standard input to end (the
/// server it started lives as long as it does).
fn plugin_process(database: &Path, calls: u32) -> Child {
    let script = format!(
        "import {{ server }} from {module};\n\
         const options = {{ database: {database}, binary: {binary}, quietPeriod: \"0\" }};\n\
         for (let n = 0; n < {calls}; n += 1) {{\n\
           const started = Date.now();\n\
           try {{ const found = await server(options);\n\
             console.log(JSON.stringify({{ url: found.url, pid: found.pid, attached: found.attached, ms: Date.now() - started }})); }}\n\
           catch (error) {{ console.log(JSON.stringify({{ error: error.message, ms: Date.now() - started }})); }}\n\
         }}\n\
         process.stdin.resume();\n\
         process.stdin.on('end', () => process.exit(0));\n",
        module = Value::from(format!(
            "file://{}",
            plugin_dir().join("server.mjs").display()
        )),
        database = Value::from(database.to_str().expect("utf-8 path")),
        binary = Value::from(BINARY),
    );
    Command::new("node")
        .args(["--input-type=module", "-e", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node")
}

/// The next `lines` JSON lines the process printed.
fn read_lines(child: &mut Child, lines: usize) -> Vec<Value> {
    use std::io::BufRead;
    let stdout = child.stdout.as_mut().expect("stdout");
    let mut reader = std::io::BufReader::new(stdout);
    (0..lines)
        .map(|_| {
            let mut line = String::new();
            reader.read_line(&mut line).expect("a line");
            serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line:?}"))
        })
        .collect()
}

fn end(mut child: Child) {
    drop(child.stdin.take());
    let _ = child.wait();
}

fn node_runs() -> bool {
    let found = Command::new("node").arg("--version").output().is_ok();
    if !found {
        crate::skip::cannot_run(
            "the plugin's server test did not run: node is not installed",
            "Install Node.js 18 or newer (it comes with npm).",
        );
    }
    found
}

#[test]
fn a_second_process_attaches_and_a_copy_of_the_database_does_not() {
    if !node_runs() {
        return;
    }
    let fx = Fixture::new();
    let mut first = plugin_process(&fx.db, 1);
    let started = read_lines(&mut first, 1).remove(0);
    assert_eq!(started["attached"], false, "{started}");

    let mut second = plugin_process(&fx.db, 1);
    let attached = read_lines(&mut second, 1).remove(0);
    assert_eq!(attached["attached"], true, "{attached}");
    assert_eq!(attached["url"], started["url"]);
    end(second);

    // The database and its registration copied elsewhere, while the first server runs.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let copy = elsewhere.path().join("opencode.db");
    std::fs::copy(&fx.db, &copy).expect("copy the database");
    let mut registration = fx.db.as_os_str().to_owned();
    registration.push(".session-prune-serve.json");
    std::fs::copy(
        &registration,
        format!("{}.session-prune-serve.json", copy.display()),
    )
    .expect("copy the registration");
    let mut third = plugin_process(&copy, 1);
    let own = read_lines(&mut third, 1).remove(0);
    assert_ne!(own["url"], started["url"], "{own}");
    assert_ne!(own["attached"], true, "{own}");
    end(third);
    end(first);
}

#[test]
fn a_serve_started_outside_opencode_is_named_and_not_started_against_again() {
    if !node_runs() {
        return;
    }
    let fx = Fixture::new();
    let outside = Server::start(&fx.db, &[]);
    let mut plugin = plugin_process(&fx.db, 2);
    let answers = read_lines(&mut plugin, 2);
    let error = answers[0]["error"].as_str().expect("refused");
    assert!(
        error.starts_with("another session-prune process holds the journal of ")
            && error.contains(
                "The plugin uses only a server it or another OpenCode started: stop that \
                 process, and the plugin starts its own within 30 s"
            ),
        "{error}"
    );
    assert_eq!(answers[1]["error"], answers[0]["error"]);
    assert!(
        answers[1]["ms"].as_u64() < Some(100),
        "the second request was answered from the first failure, no server started: {}",
        answers[1]
    );
    let mut stdin = plugin.stdin.take().expect("stdin");
    let _ = stdin.flush();
    drop(stdin);
    let _ = plugin.wait();
    drop(outside);
}
