// The `/prune` command (docs/plugin.md, "Commands"): what each form asks the server, and the
// answer a person reads. Nothing here calls the model. A prune OpenCode's fence refuses
// because the session is in use waits until the session settles, and its answer follows.

import { bytes, count } from "./words.mjs";

/** The forms of `/prune`, one line each, as `/prune help` prints them. */
export const USAGE = [
  "/prune            what a clean of this session would take (nothing is changed)",
  "/prune apply      prune it (tool output and reasoning before the last turns; your text and the model's replies stay)",
  "/prune old        prune only what is older than the last compaction: the model is sent the same as before",
  "/prune all        prune every session of the database",
  "/prune stats      where the database's bytes are",
  "/prune undo [ID]  put back what the last /prune apply, old or all took here (or the prune of receipt ID)",
  "/prune receipts   this session's newest prunes, with their receipt IDs",
  "/prune help       this list",
].join("\n");

/** How often a waiting prune looks whether its session settled, and for how long, ms. */
const SETTLE_POLL_MS = 2_000;
const SETTLE_LIMIT_MS = 15 * 60_000;

/**
 * Runs `/prune TEXT` for `sessionID` through `api` (a `client` of api.mjs) with the plugin's
 * `options` (`keepLastTurns`). Resolves to `{text, later}`: the answer now, and, when a prune
 * waits for its session to settle, `later`, a promise of the answer that follows.
 */
export async function runCommand(api, { sessionID, text }, options = {}) {
  const [verb = "", ...rest] = String(text || "").trim().split(/\s+/).filter(Boolean);
  const keepLastTurns = options.keepLastTurns ?? 2;
  if (!FORMS.has(verb)) return { text: `session-prune: no such form /prune ${shown(verb)}\n${USAGE}` };
  const takes = verb === "undo" ? 1 : 0;
  if (rest.length > takes) {
    const turns = ["apply", "old", "all", "", "preview"].includes(verb) ? " (the plugin's options set the turns kept: docs/plugin.md)" : "";
    return { text: `session-prune: /prune ${verb} takes ${takes ? "one receipt ID" : "nothing"} after it, not "${shown(rest.slice(takes).join(" "))}"${turns}.\n${USAGE}` };
  }
  switch (verb) {
    case "":
    case "preview":
      return { text: await preview(api, sessionID, keepLastTurns) };
    case "apply":
      return oneAtATime(sessionID, () => apply(api, sessionID, { keepLastTurns, beforeCompaction: false }));
    case "old":
      return oneAtATime(sessionID, () => apply(api, sessionID, { keepLastTurns, beforeCompaction: true }));
    case "all":
      return oneAtATime(ALL, async () => ({ text: await all(api, { keepLastTurns, beforeCompaction: false }) }));
    case "stats":
      return { text: await stats(api, sessionID, keepLastTurns) };
    case "undo":
      return oneAtATime(sessionID, async () => ({ text: await undo(api, sessionID, rest[0]) }));
    case "receipts":
      return { text: await listReceipts(api, sessionID) };
    case "help":
      return { text: USAGE };
    default:
      return { text: `session-prune: no such form /prune ${shown(verb)}\n${USAGE}` };
  }
}

/** The forms `runCommand` knows. */
const FORMS = new Set(["", "preview", "apply", "old", "all", "stats", "undo", "receipts", "help"]);

/** At most this many characters of what a person typed are repeated in an answer. */
const SHOWN_CHARACTERS = 80;

/** `text` cut to `SHOWN_CHARACTERS`, with an ellipsis when it was longer. */
export function shown(text) {
  const characters = [...String(text)];
  return characters.length > SHOWN_CHARACTERS ? `${characters.slice(0, SHOWN_CHARACTERS).join("")}…` : characters.join("");
}

/** The key `/prune all` waits on. */
const ALL = Symbol("all sessions");

/** What writes in each session (and in all, `ALL`) is running now: a second `/prune apply`,
 * `old` or `undo` of a session starts when the first is done, so that it plans on what the
 * first left (and its words count only its own prunes). */
const running = new Map();

function oneAtATime(key, work) {
  const previous = running.get(key) || Promise.resolve();
  const next = previous.then(work);
  // The next one waits for this one's answer that follows a wait too (`later`).
  const done = next.then((answer) => answer?.later).catch(() => {});
  running.set(key, done);
  done.then(() => {
    if (running.get(key) === done) running.delete(key);
  });
  return next;
}

function plan(api, sessionID, { keepLastTurns, beforeCompaction }) {
  return api.post("session-pruning/clean-plan", { sessionID, keepLastTurns, beforeCompaction });
}

/** `{parts, bytes, messages}` of a plan's prunes that are not refused now. */
function admitted(planned) {
  const prunes = planned.prunes.filter((prune) => !prune.blocked);
  return { parts: planned.parts, bytes: planned.bytes, messages: prunes.length };
}

/** Refused prunes of a plan, by reason. */
function refusals(prunes) {
  const reasons = {};
  for (const prune of prunes) if (prune.blocked) reasons[prune.blocked] = (reasons[prune.blocked] || 0) + 1;
  return reasons;
}

/** Whether a refusal passes by itself: OpenCode is using the session, or wrote it moments ago. */
function inUse(reasons) {
  return (reasons.maintenance_required || 0) > 0;
}

async function preview(api, sessionID, keepLastTurns) {
  const now = await plan(api, sessionID, { keepLastTurns, beforeCompaction: false });
  if (now.status !== "plan") return `session-prune: this session cannot be planned (${now.reason}).`;
  const old = await plan(api, sessionID, { keepLastTurns, beforeCompaction: true });
  const take = admitted(now);
  const reasons = refusals(now.prunes);
  const lines = [];
  if (!take.messages && !Object.keys(reasons).length) {
    lines.push(`session-prune: nothing to prune in this session before its last ${count(keepLastTurns, "turn")}.`);
  } else {
    lines.push(
      `session-prune: a clean of this session would prune ${count(take.parts, "tool and reasoning part")} ` +
        `of ${count(take.messages, "message")}, ${bytes(take.bytes)}, keeping the last ${count(keepLastTurns, "turn")}. ` +
        "Your text and the model's replies stay.",
    );
  }
  if (inUse(reasons)) {
    lines.push(`${count(reasons.maintenance_required, "message")} cannot be pruned now: OpenCode is using this session or wrote it moments ago. /prune apply waits for it to settle.`);
  }
  lines.push(...contextWords(take.bytes, old.status === "plan" ? old.bytes : 0));
  if (take.messages) lines.push("Run /prune apply to prune it; /prune undo puts the newest prune back.");
  return lines.join("\n");
}

/** Whether pruning `total` bytes, `old` of them before the last compaction, changes what the
 * model is sent next. */
function contextWords(total, old) {
  if (!total) return [];
  if (old >= total) {
    return ["All of it is older than the session's last compaction: OpenCode no longer sends it to the model, so the next request is the same."];
  }
  const sent = "OpenCode still sends it to the model: pruning it makes the next request smaller, and the provider's prompt cache starts over, so the next turn costs more once.";
  if (old > 0) {
    return [`${bytes(old)} of it is older than the last compaction (/prune old takes only that, and the model is sent the same). The rest: ${sent}`];
  }
  return [sent];
}

/** Makes each prune of `planned` not refused now; counts what committed and what was refused. */
async function prunePlanned(api, planned) {
  const done = { messages: 0, parts: 0, bytes: 0, refused: {}, pruned: [] };
  for (const prune of planned.prunes) {
    if (prune.blocked) {
      done.refused[prune.blocked] = (done.refused[prune.blocked] || 0) + 1;
      continue;
    }
    const answer = await api.post("session-pruning/prune", {
      sessionID: planned.sessionID,
      messageID: prune.messageID,
      revision: prune.revision,
      indexes: prune.indexes,
    });
    if (answer.status === "pruned") {
      done.pruned.push({ messageID: answer.messageID, revision: answer.revision });
      done.messages += 1;
      done.parts += answer.removedCount;
      done.bytes += prune.bytes;
    } else {
      done.refused[answer.reason] = (done.refused[answer.reason] || 0) + 1;
    }
  }
  if (done.pruned.length) lastPrunes.set(planned.sessionID, done.pruned);
  return done;
}

/**
 * The prunes the last `/prune apply`, `old`, `all` or idle clean made in each session, as
 * `{messageID, revision}` (the revision after the prune): what `/prune undo` puts back. Kept in
 * this process only: after OpenCode starts again, `/prune undo` puts back the newest prune of one
 * message.
 */
const lastPrunes = new Map();

/** Why a plan takes nothing, in words: `policy` is the plan's. */
function nothingWords(planned, { keepLastTurns, beforeCompaction }) {
  const skipped = planned.skipped || {};
  const lines = [];
  if (!planned.lookedAt) {
    lines.push(
      beforeCompaction
        ? "session-prune: nothing is older than this session's last compaction (or it has none yet); /prune apply takes what is before the last turns."
        : `session-prune: nothing to prune: this session has no message before its last ${count(keepLastTurns, "turn")}.`,
    );
  } else {
    lines.push(
      `session-prune: nothing to prune: the ${count(planned.lookedAt, "message")} ${beforeCompaction ? "older than the last compaction" : `before the last ${count(keepLastTurns, "turn")}`} hold no tool output or reasoning that is left (already pruned, or text only).`,
    );
  }
  if (skipped.restored) {
    lines.push(`${count(skipped.restored, "message")} put back by /prune undo ${skipped.restored === 1 ? "is" : "are"} left alone: no clean takes back what a person put back.`);
  }
  return lines.join("\n");
}

function doneWords(done, beforeCompaction) {
  if (!done.messages) return "session-prune: nothing was pruned.";
  const lines = [
    `session-prune: pruned ${count(done.parts, "tool and reasoning part")} of ${count(done.messages, "message")}, ${bytes(done.bytes)}.`,
  ];
  lines.push(
    beforeCompaction
      ? "All of it was older than the last compaction: the model is sent the same as before."
      : "What the model still saw of it is no longer sent: the next request is smaller, and the provider's prompt cache starts over once.",
  );
  lines.push("/prune undo puts back what this took. Freed pages stay in the file until `session-prune vacuum`.");
  return lines.join("\n");
}

function refusedWords(refused) {
  const reasons = Object.entries(refused);
  if (!reasons.length) return null;
  return `Refused: ${reasons.map(([reason, n]) => `${count(n, "message")} ${reason}`).join(", ")} (docs/refusals.md says why).`;
}

async function apply(api, sessionID, policy) {
  const planned = await plan(api, sessionID, policy);
  if (planned.status !== "plan") return { text: `session-prune: this session cannot be pruned (${planned.reason}).` };
  if (!planned.prunes.length) return { text: nothingWords(planned, policy) };
  const done = await prunePlanned(api, planned);
  const waiting = done.refused.maintenance_required || 0;
  delete done.refused.maintenance_required;
  const lines = [doneWords(done, policy.beforeCompaction)];
  const refused = refusedWords(done.refused);
  if (refused) lines.push(refused);
  if (!waiting) return { text: lines.join("\n") };
  lines.push(`${count(waiting, "message")} wait: OpenCode is using this session or wrote it moments ago. They are pruned when it settles, and the answer follows.`);
  return { text: lines.join("\n"), later: afterSettling(api, sessionID, policy) };
}

/** Waits until no planned prune of the session is refused as in use, then prunes; the words. */
async function afterSettling(api, sessionID, policy) {
  const until = Date.now() + SETTLE_LIMIT_MS;
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, SETTLE_POLL_MS));
    const planned = await plan(api, sessionID, policy);
    if (planned.status !== "plan") return `session-prune: this session cannot be pruned (${planned.reason}).`;
    if (inUse(refusals(planned.prunes))) continue;
    const done = await prunePlanned(api, planned);
    if (inUse(done.refused) && Date.now() < until) {
      // Busy again between the plan and the prune: what committed stays, the rest waits.
      if (!done.messages) continue;
    }
    const refused = refusedWords(done.refused);
    if (!done.messages && !planned.prunes.length) {
      return "session-prune (after the session settled): nothing was left to prune: another prune (an idle clean, another window) took it meanwhile.";
    }
    return [doneWords(done, policy.beforeCompaction).replace("session-prune:", "session-prune (after the session settled):"), refused]
      .filter(Boolean)
      .join("\n");
  }
  return (
    `session-prune: OpenCode still marks this session as in use after ${SETTLE_LIMIT_MS / 60_000} minutes; nothing more was pruned. ` +
    "If no run is going on (OpenCode was stopped during one), the mark stays until the session runs again: send it a prompt, then /prune apply; " +
    "or, with OpenCode stopped, take it as a run OpenCode left (`session-prune clean SESSION --apply --abandoned-after 1m`)."
  );
}

async function all(api, policy) {
  const total = { sessions: 0, messages: 0, parts: 0, bytes: 0, refused: {} };
  let cursor = null;
  do {
    const page = await api.get(`sessions${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ""}`);
    for (const session of page.sessions) {
      if (!session.prunableBytes) continue;
      const planned = await plan(api, session.sessionID, policy);
      if (planned.status !== "plan") continue;
      const done = await prunePlanned(api, planned);
      if (done.messages) total.sessions += 1;
      total.messages += done.messages;
      total.parts += done.parts;
      total.bytes += done.bytes;
      for (const [reason, n] of Object.entries(done.refused)) total.refused[reason] = (total.refused[reason] || 0) + n;
    }
    cursor = page.cursor;
  } while (cursor);
  const lines = [
    total.messages
      ? `session-prune: pruned ${count(total.parts, "tool and reasoning part")} of ${count(total.messages, "message")} in ${count(total.sessions, "session")}, ${bytes(total.bytes)}, keeping each session's last ${count(policy.keepLastTurns, "turn")}.`
      : "session-prune: nothing to prune in any session.",
  ];
  const waiting = total.refused.maintenance_required || 0;
  delete total.refused.maintenance_required;
  if (waiting) lines.push(`${count(waiting, "message")} of sessions in use were left: run /prune all again later.`);
  const refused = refusedWords(total.refused);
  if (refused) lines.push(refused);
  if (total.messages) {
    lines.push(
      policy.beforeCompaction
        ? "All of it was older than each session's last compaction: the model is sent the same as before."
        : "What the model still saw of it is no longer sent: each session's next request is smaller, and the provider's prompt cache starts over once.",
    );
    lines.push("/prune undo in a session puts back what this took there. Freed pages stay in the file until `session-prune vacuum` (with OpenCode stopped) gives them back.");
  }
  return lines.join("\n");
}

async function stats(api, sessionID, keepLastTurns) {
  const overview = await api.get("stats?top=3");
  const technical = overview.technical || {};
  const tools = technical.toolParts || { count: 0, bytes: 0 };
  const reasoning = technical.reasoningParts || { count: 0, bytes: 0 };
  const v2 = technical.v2Entries || { count: 0, bytes: 0 };
  const lines = [
    `session-prune: the database is ${bytes(overview.databaseBytes + (overview.walBytes || 0))} with its write-ahead log, ${bytes(overview.freeBytes)} of it free pages (\`session-prune vacuum\` gives those back).`,
    `Tool output and reasoning: ${bytes(tools.bytes + reasoning.bytes + v2.bytes)}${overview.estimate ? " (estimated)" : ""}.`,
  ];
  const plan = await api.post("session-pruning/clean-plan", { sessionID, keepLastTurns }).catch(() => null);
  if (plan && plan.status === "plan") {
    const restored = plan.skipped?.restored || 0;
    lines.push(
      `This session: /prune apply would take ${bytes(plan.bytes)} now` +
        (restored ? ` (${count(restored, "message")} put back by /prune undo ${restored === 1 ? "is" : "are"} left alone).` : "."),
    );
  }
  const largest = (overview.sessions || []).map((session) => `  ${session.title || session.sessionID}: ${bytes(session.totalBytes)}`);
  if (largest.length) lines.push("Largest sessions:", ...largest);
  return lines.join("\n");
}

/** A receipt id as the server writes them: a UUID. */
const RECEIPT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The session's receipts, newest first, and the ids of the prunes put back since. */
async function receiptsOf(api, sessionID) {
  const receipts = await api.get(`session-pruning/receipts?sessionID=${encodeURIComponent(sessionID)}`);
  const restored = new Set(receipts.filter((receipt) => receipt.restores).map((receipt) => receipt.restores));
  const prunes = receipts
    .filter((receipt) => !receipt.restores && receipt.messageID)
    .sort((a, b) => b.committedAtMs - a.committedAtMs);
  return { prunes, restored };
}

/** Puts back each prune of `targets` (receipts, newest first); `{messages, parts, refused}`. */
async function putBack(api, targets) {
  const done = { messages: 0, parts: 0, refused: {} };
  for (const receipt of targets) {
    const answer = await api.post("session-pruning/restore", { receiptID: receipt.receiptID });
    if (answer.status === "restored") {
      done.messages += 1;
      done.parts += answer.restoredCount;
    } else {
      done.refused[answer.reason] = (done.refused[answer.reason] || 0) + 1;
    }
  }
  return done;
}

function putBackWords(done, what) {
  const lines = [
    done.messages
      ? `session-prune: put back ${count(done.parts, "part")} of ${count(done.messages, "message")}: ${what}.`
      : `session-prune: nothing was put back (${what}).`,
  ];
  const refused = refusedWords(done.refused);
  if (refused) lines.push(refused);
  if (done.messages) {
    lines.push("OpenCode sends what was put back to the model again from the next request, unless it is older than the last compaction.");
    lines.push("A clean leaves what was put back alone; /prune receipts lists this session's prunes.");
  }
  return lines.join("\n");
}

async function undo(api, sessionID, receiptID) {
  const { prunes, restored } = await receiptsOf(api, sessionID);
  if (receiptID) {
    if (!RECEIPT_ID.test(receiptID)) {
      return `session-prune: ${shown(receiptID)} is no receipt ID (a receipt ID looks like 01934f2a-7c1e-7d2b-9a3e-5f6b7c8d9e0f); /prune receipts lists this session's.`;
    }
    const wanted = receiptID.toLowerCase();
    const receipt = prunes.find((candidate) => candidate.receiptID === wanted);
    if (!receipt) return `session-prune: this session has no prune with receipt ${receiptID}; /prune receipts lists its prunes.`;
    if (restored.has(wanted)) return `session-prune: the prune of receipt ${wanted} was already put back.`;
    return putBackWords(await putBack(api, [receipt]), `the prune of receipt ${wanted}`);
  }
  const last = lastPrunes.get(sessionID);
  if (last) {
    lastPrunes.delete(sessionID);
    const targets = prunes.filter(
      (receipt) =>
        !restored.has(receipt.receiptID) &&
        last.some((prune) => prune.messageID === receipt.messageID && prune.revision === receipt.revisionAfter),
    );
    if (targets.length) return putBackWords(await putBack(api, targets), "what the last prune here took");
  }
  const newest = prunes.find((receipt) => !restored.has(receipt.receiptID));
  if (!newest) return "session-prune: this session has no prune to undo.";
  return putBackWords(await putBack(api, [newest]), `the newest prune of this session, one message (receipt ${newest.receiptID})`);
}

/** How many of a session's prunes `/prune receipts` lists. */
const RECEIPTS_LISTED = 10;

async function listReceipts(api, sessionID) {
  const { prunes, restored } = await receiptsOf(api, sessionID);
  if (!prunes.length) return "session-prune: this session has no prune.";
  const shown = Math.min(prunes.length, RECEIPTS_LISTED);
  const heading =
    prunes.length > shown ? `the newest ${shown} of this session's ${prunes.length} prunes` : `this session's ${count(prunes.length, "prune")}`;
  const lines = [`session-prune: ${heading}, newest first (/prune undo ID puts one back):`];
  for (const receipt of prunes.slice(0, RECEIPTS_LISTED)) {
    const when = new Date(receipt.committedAtMs).toISOString().replace("T", " ").slice(0, 16);
    const state = restored.has(receipt.receiptID) ? ", put back" : "";
    lines.push(`  ${when} UTC  ${count(receipt.removedCount, "part")}, ${bytes(receipt.bytesRemoved)} of ${receipt.messageID}${state}  ${receipt.receiptID}`);
  }
  return lines.join("\n");
}
