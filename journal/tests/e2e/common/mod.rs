//! Shared test support: record fixtures and a simulated disk backend.
#![allow(dead_code)]

pub mod disk;

use std::path::PathBuf;

use pruning_journal::{Commit, Intent, IntentState, Selection};
use tempfile::TempDir;
use uuid::Uuid;

/// ms since epoch used as the base time of every fixture.
pub const T0_MS: i64 = 1_760_000_000_000;

/// The journal file inside `dir`.
pub fn journal_path(dir: &TempDir) -> PathBuf {
    dir.path().join("journal.redb")
}

/// A request key distinct per `n`.
pub fn key(n: u8) -> [u8; 32] {
    [n; 32]
}

/// A pending intent with request key `key(n)`, created at `T0_MS + n` ms.
pub fn intent(n: u8) -> Intent {
    Intent {
        intent_id: Uuid::now_v7(),
        request_key: key(n),
        session_id: format!("ses_{n}"),
        message_id: format!("msg_{n}"),
        revision: "a".repeat(64),
        selection: Selection::Indexes(vec![1, 3, u32::from(n)]),
        created_at_ms: T0_MS + i64::from(n),
        state: IntentState::Pending,
    }
}

/// A commit of `intent` removing `removed` parts, 500 ms after its creation.
pub fn commit_for(intent: &Intent, removed: u32) -> Commit {
    Commit {
        intent_id: intent.intent_id,
        event_id: Uuid::now_v7(),
        revision_after: format!("{:064x}", removed),
        removed_count: removed,
        committed_at_ms: intent.created_at_ms + 500,
        kind: pruning_journal::EventKind::Pruned,
        receipt_digest: None,
    }
}

/// `intent` as it reads back after `commit` gave it `seq`.
pub fn committed(intent: &Intent, commit: &Commit, seq: u64) -> Intent {
    Intent {
        state: IntentState::Committed {
            seq,
            committed_at_ms: commit.committed_at_ms,
        },
        ..intent.clone()
    }
}
