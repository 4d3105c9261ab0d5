//! The server's upkeep (`serve --auto-clean EVERY`): a clean of every session on a schedule
//! (the clean [`UpkeepOptions::clean`] asks for, run by `pruning_clean` as `clean --all --apply`
//! runs it: `upkeep_clean.rs`), its batches taking the server's write turn one at a time so that
//! the prunes requests ask for go between them. Each run's prunes are receipted and announced like any prune; the
//! run itself is announced on every event stream (`rpc.codenomad.session-pruning.upkeep`,
//! without an `id:`: it is no journal event) and logged. `GET /api/session-pruning/upkeep`
//! says where the schedule stands; `POST` with `{paused}` pauses or resumes it
//! (docs/ARCHITECTURE.md, "Upkeep in the server").

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, Notify};
use tokio::time::Instant;

pub use crate::upkeep_clean::UpkeepCounts;

/// The SSE event type of a finished upkeep run (data: [`UpkeepRun`]).
pub const UPKEEP_EVENT_TYPE: &str = "rpc.codenomad.session-pruning.upkeep";

/// Runs announced to streams that have not read them yet; a stream further behind misses the
/// oldest (the newest is always in `GET /api/session-pruning/upkeep`).
const ANNOUNCED_RUNS: usize = 16;

/// The schedule `serve --auto-clean` sets, and what each run does.
#[derive(Clone)]
pub struct UpkeepOptions {
    /// Time between the end of a run and the start of the next (the first starts this long
    /// after the server).
    pub every: Duration,
    /// The clean each run makes of every session, applied through the server's engine
    /// (`clean --all --apply` with `serve`'s policy flags).
    pub clean: pruning_clean::Clean,
    /// After each run that was not interrupted, purge the archive entries older than this
    /// (`--archive-keep`); `None` keeps them.
    pub archive_keep: Option<Duration>,
    /// Words a failure for people (the cause and what to do, as the command line words it);
    /// given the failure's own words, returns the words a run's `error` and `firstFailure`
    /// carry.
    pub explain: Arc<dyn Fn(&str) -> String + Send + Sync>,
}

impl fmt::Debug for UpkeepOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpkeepOptions")
            .field("every", &self.every)
            .field("clean", &self.clean)
            .field("archive_keep", &self.archive_keep)
            .finish_non_exhaustive()
    }
}

/// A finished run: `{run, startedAt, tookMs, status, counts, error?}`, the data of an
/// [`UPKEEP_EVENT_TYPE`] event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpkeepRun {
    /// 1 for the server's first run, then 2, 3, ...
    pub run: u64,
    /// When it started, ms since the Unix epoch.
    pub started_at: i64,
    /// How long it took, ms.
    pub took_ms: u64,
    /// `cleaned`, `interrupted` (paused or stopping), or `failed` (see `error`).
    pub status: RunStatus,
    /// What it did (zeros for a run that failed before it pruned).
    pub counts: UpkeepCounts,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// It ran to its end (some prunes may have been refused: see the counts).
    Cleaned,
    /// It stopped early: paused, or the server stopping.
    Interrupted,
    /// It could not clean (see `error`).
    Failed,
}

/// Where the schedule stands: the answer of `GET` and `POST /api/session-pruning/upkeep`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpkeepStatus {
    /// Whether this server cleans on a schedule (`serve --auto-clean`).
    pub enabled: bool,
    /// The interval, ms (`null` without a schedule).
    pub every_ms: Option<u64>,
    /// Paused by `POST {paused:true}`: no run starts until it is resumed.
    pub paused: bool,
    /// When the run in progress started, ms since the Unix epoch.
    pub running_since: Option<i64>,
    /// When the next run starts, ms since the Unix epoch (`null` while paused or running).
    pub next_run_at: Option<i64>,
    /// The last finished run.
    pub last_run: Option<UpkeepRun>,
    /// Runs finished since the server started.
    pub runs: u64,
}

/// The body of `POST /api/session-pruning/upkeep`: `{paused}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpkeepChange {
    /// `true` pauses the schedule (a run in progress stops after its current batch), `false`
    /// resumes it (the next run starts one interval later).
    pub paused: bool,
}

/// The schedule's state, shared by the scheduler task and the routes.
pub(crate) struct Upkeep {
    options: Option<UpkeepOptions>,
    schedule: Mutex<Schedule>,
    /// Woken when a route changes the schedule.
    changed: Notify,
    runs: broadcast::Sender<Arc<UpkeepRun>>,
}

#[derive(Default)]
struct Schedule {
    paused: bool,
    running_since: Option<i64>,
    /// When the next run starts: ms since the epoch, and the instant the scheduler sleeps to.
    next: Option<(i64, Instant)>,
    last_run: Option<UpkeepRun>,
    runs: u64,
    /// The stop flag of the run in progress.
    stop: Option<Arc<AtomicBool>>,
}

impl Upkeep {
    /// The schedule of `options` (none: a server that never cleans by itself).
    pub(crate) fn new(options: Option<UpkeepOptions>) -> Self {
        let mut schedule = Schedule::default();
        if let Some(options) = &options {
            schedule.next = Some(next_after(options.every));
        }
        Self {
            options,
            schedule: Mutex::new(schedule),
            changed: Notify::new(),
            runs: broadcast::channel(ANNOUNCED_RUNS).0,
        }
    }

    /// A receiver of the runs finished from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<UpkeepRun>> {
        self.runs.subscribe()
    }

    /// Where the schedule stands.
    pub(crate) fn status(&self) -> UpkeepStatus {
        let schedule = self.schedule();
        UpkeepStatus {
            enabled: self.options.is_some(),
            every_ms: self
                .options
                .as_ref()
                .map(|options| options.every.as_millis() as u64),
            paused: schedule.paused,
            running_since: schedule.running_since,
            next_run_at: schedule.next.map(|(at, _)| at),
            last_run: schedule.last_run.clone(),
            runs: schedule.runs,
        }
    }

    /// Pauses (a run in progress stops after its current batch) or resumes (the next run one
    /// interval from now) the schedule; `None` without a schedule.
    pub(crate) fn set_paused(&self, paused: bool) -> Option<UpkeepStatus> {
        let every = self.options.as_ref()?.every;
        {
            let mut schedule = self.schedule();
            if paused {
                schedule.next = None;
                if let Some(stop) = &schedule.stop {
                    stop.store(true, Ordering::SeqCst);
                }
            } else if schedule.paused && schedule.running_since.is_none() {
                schedule.next = Some(next_after(every));
            }
            schedule.paused = paused;
        }
        tracing::info!(
            paused,
            "upkeep: {}",
            if paused { "paused" } else { "resumed" }
        );
        self.changed.notify_one();
        Some(self.status())
    }

    fn schedule(&self) -> MutexGuard<'_, Schedule> {
        self.schedule
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The next run, `every` from now.
fn next_after(every: Duration) -> (i64, Instant) {
    let at = pruning_engine::now_ms().saturating_add(every.as_millis() as i64);
    (at, Instant::now() + every)
}

/// Runs the schedule of `state` until the server shuts down: sleeps to the next run, runs it
/// on the blocking pool, records and announces it, and schedules the next one interval after
/// it ended. Returns at once without a schedule.
///
/// # Cancel safety
///
/// Meant to be spawned and left to end with the server's shutdown, which sets the stop flag of
/// a run in progress and waits for that run's current batch; dropping the future instead
/// leaves that run to finish on the blocking pool unannounced.
pub(crate) async fn schedule(state: crate::AppState) {
    let upkeep = state.upkeep();
    let Some(options) = upkeep.options.clone() else {
        return;
    };
    let shutdown = state.shutdown().clone();
    loop {
        let due = upkeep.schedule().next.map(|(_, at)| at);
        let changed = upkeep.changed.notified();
        match due {
            Some(at) => tokio::select! {
                () = shutdown.cancelled() => return,
                () = changed => continue,
                () = tokio::time::sleep_until(at) => {}
            },
            None => tokio::select! {
                () = shutdown.cancelled() => return,
                () = changed => continue,
            },
        }
        let stop = Arc::new(AtomicBool::new(false));
        let started_at = pruning_engine::now_ms();
        {
            let mut schedule = upkeep.schedule();
            if schedule.paused {
                continue;
            }
            schedule.next = None;
            schedule.running_since = Some(started_at);
            schedule.stop = Some(Arc::clone(&stop));
        }
        let started = Instant::now();
        let outcome = run_once(&state, &options, &stop, &shutdown).await;
        let run = {
            let mut schedule = upkeep.schedule();
            schedule.runs += 1;
            schedule.running_since = None;
            schedule.stop = None;
            if !schedule.paused {
                schedule.next = Some(next_after(options.every));
            }
            let run = finished(schedule.runs, started_at, started, outcome);
            schedule.last_run = Some(run.clone());
            run
        };
        log(&run);
        // No stream listening is no error: the run is in `GET .../upkeep`.
        let _ = upkeep.runs.send(Arc::new(run));
        if shutdown.is_cancelled() {
            return;
        }
    }
}

/// One run on the blocking pool; on shutdown its stop flag is set and its current batch
/// awaited.
async fn run_once(
    state: &crate::AppState,
    options: &UpkeepOptions,
    stop: &Arc<AtomicBool>,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<UpkeepCounts, String> {
    let options = options.clone();
    let engine = state.engine();
    let turn = state.write_turn();
    let flag = Arc::clone(stop);
    let mut handle = tokio::task::spawn_blocking(move || {
        let explain = &*options.explain;
        let clean = (&options.clean, options.archive_keep);
        crate::upkeep_clean::run(&engine, clean, explain, &turn, &flag)
    });
    let joined = tokio::select! {
        joined = &mut handle => joined,
        () = shutdown.cancelled() => {
            stop.store(true, Ordering::SeqCst);
            handle.await
        }
    };
    joined.map_err(|error| format!("the clean stopped: {error}"))?
}

/// The record of a run that started at `started_at` (ms since the epoch).
fn finished(
    run: u64,
    started_at: i64,
    started: Instant,
    outcome: Result<UpkeepCounts, String>,
) -> UpkeepRun {
    let took_ms = started.elapsed().as_millis() as u64;
    match outcome {
        Ok(counts) => UpkeepRun {
            run,
            started_at,
            took_ms,
            status: if counts.interrupted {
                RunStatus::Interrupted
            } else {
                RunStatus::Cleaned
            },
            counts,
            error: None,
        },
        Err(error) => UpkeepRun {
            run,
            started_at,
            took_ms,
            status: RunStatus::Failed,
            counts: UpkeepCounts::default(),
            error: Some(error),
        },
    }
}

/// One log line per run: `info` when it cleaned, `warn` when some prune failed or it was
/// interrupted, `error` when it failed.
fn log(run: &UpkeepRun) {
    let counts = &run.counts;
    match (run.status, counts.failed) {
        (RunStatus::Failed, _) => tracing::error!(
            run = run.run,
            tookMs = run.took_ms,
            error = run.error.as_deref().unwrap_or(""),
            "upkeep: the clean failed"
        ),
        (status, failed) => {
            let words = if status == RunStatus::Interrupted {
                "upkeep: interrupted"
            } else {
                "upkeep: cleaned"
            };
            macro_rules! line {
                ($level:ident) => {
                    tracing::$level!(
                        run = run.run,
                        tookMs = run.took_ms,
                        sessions = counts.sessions,
                        pruned = counts.pruned,
                        diffs = counts.diffs,
                        snapshots = counts.snapshots,
                        blocked = counts.blocked,
                        retryLater = counts.retry_later,
                        failed,
                        bytes = counts.bytes,
                        bytesGivenBack = counts.bytes_given_back,
                        fileBytes = counts.file_bytes,
                        archivePurged = counts.archive_purged,
                        firstFailure = counts.first_failure.as_deref(),
                        "{words}"
                    )
                };
            }
            if failed > 0 || status == RunStatus::Interrupted {
                line!(warn);
            } else {
                line!(info);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_failed_counts_nothing_and_says_why() {
        let run = finished(3, 1_700_000_000_000, Instant::now(), Err("no disk".into()));
        assert_eq!(run.run, 3);
        assert_eq!(run.status, RunStatus::Failed);
        assert_eq!(run.counts, UpkeepCounts::default());
        assert_eq!(run.error.as_deref(), Some("no disk"));
    }

    #[test]
    fn a_run_data_is_camel_case_json() {
        let run = UpkeepRun {
            run: 1,
            started_at: 5,
            took_ms: 7,
            status: RunStatus::Interrupted,
            counts: UpkeepCounts {
                pruned: 2,
                bytes_given_back: 4096,
                interrupted: true,
                ..UpkeepCounts::default()
            },
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&run).expect("serializes"),
            "{\"run\":1,\"startedAt\":5,\"tookMs\":7,\"status\":\"interrupted\",\
             \"counts\":{\"sessions\":0,\"pruned\":2,\"diffs\":0,\"blocked\":0,\"retryLater\":0,\
             \"failed\":0,\"snapshots\":0,\"bytes\":0,\"bytesGivenBack\":4096,\"fileBytes\":0,\
             \"archivePurged\":0,\"interrupted\":true}}"
        );
    }

    #[test]
    fn pausing_a_server_without_a_schedule_is_refused() {
        assert_eq!(Upkeep::new(None).set_paused(true), None);
    }
}
