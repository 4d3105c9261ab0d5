//! A second open of a journal file that is held (here by a handle in the same process) keeps
//! retrying for the retry window, then reports `OpenError::Locked` with the path; once the
//! holder is dropped the file opens.

use crate::common;

use std::time::{Duration, Instant};

use common::journal_path;
use pruning_journal::{Journal, OpenError};

#[test]
fn reports_locked_after_the_retry_window() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(&dir);
    let holder = Journal::open(&path).unwrap();

    let window = Duration::from_millis(100);
    let started = Instant::now();
    let error = Journal::open_with_retry(&path, window).unwrap_err();
    let elapsed = started.elapsed();
    match error {
        OpenError::Locked {
            path: locked,
            waited,
        } => {
            assert_eq!(locked, path);
            assert!(waited >= window, "waited {waited:?}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(elapsed >= window, "returned after {elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(1),
        "returned after {elapsed:?}"
    );

    drop(holder);
    Journal::open_with_retry(&path, window).unwrap();
}
