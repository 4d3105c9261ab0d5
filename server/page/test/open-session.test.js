// Unit tests of the open session's bookkeeping (`node --test server/page/test/`): the window's
// reads (which is the latest, what an answer adds, where its edges are), the messages read
// again after events, and the outline's chunks kept when their checkpoint did not move.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  MOST_KNOWN,
  beginWindowRead,
  chunkKey,
  endWindowRead,
  isLatestRead,
  knownCheckpoints,
  openSession,
  takeOutline,
  takeReloaded,
  takeWindow,
} from "../open-session.js";

const message = (id, note = "") => ({ id, note });
const ids = (open) => [...open.messages.keys()];

test("a new place supersedes the read in flight; an edge read waits for it", () => {
  const open = openSession("ses_a");
  const first = beginWindowRead(open, "replace");
  assert.equal(first, 1);
  assert.equal(beginWindowRead(open, "prepend"), null);
  assert.equal(beginWindowRead(open, "append"), null);
  const second = beginWindowRead(open, "replace");
  assert.equal(second, 2);
  assert.equal(isLatestRead(open, first), false);
  assert.equal(isLatestRead(open, second), true);
  // The superseded read ending leaves the latest one loading.
  endWindowRead(open, first);
  assert.equal(open.loading, true);
  endWindowRead(open, second);
  assert.equal(open.loading, false);
  assert.equal(beginWindowRead(open, "prepend"), 2);
});

test("a window replaces what was held and sets both edges", () => {
  const open = openSession("ses_a");
  takeWindow(open, [message("m1")], { older: null, newer: null }, "replace");
  const added = takeWindow(open, [message("m5"), message("m6")], { older: { kind: "before", messageID: "m5" }, newer: null }, "replace");
  assert.deepEqual(added.map((m) => m.id), ["m5", "m6"]);
  assert.deepEqual(ids(open), ["m5", "m6"]);
  assert.deepEqual(open.older, { kind: "before", messageID: "m5" });
  assert.equal(open.newer, null);
});

test("an older window keeps the newer edge, a newer window the older one, and nothing is held twice", () => {
  const open = openSession("ses_a");
  const older = { kind: "before", messageID: "m5" };
  const newer = { kind: "after", messageID: "m6" };
  takeWindow(open, [message("m5"), message("m6")], { older, newer }, "replace");
  const before = takeWindow(open, [message("m3"), message("m4"), message("m5")], { older: null, newer: { kind: "after", messageID: "m5" } }, "prepend");
  assert.deepEqual(before.map((m) => m.id), ["m3", "m4"]);
  assert.equal(open.older, null);
  assert.deepEqual(open.newer, newer);
  const after = takeWindow(open, [message("m6"), message("m7")], { older: { kind: "before", messageID: "m6" }, newer: null }, "append");
  assert.deepEqual(after.map((m) => m.id), ["m7"]);
  assert.equal(open.older, null);
  assert.equal(open.newer, null);
  assert.deepEqual(ids(open).sort(), ["m3", "m4", "m5", "m6", "m7"]);
});

test("messages read again replace the held ones; an anchor the window no longer holds is dropped", () => {
  const open = openSession("ses_a");
  takeWindow(open, [message("m1"), message("m2"), message("m3")], { older: null, newer: null }, "replace");
  const wanted = new Set(["m1", "m3"]);
  const first = takeReloaded(open, wanted, "m1", [message("m1", "new"), message("m2", "new"), message("m3", "new")]);
  assert.deepEqual(first.replaced.map((m) => m.id), ["m1", "m3"]);
  assert.equal(first.removed, null);
  assert.equal(wanted.size, 0);
  assert.equal(open.messages.get("m1").note, "new");
  // m2 was not named: the held one stays.
  assert.equal(open.messages.get("m2").note, "");
  const gone = new Set(["m2"]);
  const second = takeReloaded(open, gone, "m2", []);
  assert.deepEqual(second, { replaced: [], removed: "m2" });
  assert.deepEqual(ids(open), ["m1", "m3"]);
});

const checkpoint = (after, through, digest, changed) => ({ after, through, digest, changed });

test("the outline keeps the chunks whose checkpoint did not move and reads the others", () => {
  const kept = { checkpoint: checkpoint(0, 2, "d1", true), entries: [{ seq: 1 }, { seq: 2 }], element: "drawn" };
  const held = new Map([[chunkKey(kept.checkpoint), kept]]);
  const chunks = [];
  const read = takeOutline(
    held,
    { checkpoints: [checkpoint(0, 2, "d1", false), checkpoint(2, 4, "d2", true)], entries: [{ seq: 3 }, { seq: 4 }, { seq: 9 }] },
    chunks,
  );
  assert.equal(read, 2);
  assert.equal(chunks[0], kept);
  assert.deepEqual(chunks[1], { checkpoint: checkpoint(2, 4, "d2", true), entries: [{ seq: 3 }, { seq: 4 }], element: null });
});

test("a chunk said not to have moved that the page does not hold asks for the whole outline", () => {
  const chunks = [];
  assert.equal(takeOutline(new Map(), { checkpoints: [checkpoint(0, 2, "d1", false)], entries: [] }, chunks), null);
});

test("the outline sends back the checkpoints held, and none past the contract's most", () => {
  const chunk = (n) => ({ checkpoint: checkpoint(n, n + 1, `d${n}`, true), entries: [], element: null });
  assert.deepEqual(knownCheckpoints([chunk(0), chunk(1)]), [
    { after: 0, through: 1, digest: "d0" },
    { after: 1, through: 2, digest: "d1" },
  ]);
  const many = Array.from({ length: MOST_KNOWN + 1 }, (_, n) => chunk(n));
  assert.equal(knownCheckpoints(many.slice(0, MOST_KNOWN)).length, MOST_KNOWN);
  assert.deepEqual(knownCheckpoints(many), []);
});
