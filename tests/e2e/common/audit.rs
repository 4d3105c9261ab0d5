//! The audit every test database gets when its fixture is dropped: whatever a test pruned, the
//! receipts, the journal and the rows must agree (`session-prune audit` holds). A test that
//! tampers with them on purpose calls `skip_audit` on its fixture.

use std::path::Path;

use pruning_adapters::opencode::{OpenCodeStore, StoreOptions};
use pruning_engine::{AuditReport, AuditScope, Journal};

/// The audit of the database at `db` with the journal at `journal` (none when the file is
/// absent), or `None` when there is nothing to audit (no database, or not one the store
/// opens: a test of a damaged file).
pub fn audit_of(db: &Path, journal: &Path) -> Option<AuditReport> {
    if !db.is_file() {
        return None;
    }
    let store = OpenCodeStore::open(db, StoreOptions::default()).ok()?;
    let journal = if journal.exists() {
        // A journal a killed process left unclosed is repaired by a writable open.
        Some(match Journal::open_read_only(journal) {
            Ok(journal) => journal,
            Err(_) => Journal::open(journal).expect("open the journal to audit it"),
        })
    } else {
        None
    };
    Some(pruning_engine::audit(&store, journal.as_ref(), AuditScope::All).expect("audit"))
}

/// Panics with the report when the audit of `db` and `journal` finds a discrepancy. Does
/// nothing while the thread is already panicking (the test failed for its own reason).
pub fn assert_audit_holds(db: &Path, journal: &Path) {
    if std::thread::panicking() {
        return;
    }
    if let Some(report) = audit_of(db, journal) {
        assert!(
            report.ok,
            "the audit of {} found discrepancies: {:#?}",
            db.display(),
            report.discrepancies
        );
    }
}
