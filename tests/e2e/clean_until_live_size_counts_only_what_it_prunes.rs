//! `clean --until-live-size` counts toward its target only the prunes that free something: a
//! prune the fence refuses (a session OpenCode updated within the quiet period) frees no row
//! data, so it neither lowers the estimate nor stops the clean early; and a size that is not a
//! whole number of bytes, or does not fit in 64 bits, is bad input rather than rounded.

use crate::common;

use crate::clean_until_live_size_prunes_oldest_first::clean;
use common::cli::{assert_exit, json, run};
use common::Fixture;

/// The session of the fixture's oldest assistant message, updated by OpenCode just now.
fn oldest_session_busy(fx: &Fixture) {
    let now = pruning_engine::now_ms();
    fx.exec(&format!(
        "UPDATE session SET time_updated = {now} WHERE id = \
           (SELECT session_id FROM message WHERE json_extract(data, '$.role') = 'assistant' \
            ORDER BY time_created LIMIT 1)"
    ));
}

#[test]
fn a_refused_prune_does_not_count_toward_the_target() {
    let fx = Fixture::new();
    oldest_session_busy(&fx);
    let dry = clean(&fx, "1900000", false);
    let applied = clean(&fx, "1900000", true);
    for report in [&dry, &applied] {
        assert_ne!(report["blocked"], serde_json::json!({}), "{report}");
        let until = &report["untilLiveSize"];
        // Only what was (or would be) pruned lowers the estimate.
        assert_eq!(
            until["estimateAfter"].as_u64().unwrap(),
            until["liveBefore"].as_u64().unwrap() - report["bytes"].as_u64().unwrap(),
            "{report}"
        );
    }
}

#[test]
fn a_clean_that_prunes_nothing_does_not_reach_the_target() {
    let fx = Fixture::new();
    // Every session updated just now: every prune is refused.
    let now = pruning_engine::now_ms();
    fx.exec(&format!("UPDATE session SET time_updated = {now}"));
    let applied = clean(&fx, "1500000", true);
    assert_eq!(applied["pruned"], 0, "{applied}");
    let until = &applied["untilLiveSize"];
    assert_eq!(until["estimateAfter"], until["liveBefore"], "{applied}");
    assert_eq!(until["reached"], false, "{applied}");
}

/// A fraction of a plain byte, or an amount beyond 2^64 - 1, is bad input; a fraction of a
/// larger unit (`1.1GiB`, `1.0005KB`) is read rounded down to a whole byte.
#[test]
fn a_fractional_or_overflowing_size_is_bad_input() {
    let fx = Fixture::new();
    for (size, bytes) in [("1.0005KB", 1000), ("1.1GiB", 1_181_116_006u64)] {
        let out = run(
            &fx.db,
            &["--json", "clean", "--all", "--until-live-size", size],
        );
        assert_exit(&out, 0);
        assert_eq!(json(&out)["untilLiveSize"]["target"], bytes, "{size}");
    }
    let digest = fx.file_digest();
    for size in ["1.5B", "0.5B", "1.5", "99999999EB", "20EiB"] {
        let out = run(
            &fx.db,
            &["clean", "--all", "--until-live-size", size, "--apply"],
        );
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--until-live-size"), "{size}: {err}");
    }
    assert_eq!(fx.file_digest(), digest);
}
