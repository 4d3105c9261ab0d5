//! A new journal is built under a temporary name and linked into place whole: a creation
//! interrupted before the link leaves no journal file at the path, only a temporary file that the
//! next creation replaces.

use pruning_journal::Journal;

#[test]
fn leftover_temporary_file_is_replaced_and_the_journal_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.prune-journal");
    let leftover = dir
        .path()
        .join(format!(".j.prune-journal.creating-{}", std::process::id()));
    std::fs::write(&leftover, vec![0xAB; 73_728]).unwrap();

    let journal = Journal::open(&path).unwrap();
    assert_eq!(journal.last_seq().unwrap(), 0);
    assert!(!leftover.exists());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["j.prune-journal".to_string()]);
}

#[test]
fn journal_path_that_is_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let result = Journal::open(dir.path());
    assert!(
        matches!(result, Err(pruning_journal::OpenError::Database(_))),
        "{:?}",
        result.err()
    );
}

#[test]
fn temporary_files_of_dead_processes_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.prune-journal");
    // Process ids above the kernel's maximum (4194304) are never alive.
    let dead = dir.path().join(".j.prune-journal.creating-4294967295");
    std::fs::write(&dead, b"partial").unwrap();
    let unrelated = dir.path().join(".other.creating-4294967295");
    std::fs::write(&unrelated, b"keep").unwrap();
    Journal::open(&path).unwrap();
    assert!(!dead.exists());
    assert!(unrelated.exists());
}
