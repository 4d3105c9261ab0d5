// One session: its head (title and sizes), its outline (read again chunk by chunk, keeping the
// chunks whose checkpoint did not move) and the window of messages that loads as it scrolls;
// after events, the messages they named are read again and drawn anew. This file makes those
// reads and draws them; what the page holds of the session, and which read is the latest, is
// open-session.js's.

import { bytes, normalize, render, text } from "./messages.js";
import {
  beginWindowRead,
  chunkKey,
  endWindowRead,
  isLatestRead,
  knownCheckpoints,
  openSession as newOpenSession,
  takeOutline,
  takeReloaded,
  takeWindow,
} from "./open-session.js";
import { onPreview, panel } from "./panel.js";
import { READ_REASONS } from "./reasons.js";
import { $, api, notice, record, setRoute, state } from "./state.js";

/** How near the view (px) an edge of the messages must come for the window beyond it to be read. */
const EDGE_MARGIN = 400;

/** Opens `sessionID`: its head, outline and latest messages; the panel and receipts start anew. */
export async function openSession(sessionID) {
  const open = newOpenSession(sessionID);
  state.open = open;
  setRoute(sessionID);
  $("session").hidden = false;
  panel("Prune", text("p", "", "Choose “Preview prune” on a message, or clean the whole session."));
  $("receipts").hidden = true;
  $("messages-list").replaceChildren();
  for (const row of document.querySelectorAll("#sessions-list li")) row.classList.toggle("current", row.dataset.sessionId === sessionID);
  drawSessionHead(state.sessions.get(sessionID) ?? { sessionID, title: sessionID });
  if (state.noticeOfSession) notice("");
  try {
    await Promise.all([loadOutline(open), loadWindow(open, { kind: "latest" }, "replace")]);
  } catch (error) {
    if (state.open === open) notice(`Session ${sessionID} cannot be shown: ${error.message}`, true);
  }
}

/** Draws the session's title and sizes (a summary of the sessions route, or just its id). */
export function drawSessionHead(session) {
  $("session-title").textContent = session.title || session.sessionID;
  $("session-sizes").textContent =
    session.totalBytes === undefined
      ? session.sessionID
      : `${session.sessionID} · ${bytes(session.totalBytes)} · ${bytes(session.prunableBytes)} prunable · ${session.messages} messages`;
}

/**
 * Reads the outline, sending back the checkpoints held: chunks whose checkpoint did not move
 * come without entries and keep the ones held; the rest (and the newest chunk) are replaced.
 */
export async function loadOutline(open) {
  const held = new Map(open.chunks.map((c) => [chunkKey(c.checkpoint), c]));
  const known = knownCheckpoints(open.chunks);
  const chunks = [];
  let cursor = null;
  let read = 0;
  do {
    const body = { sessionID: open.id, known };
    if (cursor) body.cursor = cursor;
    const answer = await api.post(state.paths.history("outline"), body);
    if (state.open !== open) return;
    if (answer.status !== "outline") {
      $("outline-status").textContent = `outline: ${answer.reason} — ${READ_REASONS[answer.reason] ?? ""}`;
      return;
    }
    const taken = takeOutline(held, answer, chunks);
    if (taken === null) {
      // A chunk answered as unchanged that this page does not hold: read the whole outline.
      open.chunks = [];
      return loadOutline(open);
    }
    read += taken;
    cursor = answer.cursor;
  } while (cursor);
  open.chunks = chunks;
  record.outlineRowsRead = read;
  drawOutline(open);
}

/** Draws the outline: a chunk that did not change keeps its elements; the others are drawn. */
function drawOutline(open) {
  let count = 0;
  for (const chunk of open.chunks) {
    count += chunk.entries.length;
    if (chunk.element) continue;
    chunk.element = document.createElement("div");
    chunk.element.className = "chunk";
    chunk.element.append(...chunk.entries.map((entry) => outlineEntry(open, entry)));
  }
  const list = $("outline-list");
  const first = list.childElementCount === 0;
  list.replaceChildren(...open.chunks.map((c) => c.element));
  if (first) list.parentElement.scrollTop = list.parentElement.scrollHeight;
  $("outline-status").textContent = `${count} messages · ⚒ tool parts · ✎ reasoning`;
}

function outlineEntry(open, entry) {
  const item = document.createElement("li");
  item.dataset.messageId = entry.id;
  item.dataset.seq = String(entry.seq);
  item.className = `role-${entry.type}`;
  const marks = [entry.tools ? `⚒${entry.tools}` : "", entry.reasoning ? `✎${entry.reasoning}` : "", entry.toolName ?? ""].filter(Boolean).join(" ");
  item.title = `${entry.id}: ${entry.type}, ${entry.tools} tool part(s), ${entry.reasoning} reasoning part(s)${entry.toolName ? `, first tool ${entry.toolName}` : ""}`;
  item.append(text("span", "seq", String(entry.seq)), text("span", "type", entry.type), text("span", "marks", marks));
  item.addEventListener("click", () => loadWindow(open, { kind: "around", messageID: entry.id }, "replace"));
  return item;
}

/** Reads a window and draws it: `replace` (a new place), `prepend` (older), `append` (newer). */
async function loadWindow(open, target, mode) {
  const place = beginWindowRead(open, mode);
  if (place === null) return;
  try {
    const answer = await api.post(state.paths.history("window"), { sessionID: open.id, target });
    if (state.open !== open || !isLatestRead(open, place)) return;
    if (answer.status !== "window") {
      notice(`window: ${answer.reason} — ${READ_REASONS[answer.reason] ?? ""}`, true);
      return;
    }
    const list = $("messages-list");
    if (mode === "replace") list.replaceChildren();
    const added = takeWindow(open, answer.messages.map(normalize), answer, mode);
    const elements = added.map((m) => render(m, onPreview));
    if (mode === "prepend") {
      const scroller = $("messages");
      const before = scroller.scrollHeight;
      list.prepend(...elements);
      scroller.scrollTop += scroller.scrollHeight - before;
    } else {
      list.append(...elements);
    }
    if (mode === "replace") {
      const anchor = target.messageID ? messageElement(target.messageID) : null;
      if (anchor) anchor.scrollIntoView({ block: "start" });
      else $("messages").scrollTop = $("messages").scrollHeight;
    }
    $("messages-status").textContent = `${open.messages.size} messages loaded${open.older ? ", older above" : ""}${open.newer ? ", newer below" : ""}`;
  } finally {
    endWindowRead(open, place);
  }
  // An edge still in view after the read (short messages) reads on: the observer only tells
  // of edges that come into view.
  requestAnimationFrame(() => readAtEdges(open));
}

/** Reads the window beyond an edge of the messages that is within reach of the view. */
function readAtEdges(open) {
  if (state.open !== open || open.loading) return;
  const view = $("messages").getBoundingClientRect();
  const near = (id) => {
    const edge = $(id).getBoundingClientRect();
    return edge.bottom >= view.top - EDGE_MARGIN && edge.top <= view.bottom + EDGE_MARGIN;
  };
  if (open.older && near("older-edge")) loadWindow(open, open.older, "prepend");
  else if (open.newer && near("newer-edge")) loadWindow(open, open.newer, "append");
}

/**
 * The events named these messages: drop each that the window holds and draw it again from a
 * fresh read. A read of the window around one of them answers for every other it holds.
 */
export async function reloadMessages(open, messageIDs) {
  const wanted = new Set(messageIDs.filter((id) => open.messages.has(id)));
  while (wanted.size > 0) {
    const [anchor] = wanted;
    const answer = await api.post(state.paths.history("window"), { sessionID: open.id, target: { kind: "around", messageID: anchor } });
    if (state.open !== open) return;
    const fresh = answer.status === "window" ? answer.messages.map(normalize) : [];
    const { replaced, removed } = takeReloaded(open, wanted, anchor, fresh);
    for (const message of replaced) {
      messageElement(message.id)?.replaceWith(render(message, onPreview));
      record.reloadedMessages.push(message.id);
    }
    if (removed !== null) messageElement(removed)?.remove();
  }
}

function messageElement(messageID) {
  return $("messages-list").querySelector(`[data-message-id="${CSS.escape(messageID)}"]`);
}

const watcher = new IntersectionObserver(
  () => {
    if (state.open) readAtEdges(state.open);
  },
  { root: $("messages"), rootMargin: `${EDGE_MARGIN}px 0px` },
);
watcher.observe($("older-edge"));
watcher.observe($("newer-edge"));
