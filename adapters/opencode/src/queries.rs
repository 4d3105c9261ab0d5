//! The store's API beyond the engine's trait: what the CLI and the server ask of an OpenCode
//! database (listings, stats, clean's selection, spill files, vacuum), each a method that runs
//! its module's SQL on the store's own connection. Callers never see the connection.

use std::path::Path;

use pruning_engine::{PruneRequest, StoreError};

use super::browse::overview::{self, Exactness, Overview};
use super::clean::copies::PlannedCopy;
use super::clean::{self, copies};
use super::clean::{CleanPolicy, Freed, Listing, Planned};
use super::sessions::{MessageSummary, SessionSummary};
use super::txn::ReadTxn;
use super::vacuum::{Needs, VacuumError};
use super::{sessions, spill, vacuum, OpenCodeStore};

fn storage(error: rusqlite::Error) -> StoreError {
    StoreError::Storage(Box::new(error))
}

impl OpenCodeStore {
    /// Every session of both session tables with its sizes, largest first (see
    /// `sessions::list`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        sessions::list(&self.connection()).map_err(storage)
    }

    /// Why the V2 `session_message` table cannot be read, in words: it lacks a column every V2
    /// reader needs and holds rows that are not the agent and model switches of OpenCode 1.14
    /// and 1.15 (whose table has no `seq`): messages this version would leave out of every
    /// listing as if there were none. `None` when it can be read, or holds only switches.
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn v2_unreadable(&self) -> Result<Option<String>, StoreError> {
        let conn = self.connection();
        let schema = self.schema_of(&conn).map_err(storage)?;
        let missing = schema.v2_missing_columns();
        if missing.is_empty() {
            return Ok(None);
        }
        let switches = super::schema::V2_SWITCH_TYPES
            .iter()
            .map(|kind| format!("'{kind}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let others: i64 = conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM session_message WHERE CAST(type AS TEXT) NOT IN ({switches})"
                ),
                [],
                |row| row.get(0),
            )
            .map_err(storage)?;
        Ok((others > 0).then(|| {
            format!(
                "the V2 table session_message lacks column(s) {} and holds {others} row(s) that \
                 are not agent or model switches: a layout this version does not know, whose \
                 messages it cannot read",
                missing
                    .iter()
                    .map(|column| format!("session_message.{column}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }))
    }

    /// Whether session `session_id` exists in either session table.
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn session_exists(&self, session_id: &str) -> Result<bool, StoreError> {
        sessions::exists(&self.connection(), session_id).map_err(storage)
    }

    /// The messages of a session, oldest first, with their technical parts (see
    /// `sessions::messages`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn messages(&self, session_id: &str) -> Result<Vec<MessageSummary>, StoreError> {
        sessions::messages(&self.connection(), session_id).map_err(storage)
    }

    /// The messages of a session that have technical parts to prune, oldest first (see
    /// `sessions::candidates`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn prunable_messages(&self, session_id: &str) -> Result<Vec<MessageSummary>, StoreError> {
        sessions::candidates(&self.connection(), session_id).map_err(storage)
    }

    /// Where the bytes of the database are and its `top` largest sessions, in one snapshot:
    /// the document `session-prune stats --json` prints (see `browse::overview`). `Estimated`
    /// reads a sample of the rows, `Exact` every row.
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn overview(&self, top: usize, exactness: Exactness) -> Result<Overview, StoreError> {
        let conn = self.connection();
        // An estimate reads each page about once: through the page cache it takes about half
        // the time it takes through a memory map, whose pages fault in one by one and are
        // unmapped at close (docs/ARCHITECTURE.md, "The overview").
        let mapped: i64 = conn
            .query_row("PRAGMA mmap_size", [], |row| row.get(0))
            .map_err(storage)?;
        if exactness == Exactness::Estimated && mapped > 0 {
            conn.execute_batch("PRAGMA mmap_size = 0")
                .map_err(storage)?;
        }
        let txn = ReadTxn::begin(&conn).map_err(storage)?;
        let result = overview::read(&conn, self.path(), top, exactness, &|_| true);
        txn.rollback();
        if exactness == Exactness::Estimated && mapped > 0 {
            conn.execute_batch(&format!("PRAGMA mmap_size = {mapped}"))
                .map_err(storage)?;
        }
        result.map_err(storage)
    }

    /// Every session id, oldest first: what `clean --all` walks (see `clean::all_sessions`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn clean_sessions(&self) -> Result<Vec<String>, StoreError> {
        clean::all_sessions(&self.connection()).map_err(storage)
    }

    /// The messages of a session a clean looks at, leaving the last `keep_last_turns` user
    /// turns alone (see `clean::messages`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn clean_listing(
        &self,
        session_id: &str,
        keep_last_turns: u32,
    ) -> Result<Listing, StoreError> {
        self.clean_listing_before(session_id, keep_last_turns, false)
    }

    /// [`Self::clean_listing`], and with `before_compaction` only the messages older than the
    /// session's last completed compaction (see `clean::messages`).
    ///
    /// Errors: [`StoreError`].
    pub fn clean_listing_before(
        &self,
        session_id: &str,
        keep_last_turns: u32,
        before_compaction: bool,
    ) -> Result<Listing, StoreError> {
        let conn = self.connection();
        let schema = self.schema_of(&conn).map_err(storage)?;
        clean::messages(
            &conn,
            &schema,
            session_id,
            keep_last_turns,
            before_compaction,
        )
        .map_err(storage)
    }

    /// What a clean with `policy` does with one message: prune which parts, nothing, or skip it
    /// and why (see `clean::plan`); `now_ms` is ms since the Unix epoch.
    ///
    /// Errors: [`StoreError`].
    pub fn clean_plan(
        &self,
        session_id: &str,
        message_id: &str,
        policy: &CleanPolicy,
        now_ms: i64,
    ) -> Result<Planned, StoreError> {
        clean::plan(self, session_id, message_id, policy, now_ms)
    }

    /// Bytes of row data a prune of the parts at `indexes` would free, as its receipt will count
    /// them; `planned_bytes` is the plan's own count, used for V2.
    ///
    /// Errors: [`StoreError`].
    pub fn freed_bytes(
        &self,
        session_id: &str,
        message_id: &str,
        indexes: &[usize],
        planned_bytes: u64,
    ) -> Result<u64, StoreError> {
        Ok(self
            .freed(session_id, message_id, indexes, planned_bytes, false)?
            .total())
    }

    /// What a prune of the parts at `indexes` would free, parts and snapshots apart, as its
    /// receipt will count it (see `clean::freed`); with `after_compaction`, after its session's
    /// compaction deleted the superseded snapshots.
    ///
    /// Errors: [`StoreError`].
    pub fn freed(
        &self,
        session_id: &str,
        message_id: &str,
        indexes: &[usize],
        planned_bytes: u64,
        after_compaction: bool,
    ) -> Result<Freed, StoreError> {
        clean::freed(
            self,
            session_id,
            message_id,
            indexes,
            planned_bytes,
            after_compaction,
        )
    }

    /// The compaction a clean makes of session `session_id`: requests bound to its event log's
    /// revision now, one per range of seqs in seq order, nothing, or skipped and why (see
    /// `copies::compaction`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn clean_compaction(
        &self,
        session_id: &str,
    ) -> Result<PlannedCopy<Vec<PruneRequest>>, StoreError> {
        copies::compaction(self, session_id)
    }

    /// The V1 user messages whose diffs a clean looks at: before the session's last
    /// `keep_last_turns` user turns, and with `older_than` created at least that long before
    /// `now_ms` (ms since the Unix epoch), oldest first (see `copies::diffs_candidates`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn clean_diffs_candidates(
        &self,
        session_id: &str,
        keep_last_turns: u32,
        older_than: Option<std::time::Duration>,
        now_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        copies::diffs_candidates(self, session_id, keep_last_turns, older_than, now_ms)
    }

    /// The diffs prune a clean makes of one user message: a request bound to its diffs
    /// revision, nothing, or skipped and why (see `copies::plan_diffs`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn clean_diffs(
        &self,
        session_id: &str,
        message_id: &str,
        include_restored: bool,
    ) -> Result<PlannedCopy, StoreError> {
        copies::plan_diffs(self, session_id, message_id, include_restored)
    }

    /// The removal a clean with `--migrated-v1` makes of a session's OpenCode 1.x rows that
    /// OpenCode 2 migrated: one request per message, nothing, or skipped and why (see
    /// `copies::plan_migrated`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn clean_migrated(
        &self,
        session_id: &str,
    ) -> Result<PlannedCopy<Vec<PlannedCopy>>, StoreError> {
        copies::plan_migrated(self, session_id)
    }

    /// The emptying a clean makes of the output OpenCode 2's `shell` rows of a session keep,
    /// before the last `keep_last_turns` user turns (with `older_than`, at least that long
    /// before `now_ms`): one planned copy per row (see `copies::plan_shell_outputs`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn clean_shell_outputs(
        &self,
        session_id: &str,
        keep_last_turns: u32,
        older_than: Option<std::time::Duration>,
        now_ms: i64,
    ) -> Result<Vec<PlannedCopy>, StoreError> {
        copies::plan_shell_outputs(self, session_id, keep_last_turns, older_than, now_ms)
    }

    /// The OpenCode 1.x history OpenCode 2 migrated: sessions, and their message and part rows
    /// (all 0 in a file OpenCode 2 has not migrated).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn migrated_v1(&self) -> Result<crate::MigratedV1, StoreError> {
        let conn = self.connection();
        let schema = self.schema_of(&conn).map_err(storage)?;
        crate::MigratedV1::read(&conn, &schema).map_err(storage)
    }

    /// Part rows of a session whose message row is missing (see `clean::orphan_parts`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn orphan_parts(&self, session_id: &str) -> Result<u64, StoreError> {
        let conn = self.connection();
        let schema = self.schema_of(&conn).map_err(storage)?;
        clean::orphan_parts(&conn, &schema, session_id).map_err(storage)
    }

    /// `(files, bytes)` of the spill files in `folder` that removing unreferenced files would
    /// take after prunes whose parts name `pruned` (see `spill::would_remove`).
    ///
    /// Errors: the folder's I/O errors, SQLite's as [`std::io::Error::other`].
    pub fn spill_files_to_remove(
        &self,
        folder: &Path,
        pruned: &[String],
    ) -> std::io::Result<(u64, u64)> {
        spill::would_remove(&self.connection(), folder, pruned)
    }

    /// Removes the spill files of `folder` no row names; `(files, bytes)` removed (see
    /// `spill::remove_unreferenced`).
    ///
    /// Errors: the folder's I/O errors, SQLite's as [`std::io::Error::other`].
    pub fn remove_unreferenced_spill_files(&self, folder: &Path) -> std::io::Result<(u64, u64)> {
        spill::remove_unreferenced(&self.connection(), folder)
    }

    /// How much `VACUUM` of this database needs, and where it writes (see `vacuum::needs`).
    ///
    /// Errors: [`StoreError::Storage`].
    pub fn vacuum_needs(&self) -> Result<Needs, StoreError> {
        vacuum::needs(&self.connection(), self.path()).map_err(storage)
    }

    /// Runs `VACUUM` and truncates the WAL; `true` when the WAL could be truncated (see
    /// `vacuum::run`). With `online_shrink` the file is switched to `auto_vacuum =
    /// INCREMENTAL` by that VACUUM: from then on [`Self::give_back_pages`] gives freed pages
    /// back while OpenCode runs.
    ///
    /// Errors: [`VacuumError`].
    pub fn vacuum(&self, online_shrink: bool) -> Result<bool, VacuumError> {
        vacuum::run(&self.connection(), online_shrink)
    }

    /// Writes the vacuumed database to the new file `target` (`VACUUM INTO`), leaving this
    /// one as it is: for a disk without room for a rebuild in place (see `vacuum::into`);
    /// interrupted and removed once `stop` is set. Returns the copy's size, bytes.
    ///
    /// Errors: [`VacuumError`]; nothing is left at `target` after any of them.
    pub fn vacuum_into(
        &self,
        target: &Path,
        stop: &'static std::sync::atomic::AtomicBool,
    ) -> Result<u64, VacuumError> {
        vacuum::into(&mut self.connection(), self.path(), target, stop)
    }
}
