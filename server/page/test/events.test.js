// Unit tests of the page's event bookkeeping (`node --test server/page/test/`): which events of
// a batch are applied and which are a retry's seen before, what a resync does to the batch,
// and what the applied events name.

import { test } from "node:test";
import assert from "node:assert/strict";
import { COMPACTED, PRUNED, RESTORED, UPKEEP, describeEvent, named, takeBatch } from "../events.js";

const pruned = (id, sessionID, messageID) => ({ type: PRUNED, id, data: { sessionID, messageID } });

test("a batch applies the events numbered past the last applied, in order", () => {
  const taken = takeBatch([pruned("4", "ses_a", "msg_1"), pruned("5", "ses_a", "msg_2")], 3);
  assert.deepEqual(taken.changed, [
    { sessionID: "ses_a", messageID: "msg_1" },
    { sessionID: "ses_a", messageID: "msg_2" },
  ]);
  assert.equal(taken.appliedThrough, 5);
  assert.equal(taken.lastEventId, 5);
  assert.equal(taken.resync, false);
  assert.deepEqual(
    taken.lines.map((l) => [l.id, l.again]),
    [
      ["4", false],
      ["5", false],
    ],
  );
});

test("a retry's announcement is logged again and applied once", () => {
  // The retry of #4 comes without a number (the stream had passed it) or with its old one.
  const taken = takeBatch([pruned("4", "ses_a", "msg_1"), pruned(null, "ses_a", "msg_1"), pruned("4", "ses_a", "msg_1")], 3);
  assert.equal(taken.changed.length, 1);
  assert.equal(taken.appliedThrough, 4);
  assert.deepEqual(
    taken.lines.map((l) => [l.id, l.again]),
    [
      ["4", false],
      [null, true],
      ["4", true],
    ],
  );
});

test("an event at or below the last applied is not applied again", () => {
  const taken = takeBatch([pruned("2", "ses_a", "msg_1"), pruned("3", "ses_a", "msg_2")], 3);
  assert.deepEqual(taken.changed, []);
  assert.equal(taken.appliedThrough, 3);
  assert.deepEqual(
    taken.lines.map((l) => l.again),
    [true, true],
  );
});

test("heartbeats move the last id and are neither logged nor applied; other types are ignored", () => {
  const taken = takeBatch(
    [
      { type: "heartbeat", id: "9", data: {} },
      { type: "message", id: null, data: { x: 1 } },
    ],
    3,
  );
  assert.deepEqual(taken, { lines: [], changed: [], appliedThrough: 3, lastEventId: 9, resync: false, upkeep: false });
});

test("a resync resumes after its number and takes nothing that follows it", () => {
  const taken = takeBatch(
    [pruned("4", "ses_a", "msg_1"), { type: "resync", id: "10", data: { firstKept: 8, resumeAfter: 10 } }, pruned("11", "ses_b", "msg_9")],
    3,
  );
  assert.equal(taken.resync, true);
  assert.equal(taken.appliedThrough, 10);
  assert.equal(taken.lastEventId, 10);
  assert.deepEqual(
    taken.lines.map((l) => [l.id, l.type]),
    [
      ["4", PRUNED],
      ["10", "resync"],
    ],
  );
  assert.deepEqual(taken.changed, [{ sessionID: "ses_a", messageID: "msg_1" }]);
});

test("restores and compactions are applied like prunes", () => {
  const taken = takeBatch(
    [
      { type: RESTORED, id: "4", data: { sessionID: "ses_a", messageID: "msg_1" } },
      { type: COMPACTED, id: "5", data: { sessionID: "ses_b", snapshots: 7 } },
    ],
    3,
  );
  assert.equal(taken.changed.length, 2);
  assert.equal(taken.appliedThrough, 5);
});

test("what the applied events name: the open session's messages once each, every session once", () => {
  const changed = [
    { sessionID: "ses_a", messageID: "msg_1" },
    { sessionID: "ses_b", messageID: "msg_7" },
    { sessionID: "ses_a", messageID: "msg_1" },
    { sessionID: "ses_a", snapshots: 3 },
    { sessionID: "ses_a", messageID: "msg_2" },
  ];
  assert.deepEqual(named(changed, "ses_a"), { here: true, messages: ["msg_1", "msg_2"], sessions: ["ses_a", "ses_b"] });
  assert.deepEqual(named(changed, "ses_c"), { here: false, messages: [], sessions: ["ses_a", "ses_b"] });
  assert.deepEqual(named(changed, null), { here: false, messages: [], sessions: ["ses_a", "ses_b"] });
  // A compaction names the session and no message.
  assert.deepEqual(named([{ sessionID: "ses_b", snapshots: 2 }], "ses_b"), { here: true, messages: [], sessions: ["ses_b"] });
});

test("the log's words for each kind of event", () => {
  assert.equal(describeEvent(PRUNED, { messageID: "msg_1" }), "pruned msg_1");
  assert.equal(describeEvent(RESTORED, { messageID: "msg_1" }), "restored msg_1");
  assert.equal(describeEvent(COMPACTED, { sessionID: "ses_a", snapshots: 4 }), "compacted 4 snapshot(s) of ses_a");
  assert.equal(describeEvent("resync", { resumeAfter: 12 }), "resync: resumed after #12");
});

test("an id that is not decimal digits counts as none: the event is a retry's, applied once", () => {
  for (const id of ["1e3", "0x10", "abc", "", " 7", "-1"]) {
    const taken = takeBatch([pruned(id, "ses_a", "msg_1")], 3);
    assert.deepEqual(taken.changed, [], id);
    assert.equal(taken.appliedThrough, 3, id);
    assert.equal(taken.lastEventId, null, id);
    assert.deepEqual(
      taken.lines.map((l) => [l.id, l.again]),
      [[null, true]],
      id,
    );
  }
});

test("a resync without a number to resume after keeps the last applied", () => {
  for (const data of [{}, { resumeAfter: "x" }, { resumeAfter: -2 }, { resumeAfter: 1.5 }, null]) {
    const taken = takeBatch([{ type: "resync", id: "9", data }], 3);
    assert.equal(taken.resync, true);
    assert.equal(taken.appliedThrough, 3, JSON.stringify(data));
  }
  // The stream's own shape, and digits as text, are numbers.
  assert.equal(takeBatch([{ type: "resync", id: "9", data: { resumeAfter: "12" } }], 3).appliedThrough, 12);
});

test("an event whose data is no object is applied as naming nothing", () => {
  const taken = takeBatch([{ type: PRUNED, id: "4", data: null }], 3);
  assert.deepEqual(taken.changed, [{}]);
  assert.deepEqual(named(taken.changed, "ses_a"), { here: false, messages: [], sessions: [] });
});

test("an upkeep run is logged without a number and asks for the upkeep view again", () => {
  const run = { run: 4, status: "cleaned", counts: { pruned: 12 } };
  const taken = takeBatch([pruned("4", "ses_a", "msg_1"), { type: UPKEEP, id: null, data: run }], 3);
  assert.equal(taken.upkeep, true);
  assert.equal(taken.appliedThrough, 4);
  assert.deepEqual(taken.changed, [{ sessionID: "ses_a", messageID: "msg_1" }]);
  assert.deepEqual(taken.lines[1], { id: null, type: UPKEEP, data: run, again: false });
  assert.equal(describeEvent(UPKEEP, run), "upkeep: clean 4 cleaned, 12 pruned");
});
