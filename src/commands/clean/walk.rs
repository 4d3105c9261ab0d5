//! The walk over a clean's messages: each planned by the clean policy, then with `--apply`
//! queued for the engine's batches, or in a dry run checked as the prune would be.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use pruning_engine::{DryRun, Engine, PruneRequest, Selection};
use pruning_opencode::{OpenCodeStore, Planned};

use super::args::CleanConfig;
use super::progress::Progress;
use super::report::{dry, tally, Report, UntilLiveSize};
use super::turns::Turns;
use super::Listings;

/// The walk over the messages: each planned by the clean policy, then with `--apply` queued for
/// the engine's batches (which fill across sessions: a database of many small sessions still
/// gets batches of `batch_size` messages), or in a dry run checked as the prune would be.
pub(super) struct Walk<'a> {
    pub(super) store: &'a OpenCodeStore,
    pub(super) engine: Option<&'a Engine<OpenCodeStore>>,
    /// Where each batch waits for its turn.
    pub(super) turns: &'a dyn Turns,
    pub(super) clean: &'a CleanConfig,
    pub(super) stop: &'a AtomicBool,
    /// The sessions a compaction took first.
    pub(super) compacted: &'a HashSet<String>,
    pub(super) now: i64,
    pub(super) until: Option<UntilLiveSize>,
    pub(super) report: Report,
    pub(super) progress: Progress,
    pub(super) pending: Pending,
    /// The spill files the dry run's prunes point at, once per part.
    pub(super) spilled: Vec<String>,
}

impl Walk<'_> {
    /// Walks every message of `sessions`: oldest first across sessions with
    /// `--until-live-size` (a time that is not a number sorts last), else session by session;
    /// then applies the last batch, unless stopped (its messages were planned, never applied:
    /// not reached).
    pub(super) fn all(&mut self, sessions: &Listings) -> anyhow::Result<()> {
        if self.clean.until_live_size.is_some() {
            let mut order: Vec<(Option<i64>, &str, &str)> = sessions
                .ids
                .iter()
                .zip(&sessions.kept_listings)
                .flat_map(|(session_id, listing)| {
                    let times = listing.times.iter().copied();
                    times
                        .zip(&listing.ids)
                        .map(move |(time, id)| (time, session_id.as_str(), id.as_str()))
                })
                .collect();
            order.sort_by_key(|&(time, session, id)| (time.is_none(), time, session, id));
            for (_, session_id, message_id) in order {
                if !self.visit(session_id, message_id)? {
                    break;
                }
            }
        } else if sessions.read_again {
            'sessions: for session_id in &sessions.ids {
                let listing = Listings::listing_of(self.store, self.clean, session_id)?;
                for message_id in &listing.ids {
                    if !self.visit(session_id, message_id)? {
                        break 'sessions;
                    }
                }
            }
        } else {
            'kept: for (session_id, listing) in sessions.ids.iter().zip(&sessions.kept_listings) {
                for message_id in &listing.ids {
                    if !self.visit(session_id, message_id)? {
                        break 'kept;
                    }
                }
            }
        }
        if let Some(engine) = self.engine {
            if self.stop.load(Ordering::SeqCst) {
                self.report.considered -= self.pending.requests.len() as u64;
            } else {
                self.pending
                    .apply(engine, self.turns, self.stop, &mut self.report);
            }
        }
        self.progress.finish();
        Ok(())
    }

    /// One message; `false` ends the walk (stopped, or the size reached).
    fn visit(&mut self, session_id: &str, message_id: &str) -> anyhow::Result<bool> {
        if self.stop.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if self.until.as_ref().is_some_and(UntilLiveSize::reached) {
            return Ok(false);
        }
        self.report.considered += 1;
        match self
            .store
            .clean_plan(session_id, message_id, &self.clean.policy, self.now)?
        {
            Planned::Nothing => self.report.nothing_to_prune += 1,
            Planned::Skipped { reason, .. } => {
                *self.report.skipped.entry(reason).or_default() += 1;
            }
            Planned::Prune {
                request,
                spill_files,
                ..
            } => self.planned(session_id, message_id, request, spill_files)?,
        }
        if let Some(engine) = self.engine {
            if self.pending.requests.len() >= self.clean.batch_size {
                self.pending
                    .apply(engine, self.turns, self.stop, &mut self.report);
                if !self.clean.pause.is_zero() {
                    std::thread::sleep(self.clean.pause);
                }
            }
        }
        self.progress.update(self.report.considered, &self.report);
        Ok(true)
    }

    /// A prune the policy planned: a dry run checks what the prune would check, in a
    /// transaction it rolls back. With `--until-live-size` the apply runs it too: only a prune
    /// that would commit counts toward the size, in both. In a dry run the session's compaction
    /// has not deleted the superseded snapshots of these parts yet; with `--apply` it has.
    fn planned(
        &mut self,
        session_id: &str,
        message_id: &str,
        request: PruneRequest,
        spill_files: Vec<String>,
    ) -> anyhow::Result<()> {
        let store = self.store;
        let after_compaction = self.engine.is_none() && self.compacted.contains(session_id);
        let checked = if self.engine.is_none() || self.until.is_some() {
            let found = pruning_engine::dry_run(store, &request)?;
            let freed = match &found {
                Ok(DryRun::Plan { plan, .. }) => Some(store.freed(
                    session_id,
                    message_id,
                    &plan.remove,
                    plan.bytes,
                    after_compaction,
                )?),
                _ => None,
            };
            if let (Some(until), Some(freed)) = (&mut self.until, &freed) {
                until.planned(freed.total());
            }
            Some((found, freed))
        } else {
            None
        };
        if self.engine.is_some() {
            // The snapshots' bytes, to tell them from the part rows in the receipt's count.
            let snapshots = match &checked {
                Some((_, Some(freed))) => freed.snapshots,
                _ => {
                    let indexes = request_indexes(&request);
                    store
                        .freed(session_id, message_id, &indexes, 0, false)?
                        .snapshots
                }
            };
            self.pending.requests.push(request);
            self.pending.snapshot_bytes.push(snapshots);
        } else if let Some((found, freed)) = checked {
            if let Some(freed) = freed {
                self.report.bytes += freed.total();
                self.report.bytes_by_kind.parts += freed.parts;
                self.report.bytes_by_kind.part_snapshots += freed.snapshots;
                self.spilled.extend(spill_files);
            }
            dry(&mut self.report, found);
        }
        Ok(())
    }
}

/// Planned prunes waiting for their batch.
#[derive(Debug, Default)]
pub(super) struct Pending {
    requests: Vec<PruneRequest>,
    /// Of each request, the bytes of the part snapshots it removes (the rest of its receipt's
    /// count is the part rows', or a V2 row's).
    snapshot_bytes: Vec<u64>,
}

impl Pending {
    /// Applies the batch through the engine's group commit, in its turn, and counts the
    /// outcomes.
    fn apply(
        &mut self,
        engine: &Engine<OpenCodeStore>,
        turns: &dyn Turns,
        stop: &AtomicBool,
        report: &mut Report,
    ) {
        let stopped = || stop.load(Ordering::SeqCst);
        let mut results = Vec::new();
        turns.take(&mut || results = engine.prune_many_until(&self.requests, &stopped));
        for (result, snapshots) in results.into_iter().zip(&self.snapshot_bytes) {
            tally(report, result, *snapshots);
        }
        self.requests.clear();
        self.snapshot_bytes.clear();
    }
}

/// The indexes a prune of parts selects (none for any other prune).
fn request_indexes(request: &PruneRequest) -> Vec<usize> {
    match &request.selection {
        Selection::Indexes(indexes) => indexes.iter().map(|&i| i as usize).collect(),
        _ => Vec::new(),
    }
}
