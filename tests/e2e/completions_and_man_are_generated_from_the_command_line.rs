//! `completions SHELL` and `man` print what clap knows of the command line: every command and
//! flag, with no database needed; `--json` and a missing `--dir` are refused with exit 2 and
//! nothing printed or written.

use std::process::Command;

use crate::common::cli::{assert_exit, assert_json_error, json, run};

/// Every command of `session-prune --help` (the page lists them), `help` aside.
fn commands() -> Vec<String> {
    let out = run("/nonexistent/opencode.db".as_ref(), &["--help"]);
    assert_exit(&out, 0);
    let help = String::from_utf8(out.stdout).unwrap();
    let listed: Vec<String> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .split("Options:")
        .next()
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect();
    assert!(listed.len() >= 20, "{listed:?}");
    listed
}

#[test]
fn bash_completion_loads_and_completes_every_command() {
    let dir = tempfile::tempdir().unwrap();
    // No database is opened: the path does not exist.
    let out = run(&dir.path().join("none.db"), &["completions", "bash"]);
    assert_exit(&out, 0);
    let script = dir.path().join("session-prune.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // bash itself loads the script, then completes the word after `session-prune`.
    let probe = format!(
        "source {}; COMP_WORDS=(session-prune ''); COMP_CWORD=1; COMP_LINE='session-prune '; COMP_POINT=14; \
         _session__prune session-prune '' session-prune; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let completed = Command::new("bash").args(["-c", &probe]).output().unwrap();
    assert_exit(&completed, 0);
    let words: Vec<String> = String::from_utf8(completed.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    for command in commands() {
        assert!(
            words.contains(&command),
            "{command} not completed: {words:?}"
        );
    }
    // After a command: its flags, its subcommands, a flag's values.
    for (line, expected) in [
        ("clean --ke", vec!["--keep-last-turns"]),
        ("prune-batch --cand", vec!["--candidates"]),
        ("archive pu", vec!["purge"]),
        ("archive purge --old", vec!["--older-than"]),
        ("serve --log-format ''", vec!["text", "json"]),
        ("completions p", vec!["powershell"]),
    ] {
        assert_eq!(complete(&script, line), expected, "session-prune {line}");
    }
    assert!(!dir.path().join("none.db").exists());
}

/// What bash completes for the last word of `session-prune LINE` (words split on spaces; `''`
/// is an empty last word), with the script at `script` loaded.
fn complete(script: &std::path::Path, line: &str) -> Vec<String> {
    let probe = format!(
        "source {}; COMP_WORDS=(session-prune {line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
         _session__prune session-prune \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    assert_exit(&out, 0);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|word| !word.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn every_shell_gets_a_script_naming_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "elvish", "fish", "powershell", "zsh"] {
        let out = run(&dir.path().join("none.db"), &["completions", shell]);
        assert_exit(&out, 0);
        let script = String::from_utf8(out.stdout).unwrap();
        for flag in ["keep-last-turns", "prune-batch", "quiet-period"] {
            assert!(script.contains(flag), "{shell} script lacks {flag}");
        }
    }
}

#[test]
fn an_unknown_shell_and_json_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    let unknown = run(&db, &["completions", "nushell"]);
    assert_exit(&unknown, 2);
    assert!(unknown.stdout.is_empty());
    assert!(String::from_utf8_lossy(&unknown.stderr)
        .contains("[possible values: bash, elvish, fish, powershell, zsh]"));
    let json = run(&db, &["--json", "completions", "bash"]);
    assert_json_error(
        &json,
        2,
        "--json does not apply here: completions prints a shell script",
    );
    let page = run(&db, &["--json", "man"]);
    assert_json_error(
        &page,
        2,
        "--json does not apply here: man prints a roff page",
    );
}

#[test]
fn man_prints_the_main_page_and_writes_one_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    let out = run(&db, &["man"]);
    assert_exit(&out, 0);
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH session-prune 1"), "{page}");
    for command in commands() {
        assert!(
            page.contains(&format!(
                "session\\-prune\\-{}(1)",
                command.replace('-', "\\-")
            )),
            "main page does not point to {command}"
        );
    }

    let pages = dir.path().join("man1");
    std::fs::create_dir(&pages).unwrap();
    let listed = run(&db, &["--json", "man", "--dir", pages.to_str().unwrap()]);
    assert_exit(&listed, 0);
    let written: Vec<String> = json(&listed)["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|path| path.as_str().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = commands()
        .iter()
        .map(|command| format!("session-prune-{command}.1"))
        .chain([
            "session-prune.1".into(),
            "session-prune-archive-purge.1".into(),
            "session-prune-archive-stats.1".into(),
            "session-prune-journal-new-epoch.1".into(),
        ])
        .map(|name| pages.join(name).display().to_string())
        .collect();
    expected.sort();
    assert_eq!(written, expected);
    let mut on_disk: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|entry| entry.unwrap().path().display().to_string())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, expected);
    let clean = std::fs::read_to_string(pages.join("session-prune-clean.1")).unwrap();
    // Every page has the main page's footer, and `man` may read it.
    let footer = format!(
        ".TH session-prune-clean 1  \"session-prune {}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(clean.contains(&footer), "{clean}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(pages.join("session-prune-clean.1"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    // The page on stdout is the main page written into the folder: it names no `help` page.
    assert_eq!(
        page,
        std::fs::read_to_string(pages.join("session-prune.1")).unwrap()
    );
    assert!(!page.contains("session\\-prune\\-help(1)"), "{page}");
    assert!(clean.contains("keep\\-last\\-turns"), "{clean}");
}

#[test]
fn man_into_a_file_or_over_a_folder_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    let file = dir.path().join("man1");
    std::fs::write(&file, "not a folder").unwrap();
    let out = run(&db, &["--json", "man", "--dir", file.to_str().unwrap()]);
    assert_json_error(&out, 2, "man1 is not a folder: give an existing folder");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a folder");

    let pages = dir.path().join("pages");
    std::fs::create_dir_all(pages.join("session-prune-clean.1")).unwrap();
    let out = run(&db, &["--json", "man", "--dir", pages.to_str().unwrap()]);
    assert_json_error(
        &out,
        2,
        "holds a folder named session-prune-clean.1, where that page goes",
    );
    let left: Vec<_> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("session-prune-clean.1")]
    );
}

#[test]
fn man_into_a_missing_folder_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("man1");
    let out = run(
        &dir.path().join("none.db"),
        &["--json", "man", "--dir", missing.to_str().unwrap()],
    );
    assert_json_error(&out, 2, "does not exist: give an existing folder");
    assert!(!missing.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
