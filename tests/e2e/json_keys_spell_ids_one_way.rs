//! Every `--json` output spells an id key one way, as the contract spells `sessionID`:
//! `receiptID`, `intentID`, `partIDs`, never `receiptId`. The test walks every key of every
//! command's document after a prune, a clean and a restore.

use crate::common;

use common::cli::{json, run, run_with_stdin};
use common::*;
use serde_json::Value;

/// Every key of `value`, at any depth, with the path that leads to it.
fn keys(value: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                out.push((path.to_string(), key.clone()));
                keys(inner, &format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                keys(item, &format!("{path}[{index}]"), out);
            }
        }
        _ => {}
    }
}

/// Whether `key` spells an id the other way: `...Id` or `...Ids` after a lowercase letter.
fn spelled_otherwise(key: &str) -> bool {
    let stem = key.strip_suffix("Ids").or_else(|| key.strip_suffix("Id"));
    stem.is_some_and(|stem| stem.chars().last().is_some_and(|c| c.is_ascii_lowercase()))
}

/// The documents of `args` (one JSON document, or JSON lines).
fn documents(out: &std::process::Output) -> Vec<Value> {
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(doc) => vec![doc],
        Err(_) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect(),
    }
}

#[test]
fn every_json_output_spells_ids_as_the_contract_does() {
    let fx = Fixture::new();
    let quiet = ["--quiet-period", "0", "--json"];
    common::cli::prune_all(&fx.db, MANY_TURNS, TURN1);
    let clean = run(
        &fx.db,
        &[
            &quiet[..],
            &[
                "clean",
                "--all",
                "--keep-last-turns",
                "0",
                "--apply",
                "--archive",
            ],
        ]
        .concat(),
    );
    assert_eq!(clean.status.code(), Some(0));
    let receipt = common::archive::unrestored(&fx.db)[0].clone();
    let history = run(
        &fx.db,
        &["--json", "history", MANY_TURNS, "--purpose", "prune"],
    );
    let preview = json(&run(
        &fx.db,
        &[&quiet[..], &["preview", MANY_TURNS, TURN5]].concat(),
    ));
    let revision = preview["revision"].as_str().unwrap().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["sessions"],
        vec!["stats"],
        vec!["messages", MANY_TURNS],
        vec!["window", MANY_TURNS],
        vec!["outline", MANY_TURNS],
        vec!["preview", MANY_TURNS, TURN5],
        vec!["history", MANY_TURNS, "--query", "TOOL_CANARY"],
        vec!["history", MANY_TURNS, "--purpose", "prune"],
        vec![
            "prune",
            MANY_TURNS,
            TURN5,
            "--revision",
            &revision,
            "--all-technical",
            "--dry-run",
        ],
        vec!["clean", "--all", "--keep-last-turns", "0"],
        vec!["receipts"],
        vec!["restore", &receipt, "--dry-run"],
        vec!["restore", &receipt],
        vec!["archive", "stats"],
        vec!["archive", "purge", "--older-than", "30d", "--dry-run"],
        vec!["audit"],
        vec!["events"],
        vec!["vacuum"],
    ];
    let mut seen = 0;
    let mut wrong = Vec::new();
    for args in &commands {
        let out = run(&fx.db, &[&quiet[..], args].concat());
        assert!(
            !out.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for doc in documents(&out) {
            let mut found = Vec::new();
            keys(&doc, "", &mut found);
            seen += found.len();
            wrong.extend(
                found
                    .into_iter()
                    .filter(|(_, key)| spelled_otherwise(key))
                    .map(|(path, key)| format!("{args:?} {path}.{key}")),
            );
        }
    }
    let batch = run_with_stdin(
        &fx.db,
        &[
            "--quiet-period",
            "0",
            "--json",
            "prune-batch",
            MANY_TURNS,
            "--candidates",
            "-",
        ],
        &history.stdout,
    );
    for doc in documents(&batch) {
        let mut found = Vec::new();
        keys(&doc, "", &mut found);
        wrong.extend(
            found
                .into_iter()
                .filter(|(_, k)| spelled_otherwise(k))
                .map(|(p, k)| format!("prune-batch {p}.{k}")),
        );
    }
    assert!(seen > 200, "{seen} keys walked");
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(
        !spelled_otherwise("sessionID")
            && spelled_otherwise("receiptId")
            && spelled_otherwise("partIds")
    );
}
