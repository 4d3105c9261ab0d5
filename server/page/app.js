// The page's controller: it starts the page (the server's health, the password, the
// workspaces, the address), follows the workspace's event stream and applies what arrives.
// On every `pruned` (or `restored`, `compacted`) event it drops exactly what the event names
// from what it holds: the message (read again and drawn anew), the outline chunks whose
// checkpoint moved, the session's sizes, the panel's preview and receipts when they show that
// session, and the overview (a second later, when reading it is cheap); nothing else is read
// again. After a run of the clean on a schedule it reads the upkeep view again. The views are
// their own files (overview.js, sessions.js, session.js, panel.js, upkeep.js) around one
// declared state (state.js).

import { ApiError, workspacePaths } from "./api.js";
import { UPKEEP, describeEvent, named, takeBatch } from "./events.js";
import { text } from "./messages.js";
import { loadOverview, scheduleOverview } from "./overview.js";
import { loadReceipts, preview } from "./panel.js";
import { loadOutline, openSession, reloadMessages } from "./session.js";
import { loadSessions, refreshSession } from "./sessions.js";
import { $, api, notice, record, route, setRoute, state } from "./state.js";
import { EventStream } from "./stream.js";
import { loadUpkeep } from "./upkeep.js";

/** Events the log keeps on screen. */
const LOG_LINES = 100;

// --- start, password, workspace ------------------------------------------------------------

api.onUnauthorized = () => askPassword(api.password !== null);

async function boot() {
  let workspaces;
  try {
    [state.health, workspaces] = await Promise.all([api.get("/health"), api.get("/api/workspaces")]);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) notice(`The server cannot be reached: ${error.message}`);
    return;
  }
  $("version").textContent = `session-prune ${state.health.version}`;
  loadUpkeep();
  const select = $("workspace");
  select.replaceChildren(
    ...workspaces.map((w) => {
      const option = text("option", "", `${w.directory}`);
      option.value = w.id;
      return option;
    }),
  );
  if (workspaces.length === 0) {
    notice("This database has no workspace (no OpenCode project): there is nothing to browse.");
    return;
  }
  const wanted = route().get("ws");
  const chosen = workspaces.find((w) => w.id === wanted) ?? workspaces[0];
  select.value = chosen.id;
  await openWorkspace(chosen.id, route().get("session"));
}

function askPassword(wrong) {
  const dialog = $("password");
  if (dialog.open) return;
  api.setPassword(null);
  $("password-wrong").hidden = !wrong;
  $("password-input").value = "";
  dialog.showModal();
}

$("password-form").addEventListener("submit", (event) => {
  event.preventDefault();
  api.setPassword($("password-input").value);
  $("password").close();
  boot();
});

$("workspace").addEventListener("change", (event) => openWorkspace(event.target.value, null));

// A changed address (a pasted link, the Back button) opens what it names.
window.addEventListener("hashchange", () => {
  if (!state.health) return;
  const wanted = route();
  if (wanted.get("ws") && wanted.get("ws") !== state.workspace) {
    $("workspace").value = wanted.get("ws");
    openWorkspace(wanted.get("ws"), wanted.get("session"));
  } else if (wanted.get("session") && wanted.get("session") !== state.open?.id) {
    openSession(wanted.get("session"));
  }
});

async function openWorkspace(id, session) {
  state.stream?.stop();
  state.workspace = id;
  state.paths = workspacePaths(id);
  state.open = null;
  $("session").hidden = true;
  setRoute(session);
  startEvents();
  // The overview scans every row's size: it is asked for once the first sessions are shown.
  const sessions = loadSessions(false, loadOverview);
  if (session) await openSession(session);
  await sessions;
}

// --- the event stream ----------------------------------------------------------------------

function startEvents() {
  state.stream = new EventStream({
    api,
    path: state.paths.events,
    storeKey: `session-prune.lastEventId.${state.health.databaseID}.${state.workspace}`,
    startAfter: state.health.lastSeq,
    onEvent: (event) => {
      state.pending.push(event);
      if (!state.draining) drain();
    },
    onStatus: (status, live) => {
      $("events-status").textContent = status;
      $("events-status").className = live ? "live" : "down";
    },
    beforeConnect: sameDatabase,
  });
  state.appliedThrough = Number(state.stream.lastId);
  state.stream.run();
}

/**
 * Before each connection of the stream: whether the server still serves the database the page
 * shows (`"go"`), serves another (`"stop"`), or does not answer (`"wait"`). Another one
 * (restarted on another file) has another journal, whose event numbers mean nothing here: the
 * page starts anew.
 */
async function sameDatabase() {
  let health;
  try {
    health = await api.get("/health");
  } catch {
    // Unreachable: no stream is read before the server says which database it serves.
    return "wait";
  }
  if (health.databaseID === state.health.databaseID) {
    if (state.needsReload) {
      state.needsReload = false;
      notice("");
      reloadAll();
    }
    return "go";
  }
  notice("The server now serves another database: everything was read again.");
  state.stream?.stop();
  setTimeout(boot);
  return "stop";
}

// A page put in the browser's back-forward cache lets its stream go (its connection is one of
// the six the browser gives the origin); shown again, it resumes.
window.addEventListener("pagehide", (event) => {
  if (event.persisted) state.stream?.stop();
});
window.addEventListener("pageshow", (event) => {
  if (!event.persisted || !state.health) return;
  // Other tabs moved the shared last id while this one was away: what it shows is read anew.
  startEvents();
  reloadAll();
});

/**
 * Applies the events that arrived, a batch at a time: a burst (a clean, a replay after a
 * restart) costs one read of each thing it changed, not one per event.
 */
async function drain() {
  state.draining = true;
  try {
    while (state.pending.length > 0) {
      const batch = state.pending.splice(0);
      try {
        await applyEvents(batch);
      } catch (error) {
        // What the batch should have read again is read whole once the server answers.
        state.needsReload = true;
        notice(`Events could not be applied (${error.message}): the page reads everything again once the server answers.`);
      }
    }
  } finally {
    state.draining = false;
  }
}

/** Applies one batch (events.js says what it changes): reads again what it names, once each. */
async function applyEvents(batch) {
  const taken = takeBatch(batch, state.appliedThrough);
  if (taken.lastEventId !== null) record.lastEventId = taken.lastEventId;
  for (const line of taken.lines) log(line);
  state.appliedThrough = taken.appliedThrough;
  record.eventsApplied += taken.changed.length;
  if (taken.upkeep) await loadUpkeep();
  if (taken.resync) {
    notice("The journal no longer holds every event this page missed: everything was read again.");
    await reloadAll();
    return;
  }
  if (taken.changed.length === 0) return;
  const open = state.open;
  const { here, messages, sessions } = named(taken.changed, open?.id ?? null);
  if (messages.length > 0) {
    await reloadMessages(open, messages);
    await loadOutline(open);
    if (messages.includes(open.previewing)) await preview(open.previewing, { fresh: false });
  }
  if (here && !$("receipts").hidden) await loadReceipts();
  for (const sessionID of sessions) {
    if (state.sessions.has(sessionID)) await refreshSession(sessionID);
  }
  scheduleOverview();
}

/** Adds an event to the log: its number (or "(again)") and what it did. */
function log({ id, type, data, again }) {
  const line = document.createElement("li");
  line.dataset.eventId = id ?? "";
  line.dataset.type = type;
  if (data?.messageID) line.dataset.messageId = data.messageID;
  // An upkeep run has no number of its own: it is no journal event.
  const label = type === UPKEEP ? "(run)" : id === null || again ? "(again)" : `#${id}`;
  line.append(text("code", "", label), text("span", "", describeEvent(type, data)));
  const list = $("log");
  list.prepend(line);
  while (list.children.length > LOG_LINES) list.lastElementChild.remove();
}

async function reloadAll() {
  await loadSessions(false, loadOverview);
  if (state.open) await openSession(state.open.id);
}

boot();
