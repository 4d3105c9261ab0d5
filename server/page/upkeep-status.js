// What the upkeep view says of the clean on a schedule (`serve --auto-clean`), from the answer
// of `GET /api/session-pruning/upkeep`: where the schedule stands, what its last run did, and
// the pause switch's label. Nothing here touches the page, so `node --test` runs it; upkeep.js
// draws what it answers.

/**
 * The view of `status` (`{enabled, everyMs, paused, runningSince, nextRunAt, lastRun, runs}`):
 * `shown` (false on a server without a schedule), `state` (one line: paused, running, or when
 * the next run starts), `lines` (what the last run did, or that none ran yet) and `pause` (the
 * switch's label). `bytes(n)` and `clock(ms)` write a size and a time (ms since the epoch).
 */
export function describeUpkeep(status, bytes, clock) {
  if (!status?.enabled) return { shown: false, state: "", lines: [], pause: "" };
  const every = `every ${seconds(status.everyMs)}`;
  let state;
  if (status.runningSince !== null) state = `cleaning since ${clock(status.runningSince)} (${every})`;
  else if (status.paused) state = `paused (${every})`;
  else if (status.nextRunAt !== null) state = `next clean at ${clock(status.nextRunAt)} (${every})`;
  else state = every;
  return {
    shown: true,
    state,
    lines: status.lastRun ? lastRun(status.lastRun, bytes, clock) : ["No clean has run yet."],
    pause: status.paused ? "Resume" : "Pause",
  };
}

/** The last run's lines: when, how long, what it pruned and gave back, what it left. */
function lastRun(run, bytes, clock) {
  const counts = run.counts;
  const took = `run ${run.run} at ${clock(run.startedAt)} took ${seconds(run.tookMs)}`;
  if (run.status === "failed") return [`The last clean failed (${took}): ${run.error ?? "no reason given"}.`];
  const lines = [
    `Last clean: ${took}${run.status === "interrupted" ? ", stopped early" : ""}.`,
    `Pruned ${counts.pruned} message(s) in ${counts.sessions} session(s), removing ${bytes(counts.bytes)}; gave ${bytes(counts.bytesGivenBack)} back to the disk; the file is ${bytes(counts.fileBytes)}.`,
  ];
  if (counts.diffs > 0) lines.push(`Emptied the file bodies of the diffs of ${counts.diffs} user message(s).`);
  if (counts.retryLater > 0) lines.push(`${counts.retryLater} refused while OpenCode used their session: the next clean tries them again.`);
  const refused = counts.blocked - counts.retryLater;
  if (refused > 0) lines.push(`${refused} refused for good (see the server's log).`);
  if (counts.failed > 0) lines.push(`${counts.failed} failed: ${counts.firstFailure ?? "see the server's log"}.`);
  if (counts.archivePurged > 0) lines.push(`${counts.archivePurged} archive entries past their keep were purged.`);
  return lines;
}

/** `ms` as seconds, minutes or hours, as a person reads an interval. */
function seconds(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${Math.round(ms / 100) / 10} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 360_000) / 10} h`;
}
