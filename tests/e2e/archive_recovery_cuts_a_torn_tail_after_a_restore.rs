//! Opening the archive for writing cuts a torn last frame (an append a crash stopped) when no
//! receipt names an entry there. A restore's receipt names no entry of its own (it records the
//! archive hash of the prune it undid, whose entry its prune's receipt names): after a restore,
//! a torn tail is still cut and the next `--archive` prune goes ahead.

use crate::common;

use std::io::Write;

use common::archive::{archive_of, audit_report, prune_archived, restore_out};
use common::cli::{assert_exit, json, run};
use common::*;

#[test]
fn a_torn_tail_is_cut_after_a_restore_and_the_next_archived_prune_commits() {
    let fx = Fixture::new();
    let pruned = prune_archived(&fx.db, MANY_TURNS, TURN5, None);
    assert_exit(&restore_out(&fx.db, &pruned), 0);
    // A crash tore the next append: a frame's length prefix and 3 bytes of its head.
    let archive = archive_of(&fx.db);
    let whole = std::fs::metadata(&archive).expect("archive").len();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&archive)
        .expect("archive")
        .write_all(&[0x40, 0, 0, 0, b'a', b'b', b'c'])
        .expect("tear");
    let stats = json(&run(&fx.db, &["--json", "archive", "stats"]));
    assert_eq!(stats["unreadableAt"], whole, "{stats}");

    let next = {
        let revision = common::archive::revision(&fx.db, MANY_TURNS, TURN1);
        run(
            &fx.db,
            &[
                "--quiet-period",
                "0",
                "prune",
                MANY_TURNS,
                TURN1,
                "--revision",
                &revision,
                "--all-technical",
                "--archive",
            ],
        )
    };
    assert_exit(&next, 0);
    let stats = json(&run(&fx.db, &["--json", "archive", "stats"]));
    assert_eq!(stats["unreadableAt"], serde_json::Value::Null, "{stats}");
    assert_eq!(stats["entries"], 2, "{stats}");
    let (code, report) = audit_report(&fx.db);
    assert_eq!(code, 0, "{report}");
}
