// The workspace's sessions, largest first: read page after page (the first drawn at once),
// more on request, and one session's row read again and moved after a prune changed its size.

import { bytes, text } from "./messages.js";
import { drawSessionHead, openSession } from "./session.js";
import { $, api, record, state } from "./state.js";

/** Session pages the list reads by itself (100 sessions each); the rest on request. */
const SESSION_PAGES_AT_ONCE = 50;

/** Reads the sessions, page after page; `shown` is called once the first page is drawn. */
export async function loadSessions(more = false, shown = () => {}) {
  const token = ++state.sessionsToken;
  record.sessionsLoading = true;
  try {
    await readSessionPages(token, more, shown);
  } finally {
    if (token === state.sessionsToken) {
      record.sessionsLoading = false;
      $("sessions-more").hidden = state.sessionsMore === null;
    }
  }
}

async function readSessionPages(token, more, shown) {
  let cursor = more ? state.sessionsMore : null;
  if (!more) {
    state.sessions.clear();
    state.sessionPage.clear();
  }
  for (let pages = 0; pages < SESSION_PAGES_AT_ONCE; pages += 1) {
    let page;
    try {
      page = await api.get(state.paths.sessions(cursor));
    } catch (error) {
      $("sessions-status").textContent = `The sessions could not be read: ${error.message}`;
      return;
    }
    if (token !== state.sessionsToken) return;
    for (const session of page.sessions) {
      state.sessions.set(session.sessionID, session);
      state.sessionPage.set(session.sessionID, cursor);
    }
    state.sessionsMore = page.cursor;
    // Drawn from the first page on, then every tenth and the last (each draw sorts them all).
    if (pages % 10 === 0 || page.cursor === null || pages === SESSION_PAGES_AT_ONCE - 1) drawSessions();
    else $("sessions-status").textContent = `${state.sessions.size} sessions read, reading more…`;
    if (pages === 0) shown();
    if (record.sessionsShownMs === null) {
      record.sessionsShownMs = performance.now();
      document.body.dataset.sessionsShown = "true";
    }
    cursor = page.cursor;
    if (cursor === null) break;
  }
}

$("sessions-more").addEventListener("click", () => loadSessions(true));

function drawSessions() {
  const sorted = [...state.sessions.values()].sort((a, b) => b.totalBytes - a.totalBytes || b.timeUpdated - a.timeUpdated);
  $("sessions-list").replaceChildren(...sorted.map(sessionRow));
  const more = state.sessionsMore !== null;
  $("sessions-status").textContent = `${sorted.length} session${sorted.length === 1 ? "" : "s"}${more ? ", more to read" : ""}, largest first`;
  $("sessions-more").hidden = !more || record.sessionsLoading;
  const open = state.open && state.sessions.get(state.open.id);
  if (open) drawSessionHead(open);
}

function sessionRow(session) {
  const row = document.createElement("li");
  row.dataset.sessionId = session.sessionID;
  if (state.open?.id === session.sessionID) row.classList.add("current");
  const link = text("a", "title", session.title || session.sessionID);
  link.href = "#";
  link.addEventListener("click", (event) => {
    event.preventDefault();
    openSession(session.sessionID);
  });
  row.append(
    link,
    text(
      "span",
      "sizes",
      `${bytes(session.totalBytes)} · ${bytes(session.prunableBytes)} prunable · ${session.messages} messages · ${session.storage}`,
    ),
  );
  return row;
}

/**
 * Reads the sessions page that holds `sessionID` again, for its sizes after a prune, and moves
 * its row to where its new size sorts (the other rows stay as they are).
 */
export async function refreshSession(sessionID) {
  const page = await api.get(state.paths.sessions(state.sessionPage.get(sessionID) ?? null));
  const fresh = page.sessions.find((s) => s.sessionID === sessionID);
  if (!fresh) return;
  state.sessions.set(sessionID, fresh);
  const list = $("sessions-list");
  list.querySelector(`li[data-session-id="${CSS.escape(sessionID)}"]`)?.remove();
  const after = [...list.children].find((row) => {
    const other = state.sessions.get(row.dataset.sessionId);
    return other && (other.totalBytes < fresh.totalBytes || (other.totalBytes === fresh.totalBytes && other.timeUpdated < fresh.timeUpdated));
  });
  list.insertBefore(sessionRow(fresh), after ?? null);
  if (state.open?.id === sessionID) drawSessionHead(fresh);
}
