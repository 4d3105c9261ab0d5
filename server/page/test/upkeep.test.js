// Unit tests of the upkeep view's words (`node --test server/page/test/`).

import { test } from "node:test";
import assert from "node:assert/strict";
import { describeUpkeep } from "../upkeep-status.js";

const bytes = (n) => `${n} B`;
const clock = (ms) => `t${ms}`;

function status(extra = {}) {
  return { enabled: true, everyMs: 300_000, paused: false, runningSince: null, nextRunAt: 9, lastRun: null, runs: 0, ...extra };
}

function run(counts = {}, extra = {}) {
  return {
    run: 2,
    startedAt: 5,
    tookMs: 1500,
    status: "cleaned",
    counts: {
      sessions: 3, pruned: 7, diffs: 0, blocked: 0, retryLater: 0, failed: 0, snapshots: 0, bytes: 100,
      bytesGivenBack: 4096, fileBytes: 8192, archivePurged: 0, interrupted: false, ...counts,
    },
    ...extra,
  };
}

test("a server without a schedule shows no upkeep", () => {
  assert.deepEqual(describeUpkeep({ enabled: false }, bytes, clock), { shown: false, state: "", lines: [], pause: "" });
});

test("before its first run the schedule says when it starts", () => {
  assert.deepEqual(describeUpkeep(status(), bytes, clock), {
    shown: true,
    state: "next clean at t9 (every 5 min)",
    lines: ["No clean has run yet."],
    pause: "Pause",
  });
});

test("a run says what it pruned and gave back", () => {
  const view = describeUpkeep(status({ lastRun: run(), runs: 2 }), bytes, clock);
  assert.deepEqual(view.lines, [
    "Last clean: run 2 at t5 took 1.5 s.",
    "Pruned 7 message(s) in 3 session(s), removing 100 B; gave 4096 B back to the disk; the file is 8192 B.",
  ]);
});

test("refusals, failures and purges each get their line", () => {
  const counts = { diffs: 4, blocked: 5, retryLater: 3, failed: 1, firstFailure: "disk full", archivePurged: 2 };
  const view = describeUpkeep(status({ lastRun: run(counts, { status: "interrupted" }) }), bytes, clock);
  assert.deepEqual(view.lines.slice(0, 1), ["Last clean: run 2 at t5 took 1.5 s, stopped early."]);
  assert.deepEqual(view.lines.slice(2), [
    "Emptied the file bodies of the diffs of 4 user message(s).",
    "3 refused while OpenCode used their session: the next clean tries them again.",
    "2 refused for good (see the server's log).",
    "1 failed: disk full.",
    "2 archive entries past their keep were purged.",
  ]);
});

test("a paused schedule offers to resume, a running one says since when", () => {
  const paused = describeUpkeep(status({ paused: true, nextRunAt: null }), bytes, clock);
  assert.equal(paused.state, "paused (every 5 min)");
  assert.equal(paused.pause, "Resume");
  const running = describeUpkeep(status({ runningSince: 4, nextRunAt: null, everyMs: 5000 }), bytes, clock);
  assert.equal(running.state, "cleaning since t4 (every 5 s)");
});

test("a failed run says why", () => {
  const view = describeUpkeep(status({ lastRun: run({}, { status: "failed", error: "unreadable" }) }), bytes, clock);
  assert.deepEqual(view.lines, ["The last clean failed (run 2 at t5 took 1.5 s): unreadable."]);
});
