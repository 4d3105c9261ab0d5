// The panel beside the messages: a message's preview and the prune of the parts chosen in it;
// the clean of the session (its dry run, planned by the server's `clean-plan` route, then one
// `prune` per planned message with progress and a Stop button); and the session's receipts.

import { MOST_KEPT_TURNS, describe, keptTurns, pruneBodies, samePrunes } from "./clean.js";
import { bytes, text } from "./messages.js";
import { REASONS } from "./reasons.js";
import { $, api, notice, state } from "./state.js";

/** Fills the panel; a clean that runs keeps its progress and Stop button above whatever else it shows. */
export function panel(title, ...content) {
  $("panel-title").textContent = title;
  $("panel-body").replaceChildren(...(state.cleaning ? [state.cleaning] : []), ...content);
}

function blockedLine(reason) {
  return text("p", "blocked", `blocked: ${reason} — ${REASONS[reason] ?? ""}`);
}

/** What a message's "Preview prune" button does: the parts ticked in the message (none: all). */
export function onPreview(messageID, checked) {
  return preview(messageID, { checked });
}

/**
 * Previews a message in the panel: from its button (`checked`: the parts to tick, none ticks
 * all), or again after an event named it (`fresh: false`: nothing ticked, and the answer of
 * the prune made from the panel kept).
 */
export async function preview(messageID, { checked = [], fresh = true } = {}) {
  const open = state.open;
  if (fresh) open.pruneNote = null;
  open.previewing = messageID;
  const answer = await api.post(state.paths.pruning("preview"), { sessionID: open.id, messageID });
  if (state.open !== open || open.previewing !== messageID) return;
  if (answer.status !== "preview") {
    panel(`Message ${messageID}`, blockedLine(answer.reason));
    return;
  }
  const all = answer.parts.map((p) => p.index);
  const choose = new Set(fresh ? (checked.length > 0 ? checked : all) : []);
  const rows = answer.parts.map((part) => {
    const label = document.createElement("label");
    label.className = "choice";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = String(part.index);
    box.checked = choose.has(part.index);
    label.append(box, text("span", "", `#${part.index} ${part.type} · ${bytes(part.bytes)}`));
    return label;
  });
  const result = text("p", "result", open.pruneNote ?? "");
  const button = text("button", "prune", "Prune selected");
  button.type = "button";
  button.disabled = !answer.liveMutation || answer.parts.length === 0;
  button.addEventListener("click", async () => {
    const indexes = [...$("panel-body").querySelectorAll("label.choice input:checked")].map((b) => Number(b.value));
    if (indexes.length === 0) {
      result.textContent = "Select at least one part.";
      return;
    }
    button.disabled = true;
    try {
      const pruned = await api.post(state.paths.pruning("prune"), {
        sessionID: open.id,
        messageID,
        revision: answer.revision,
        indexes,
      });
      if (pruned.status === "pruned") {
        open.pruneNote = `pruned ${pruned.removedCount} part(s); revision ${pruned.revision.slice(0, 12)}…`;
        const shown = open.previewing === messageID ? $("panel-body").querySelector(".result") : null;
        if (shown) shown.textContent = open.pruneNote;
      } else {
        result.replaceChildren(blockedLine(pruned.reason));
      }
    } catch (error) {
      result.textContent = `refused: ${error.message}`;
    } finally {
      button.disabled = false;
    }
  });
  const intro = answer.parts.length === 0 ? "Nothing left to prune in this message." : answer.liveMutation ? "Choose the parts to remove:" : "This storage is read-only here: nothing can be pruned.";
  panel(`Message ${messageID}`, text("p", "", intro), ...rows, button, result, text("p", "revision", `revision ${answer.revision}`));
}

$("clean").addEventListener("click", () => {
  if (!state.open) return;
  if (state.cleaning) {
    notice("A clean runs: stop it, or wait for it to end, before planning another.", true);
    return;
  }
  cleanDryRun(state.open);
});

/** The server's plan of a clean of the session keeping `turns` turns; null when refused (said). */
async function readPlan(open, turns) {
  const answer = await api.post(state.paths.pruning("clean-plan"), { sessionID: open.id, keepLastTurns: turns });
  if (state.open !== open) return null;
  if (answer.status !== "plan") {
    panel("Clean this session", blockedLine(answer.reason));
    return null;
  }
  return answer;
}

/** The dry run of a clean, as the server plans it; then the apply. */
async function cleanDryRun(open, note = "") {
  if (state.cleaning) return;
  open.previewing = null;
  const keep = text("input", "", "");
  keep.type = "number";
  keep.min = "0";
  keep.max = String(MOST_KEPT_TURNS);
  keep.value = String(open.keepTurns ?? 2);
  keep.id = "keep-turns";
  const summary = text("p", "summary", "Planning the clean…");
  const apply = text("button", "apply", "Apply the clean");
  apply.type = "button";
  apply.disabled = true;
  const label = text("label", "", "Keep the last turns: ");
  label.append(keep);
  panel("Clean this session", ...(note ? [text("p", "blocked", note)] : []), label, summary, apply);
  let plan = null;
  const replan = async () => {
    apply.disabled = true;
    const turns = keptTurns(keep.value);
    if (turns === null) {
      plan = null;
      summary.textContent = `Keep the last turns: a whole number from 0 to ${MOST_KEPT_TURNS}.`;
      return;
    }
    open.keepTurns = turns;
    summary.textContent = "Planning the clean…";
    let read;
    try {
      read = await readPlan(open, turns);
    } catch (error) {
      if (keptTurns(keep.value) === turns) summary.textContent = `The clean could not be planned: ${error.message}`;
      return;
    }
    // A later change of the kept turns planned again meanwhile: its plan is the one shown.
    if (!read || read.keepLastTurns !== keptTurns(keep.value)) return;
    plan = read;
    summary.textContent = describe(plan, bytes);
    apply.disabled = plan.prunes.length === 0;
  };
  keep.addEventListener("change", replan);
  apply.addEventListener("click", () => plan && cleanApply(open, plan));
  await replan();
}

/**
 * Applies a clean: the server plans it again first, and when the session changed since the dry
 * run (a turn added or removed, a message written) the new dry run is shown instead. Then one
 * `prune` per planned message, the request `clean` makes; the progress stays above the panel
 * until it ends.
 */
async function cleanApply(open, dry) {
  const progress = document.createElement("progress");
  const line = text("p", "summary", "Checking the session again…");
  const stop = text("button", "stop", "Stop after this message");
  stop.type = "button";
  let stopping = false;
  stop.addEventListener("click", () => {
    stopping = true;
  });
  const section = document.createElement("section");
  section.className = "cleaning";
  section.append(text("h3", "", `Cleaning ${open.id}`), progress, line, stop);
  state.cleaning = section;
  panel("Cleaning");
  try {
    let plan;
    try {
      plan = await readPlan(open, dry.keepLastTurns);
    } catch (error) {
      line.textContent = `Not applied: the session could not be planned again (${error.message}). Nothing was pruned.`;
      return;
    }
    if (!plan) {
      line.textContent = "Nothing was pruned.";
      return;
    }
    if (!samePrunes(plan, dry)) {
      state.cleaning = null;
      await cleanDryRun(open, "The session changed since the dry run: this is the dry run of it now. Nothing was pruned.");
      return;
    }
    const bodies = pruneBodies(plan);
    progress.max = bodies.length;
    progress.value = 0;
    const counts = new Map();
    let done = 0;
    const counted = () => [...counts].map(([k, n]) => `${n} ${k}`).join(", ");
    for (const body of bodies) {
      if (stopping) break;
      try {
        const result = await api.post(state.paths.pruning("prune"), body);
        const key = result.status === "blocked" ? result.reason : result.status;
        counts.set(key, (counts.get(key) ?? 0) + 1);
        done += 1;
      } catch (error) {
        line.textContent = `Stopped: ${error.message}; ${done} of ${bodies.length} message(s) done: ${counted()}.`;
        return;
      }
      progress.value = done;
      line.textContent = `${done} of ${bodies.length}: ${counted()}`;
    }
    line.textContent = `${stopping ? "Stopped" : "Done"}: ${done} of ${bodies.length} message(s); ${counted() || "nothing to do"}.`;
  } finally {
    stop.remove();
    if (state.cleaning === section) {
      state.cleaning = null;
      // The report stays where the person looks.
      $("panel-body").prepend(progress, line);
      section.remove();
    }
  }
}

$("show-receipts").addEventListener("click", async () => {
  if (!state.open) return;
  $("receipts").hidden = false;
  await loadReceipts();
});

export async function loadReceipts() {
  const open = state.open;
  const receipts = await api.get(state.paths.receipts(open.id));
  if (state.open !== open) return;
  const rows = receipts.reverse().map((r) => {
    const row = document.createElement("tr");
    const what = r.restores ? `restored receipt ${r.restores.slice(0, 8)}…` : `${r.removedCount} part(s), ${bytes(r.bytesRemoved)}`;
    const message = text("td", "", `…${r.messageID.slice(-10)}`);
    message.title = r.messageID;
    const receipt = text("td", "", `…${r.receiptID.slice(-8)}`);
    receipt.title = `receipt ${r.receiptID}`;
    row.dataset.receiptId = r.receiptID;
    row.append(text("td", "", new Date(r.committedAtMs).toLocaleString()), message, text("td", "", what), receipt);
    return row;
  });
  $("receipts-list").replaceChildren(...rows);
  $("receipts-status").textContent = `${receipts.length} receipt(s), newest first`;
}
