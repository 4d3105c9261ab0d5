//! [`Clean`]: what one clean takes, as a typed value: the policy, the phases, the target size,
//! the batch. The command line reads it from `clean`'s flags, `serve --auto-clean` from its
//! own; nothing here knows of flags.

use std::time::Duration;

use pruning_opencode::CleanPolicy;

/// Messages per batch of `clean` (its `--batch-size` default): their intents share one journal
/// write, their commits one WAL sync.
pub const BATCH_SIZE: usize = 256;

/// Most messages whose listings a clean keeps from its count to its walk (about 10 MB of ids);
/// a larger clean reads each session's listing again as it walks it.
pub const MAX_KEPT_IDS: u64 = 100_000;

/// What one clean takes, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clean {
    /// The sessions, or `None` for every session of the database (each named one must exist:
    /// the caller checks).
    pub sessions: Option<Vec<String>>,
    /// Which technical parts of which messages (kept turns, tools, ages, sizes, restored
    /// messages).
    pub policy: CleanPolicy,
    /// Remove the spill files no remaining row names (`--include-spill-files`).
    pub spill_files: bool,
    /// Compact each session's event log first (`--no-compact` turns it off).
    pub compact: bool,
    /// Empty the file bodies of the summary diffs before the kept turns (`--diffs`).
    pub diffs: bool,
    /// Remove the 1.x rows of the sessions OpenCode 2 migrated (`--migrated-v1`).
    pub migrated_v1: bool,
    /// Only messages older than each session's last completed compaction
    /// (`--before-compaction`).
    pub before_compaction: bool,
    /// Oldest first across sessions, until the live data is at most this many bytes
    /// (`--until-live-size`, or `--until-file-size`: on a file that gives its pages back, the
    /// file comes to its live data).
    pub until_live_size: Option<u64>,
    /// The target is the file's size (`--until-file-size`): the file must give pages back.
    pub until_file: bool,
    /// Measure how long the write lock was held (`--timings`).
    pub timings: bool,
    /// Prunes per batch, 1 or more.
    pub batch_size: usize,
    /// Wait after each batch of parts' prunes (a test seam for interruption).
    pub pause: Duration,
    /// Most messages whose listings are kept from the count to the walk ([`MAX_KEPT_IDS`]
    /// unless a test sets it).
    pub listing_budget: u64,
}

impl Default for Clean {
    /// `clean --all`'s defaults: OpenCode's own policy ([`CleanPolicy::default`]), the
    /// compaction first, batches of [`BATCH_SIZE`], nothing else.
    fn default() -> Self {
        Self {
            sessions: None,
            policy: CleanPolicy::default(),
            spill_files: false,
            compact: true,
            diffs: false,
            migrated_v1: false,
            before_compaction: false,
            until_live_size: None,
            until_file: false,
            timings: false,
            batch_size: BATCH_SIZE,
            pause: Duration::ZERO,
            listing_budget: MAX_KEPT_IDS,
        }
    }
}
