//! The journal's integration tests, in one test binary: one module per behaviour, named after
//! it, each on a real redb file (or a storage backend that fails on purpose, in `common`).

mod common;

mod a_commit_keeps_its_receipts_digest;
mod an_epoch_numbers_after_the_journals_before;
mod binding_refuses_other_database;
mod commit_assigns_consecutive_sequences;
mod events_after_pages_by_cursor;
mod failed_fsync_poisons_writes;
mod group_commit_is_one_transaction;
mod intent_outcomes_are_terminal;
mod intent_survives_reopen;
mod new_journal_appears_whole;
mod open_of_locked_file_reports_locked;
mod rebuild_appends_committed_events;
mod record_versions_are_written_only_when_needed;
mod retention_keeps_recent_events;
mod retention_removes_old_refusals;
mod unknown_format_version_is_refused;
