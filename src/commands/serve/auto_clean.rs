//! The job `serve --auto-clean` gives the server: each run is the clean of `clean --all --apply`
//! with `serve`'s policy flags (`clean::run_upkeep`), its batches in the server's write turn.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pruning_engine::Engine;
use pruning_opencode::OpenCodeStore;
use pruning_server::{UpkeepCounts, UpkeepJob};

use crate::cli::config::Config;
use crate::commands::clean::{run_upkeep, CleanConfig, Turns};

/// How long one turn of a run's give back may hold the server's write turn: as long as the
/// prune-batch route's own give back.
const GIVE_BACK_SLICE: Duration = Duration::from_millis(250);

/// `serve --auto-clean`'s clean.
pub(super) struct AutoCleanJob {
    /// The global flags (the database, the journal, the fence's periods).
    pub(super) config: Config,
    /// `clean --all --apply --quiet` with the policy flags.
    pub(super) clean: CleanConfig,
    /// `--archive-keep`.
    pub(super) archive_keep: Option<Duration>,
}

impl UpkeepJob for AutoCleanJob {
    fn run(
        &self,
        engine: &Arc<Engine<OpenCodeStore>>,
        turn: &(dyn Fn(&mut dyn FnMut()) + Sync),
        stop: &AtomicBool,
    ) -> Result<UpkeepCounts, String> {
        run_upkeep(
            engine,
            &self.config,
            &self.clean,
            self.archive_keep,
            stop,
            &ServerTurns(turn),
        )
    }
}

/// The server's write turn, as the clean's batches take it.
struct ServerTurns<'a>(&'a (dyn Fn(&mut dyn FnMut()) + Sync));

impl Turns for ServerTurns<'_> {
    fn take(&self, work: &mut dyn FnMut()) {
        (self.0)(work);
    }

    fn give_back_slice(&self) -> Option<Duration> {
        Some(GIVE_BACK_SLICE)
    }
}
