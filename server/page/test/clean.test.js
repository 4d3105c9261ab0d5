// Unit tests of the page's clean helpers (`node --test server/page/test/`): the dry run's
// words, the comparison of two plans, and the `prune` bodies that apply one.

import { test } from "node:test";
import assert from "node:assert/strict";
import { MOST_KEPT_TURNS, describe, keptTurns, pruneBodies, samePrunes } from "../clean.js";

const bytes = (n) => `${n} B`;

function plan(prunes, extra = {}) {
  return {
    status: "plan",
    sessionID: "ses_a",
    keepLastTurns: 2,
    lookedAt: 3,
    keptInTurns: 4,
    nothingToPrune: 1,
    alreadyPruned: 0,
    skipped: {},
    prunes,
    parts: 3,
    bytes: 120,
    ...extra,
  };
}

const one = { messageID: "msg_1", revision: "a".repeat(64), indexes: [1, 2], everyTechnical: true, bytes: 100, blocked: null };
const two = { messageID: "msg_2", revision: "b".repeat(64), indexes: [0], everyTechnical: false, bytes: 20, blocked: null };

test("the dry run counts what the server planned", () => {
  assert.equal(
    describe(plan([one, two]), bytes),
    "Dry run: 2 message(s), 3 tool and reasoning part(s), 120 B would be pruned. 3 assistant message(s) looked at, and 4 more left alone in the last 2 turn(s); 1 with nothing to prune. Text and skill output are never removed. Whether OpenCode is using the session is checked again as each message is pruned.",
  );
});

test("the dry run names skip and refusal reasons and leaves refused prunes out of its count", () => {
  const refused = { ...two, blocked: "maintenance_required", bytes: 0 };
  const text = describe(plan([one, refused], { skipped: { running_tool: 2 }, parts: 2, bytes: 100, nothingToPrune: 0 }), bytes);
  assert.equal(
    text,
    "Dry run: 1 message(s), 2 tool and reasoning part(s), 100 B would be pruned. 3 assistant message(s) looked at, and 4 more left alone in the last 2 turn(s); skipped: 2 running_tool. Refused now: 1 maintenance_required. Text and skill output are never removed. Whether OpenCode is using the session is checked again as each message is pruned.",
  );
});

test("plans with the same prunes are the same, whatever their counts", () => {
  assert.equal(samePrunes(plan([one, two]), plan([one, two], { lookedAt: 9 })), true);
});

test("a changed revision, part or message makes another plan", () => {
  assert.equal(samePrunes(plan([one, two]), plan([one, { ...two, revision: "c".repeat(64) }])), false);
  assert.equal(samePrunes(plan([one, two]), plan([one, { ...two, indexes: [0, 1] }])), false);
  assert.equal(samePrunes(plan([one, two]), plan([one])), false);
});

test("a prune refused at the dry run and admitted since makes another plan", () => {
  const refused = { ...two, blocked: "maintenance_required" };
  assert.equal(samePrunes(plan([one, refused]), plan([one, two])), false);
});

test("kept turns are a whole number from 0 to the route's most; anything else is none", () => {
  assert.equal(keptTurns("0"), 0);
  assert.equal(keptTurns(" 12 "), 12);
  assert.equal(keptTurns(String(MOST_KEPT_TURNS)), MOST_KEPT_TURNS);
  for (const typed of ["", " ", "-1", "1.5", "1e2", "abc", "99999999999", String(MOST_KEPT_TURNS + 1)]) {
    assert.equal(keptTurns(typed), null, JSON.stringify(typed));
  }
});

test("each planned prune becomes the prune body clean makes, in order", () => {
  assert.deepEqual(pruneBodies(plan([one, two])), [
    { sessionID: "ses_a", messageID: "msg_1", revision: "a".repeat(64), indexes: [1, 2] },
    { sessionID: "ses_a", messageID: "msg_2", revision: "b".repeat(64), indexes: [0] },
  ]);
});
