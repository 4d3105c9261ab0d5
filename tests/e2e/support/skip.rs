//! The one rule for a test that cannot run here (a tool, a binary or a permission is missing):
//! outside CI it prints `SKIPPED: <why>. <how to make it run>` on stderr and the test returns;
//! under CI it fails with the same words, since there a skipped test would hide what it pins.
//! CI is `CI` set to `true` (any case) or `1`, as CI services and `CI=true .ci/run` set it.
#![allow(dead_code)]

/// Whether this run is CI's: `CI` is `true` (any case) or `1`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true") || value == "1")
}

/// Says that the calling test cannot run, because of `why`; `fix` says what makes it run.
///
/// Panics under CI ([`in_ci`]).
pub fn cannot_run(why: &str, fix: &str) {
    assert!(
        !in_ci(),
        "under CI a test that cannot run is a failure: {why}. {fix}"
    );
    eprintln!("SKIPPED: {why}. {fix}");
}
