// The `/prune` command (docs/plugin.md, "Commands"): what each form asks the server, and the
// answer a person reads. Nothing here calls the model. A prune OpenCode's fence refuses
// because the session is in use waits until the session settles, and its answer follows.

import { bytes, count } from "./words.mjs";

/** The forms of `/prune`, one line each, as `/prune help` prints them. */
export const USAGE = [
  "/prune            what a clean of this session would take (nothing is changed)",
  "/prune apply      prune it (tool output and reasoning before the last turns; your text and the model's replies stay)",
  "/prune old        prune only what is older than the last compaction: the model is sent the same as before",
  "/prune all        clean every session of the database",
  "/prune stats      where the database's bytes are",
  "/prune undo [ID]  put back the newest prune of this session (or the receipt ID)",
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
  switch (verb) {
    case "":
    case "preview":
      return { text: await preview(api, sessionID, keepLastTurns) };
    case "apply":
      return apply(api, sessionID, { keepLastTurns, beforeCompaction: false });
    case "old":
      return apply(api, sessionID, { keepLastTurns, beforeCompaction: true });
    case "all":
      return { text: await all(api, { keepLastTurns, beforeCompaction: false }) };
    case "stats":
      return { text: await stats(api, sessionID) };
    case "undo":
      return { text: await undo(api, sessionID, rest[0]) };
    case "help":
      return { text: USAGE };
    default:
      return { text: `session-prune: no such form /prune ${verb}\n${USAGE}` };
  }
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
  const done = { messages: 0, parts: 0, bytes: 0, refused: {} };
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
      done.messages += 1;
      done.parts += answer.removedCount;
      done.bytes += prune.bytes;
    } else {
      done.refused[answer.reason] = (done.refused[answer.reason] || 0) + 1;
    }
  }
  return done;
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
  lines.push("/prune undo puts the newest prune back. Freed pages stay in the file until `session-prune vacuum`.");
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
    return [doneWords(done, policy.beforeCompaction).replace("session-prune:", "session-prune (after the session settled):"), refused]
      .filter(Boolean)
      .join("\n");
  }
  return `session-prune: the session stayed in use for ${SETTLE_LIMIT_MS / 60_000} minutes; nothing more was pruned. Run /prune apply again.`;
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
  if (total.messages) lines.push("Freed pages stay in the file until `session-prune vacuum` (with OpenCode stopped) gives them back.");
  return lines.join("\n");
}

async function stats(api, sessionID) {
  const overview = await api.get("stats?top=3");
  const technical = overview.technical || {};
  const tools = technical.toolParts || { count: 0, bytes: 0 };
  const reasoning = technical.reasoningParts || { count: 0, bytes: 0 };
  const v2 = technical.v2Entries || { count: 0, bytes: 0 };
  const lines = [
    `session-prune: the database is ${bytes(overview.databaseBytes)}, ${bytes(overview.freeBytes)} of it free pages (\`session-prune vacuum\` gives those back).`,
    `Tool output and reasoning: ${bytes(tools.bytes + reasoning.bytes + v2.bytes)}${overview.estimate ? " (estimated)" : ""}.`,
  ];
  const here = (overview.sessions || []).find((session) => session.sessionID === sessionID);
  const plan = await api.post("session-pruning/clean-plan", { sessionID }).catch(() => null);
  if (here) lines.push(`This session: ${bytes(here.totalBytes)}, ${bytes(here.prunableBytes)} of it tool output and reasoning.`);
  if (plan && plan.status === "plan") lines.push(`/prune apply would take ${bytes(plan.bytes)} of this session now.`);
  const largest = (overview.sessions || []).map((session) => `  ${session.title || session.sessionID}: ${bytes(session.totalBytes)}`);
  if (largest.length) lines.push("Largest sessions:", ...largest);
  return lines.join("\n");
}

async function undo(api, sessionID, receiptID) {
  let target = receiptID;
  if (!target) {
    const receipts = await api.get(`session-pruning/receipts?sessionID=${encodeURIComponent(sessionID)}`);
    const restored = new Set(receipts.filter((receipt) => receipt.restores).map((receipt) => receipt.restores));
    const prunes = receipts
      .filter((receipt) => !receipt.restores && receipt.messageID && !restored.has(receipt.receiptID))
      .sort((a, b) => b.committedAtMs - a.committedAtMs);
    if (!prunes.length) return "session-prune: this session has no prune to undo.";
    target = prunes[0].receiptID;
  }
  const answer = await api.post("session-pruning/restore", { receiptID: target });
  if (answer.status === "restored") {
    return `session-prune: put back ${count(answer.restoredCount, "part")} of message ${answer.messageID} (receipt ${target}).`;
  }
  return `session-prune: receipt ${target} cannot be undone (${answer.reason}).`;
}
