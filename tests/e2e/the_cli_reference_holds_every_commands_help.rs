//! docs/cli.md ends with every command's `--help` (its own flags; the global ones once, from
//! `session-prune --help`), so the reference cannot drift from the binary. With
//! `SESSION_PRUNE_WRITE_CLI_REFERENCE=1` the test writes the section instead of checking it.

use std::path::Path;

/// Where the generated section starts and ends in docs/cli.md.
const BEGIN: &str = "<!-- generated: every command's --help (tests/e2e/the_cli_reference_holds_every_commands_help.rs) -->";
const END: &str = "<!-- end of generated help -->";

/// `session-prune ARGS --help`, as a pipe (not a terminal) gets it.
fn help(args: &[&str]) -> String {
    let out = crate::common::cli::session_prune()
        .args(args)
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .expect("run session-prune");
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

/// The command names a help text lists under `Commands:`, `help` left out.
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// `help` without the lines of the global options, which every command repeats.
fn without_globals(help: &str, globals: &[String]) -> String {
    let mut kept = Vec::new();
    let mut lines = help.lines().peekable();
    while let Some(line) = lines.next() {
        if globals.iter().any(|global| global == line) {
            // The option's description lines follow, indented deeper.
            while lines
                .peek()
                .is_some_and(|next| next.starts_with("          "))
            {
                lines.next();
            }
            continue;
        }
        kept.push(line);
    }
    kept.join("\n").trim_end().to_string()
}

/// The section as the binary prints it now.
fn generated() -> String {
    let top = help(&[]);
    let globals: Vec<String> = top
        .lines()
        .skip_while(|line| *line != "Options:")
        .skip(1)
        .filter(|line| line.starts_with("  ") && !line.starts_with("          "))
        .filter(|line| !line.contains("--help") && !line.contains("--version"))
        .map(str::to_string)
        .collect();
    assert!(
        globals.len() >= 5,
        "global options of `--help`: {globals:?}"
    );
    let mut section = vec![BEGIN.to_string(), String::new()];
    section.push("### `session-prune`".into());
    section.push(String::new());
    section.push(format!("```text\n{}\n```", top.trim_end()));
    let mut paths: Vec<Vec<String>> = commands(&top).into_iter().map(|c| vec![c]).collect();
    let mut at = 0;
    while at < paths.len() {
        let args: Vec<&str> = paths[at].iter().map(String::as_str).collect();
        let text = help(&args);
        let nested: Vec<Vec<String>> = commands(&text)
            .into_iter()
            .map(|c| [paths[at].clone(), vec![c]].concat())
            .collect();
        section.push(String::new());
        section.push(format!("### `session-prune {}`", args.join(" ")));
        section.push(String::new());
        section.push(format!(
            "```text\n{}\n```",
            without_globals(&text, &globals)
        ));
        paths.splice(at + 1..at + 1, nested);
        at += 1;
    }
    section.push(String::new());
    section.push(END.to_string());
    section.join("\n")
}

#[test]
fn docs_cli_md_ends_with_the_help_of_every_command_as_the_binary_prints_it() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let doc = std::fs::read_to_string(&path).expect("docs/cli.md");
    let begin = doc
        .find(BEGIN)
        .expect("docs/cli.md has the generated section's start");
    let end = doc
        .find(END)
        .expect("docs/cli.md has the generated section's end")
        + END.len();
    let now = generated();
    if std::env::var_os("SESSION_PRUNE_WRITE_CLI_REFERENCE").is_some() {
        let written = format!("{}{now}{}", &doc[..begin], &doc[end..]);
        std::fs::write(&path, written).expect("write docs/cli.md");
        return;
    }
    assert!(
        doc[begin..end] == now,
        "docs/cli.md's generated help is not what the binary prints: run \
         `SESSION_PRUNE_WRITE_CLI_REFERENCE=1 cargo test --test e2e the_cli_reference` and \
         review the change"
    );
}

#[test]
fn every_command_of_the_binary_has_its_section() {
    let now = generated();
    for command in commands(&help(&[])) {
        assert!(
            now.contains(&format!("### `session-prune {command}`")),
            "{command}"
        );
    }
    assert!(now.contains("### `session-prune archive purge`"));
    assert!(!now.contains("### `session-prune help`"));
}
