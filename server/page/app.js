// The page: where the bytes are, the workspace's sessions by size, one session as its outline
// and a window of messages that loads as it scrolls, prunes (one message's parts, or a clean of
// the session), receipts, and the event stream that keeps all of it current. On every
// `pruned` (or `restored`) event it drops exactly what the event names from what it holds: the
// message (read again and drawn anew), the outline chunks whose checkpoint moved, the
// session's sizes; nothing else is read again.

import { Api, ApiError, workspacePaths } from "./api.js";
import { EventStream } from "./stream.js";
import { bytes, normalize, render, text } from "./messages.js";
import { describe, pruneBodies, samePrunes } from "./clean.js";

const PRUNED = "rpc.codenomad.session-pruning.pruned";
const RESTORED = "rpc.codenomad.session-pruning.restored";
// A compaction deleted snapshots of a session's event log: no message changed, its size did.
const COMPACTED = "rpc.codenomad.session-pruning.compacted";
/** Session pages the list reads by itself (100 sessions each); the rest on request. */
const SESSION_PAGES_AT_ONCE = 50;
/** The outline's `known` holds at most this many checkpoints (the contract's most). */
const MOST_KNOWN = 512;
/** How near the view (px) an edge of the messages must come for the window beyond it to be read. */
const EDGE_MARGIN = 400;
/** Events the log keeps on screen. */
const LOG_LINES = 100;

/** What each refusal reason means; the quiet period is the server's (`serve --quiet-period`). */
const REASONS = {
  get maintenance_required() {
    const quiet = state.health ? `${Math.round(state.health.quietPeriodMs / 1000)} s` : "quiet period";
    return `OpenCode may be using the session (a run, a compaction, a staged revert, or a write in the last ${quiet}), or another process holds the database: try again later.`;
  },
  conflict: "The message changed since its preview: preview it again.",
  not_deletable:
    "Nothing here can be pruned: not a completed assistant message, no tool or reasoning part selected, or the session is gone.",
  unsupported_storage: "This storage is not one the engine writes (read-only V2 rows of OpenCode 1.18, an unknown layout, or a damaged database file: `session-prune audit` says which).",
  unavailable: "The server could not read or write the database: its log says why.",
  anchor_missing: "That message is no longer there (deleted, or hidden by a staged revert).",
};

/** What a refusal of a read (a window, an outline) means. */
const READ_REASONS = {
  not_deletable: "There is no such session in this database.",
  conflict: "The session left this workspace, or changed under a scan: open it again.",
  anchor_missing: REASONS.anchor_missing,
  unsupported_storage: "A message is over 16 MiB, the window over 24 MiB, or a row is damaged.",
  unavailable: REASONS.unavailable,
};

const api = new Api();
const $ = (id) => document.getElementById(id);

const state = {
  health: null,
  workspace: null,
  paths: null,
  stream: null,
  /** sessionID -> the summary the sessions route answered. */
  sessions: new Map(),
  /** sessionID -> the cursor of the sessions page that holds it (null: the first). */
  sessionPage: new Map(),
  sessionsMore: null,
  sessionsToken: 0,
  /** The open session, or null. */
  open: null,
  /** The number of the last event applied: a retry's announcement is applied once. */
  appliedThrough: 0,
  /** Events received and not yet applied; `draining` while they are being applied. */
  pending: [],
  draining: false,
  overviewTimer: null,
  /** How long the last overview took to read, ms (null: never read). */
  overviewMs: null,
  /** The progress of the clean that runs, or null. */
  cleaning: null,
  /** The workspace whose overview is being read, or null. */
  overviewLoading: null,
  /** Events could not be applied: everything is read again once the server answers. */
  needsReload: false,
  /** Whether the notice shown concerns the open session only (opening another hides it). */
  noticeOfSession: false,
};

/** An overview that took longer than this to read is read again on request, not after each prune. */
const OVERVIEW_AUTO_MS = 2000;

/** What the page did, for a person at the console and for tests that drive a browser. */
const record = {
  /** When this script began to run, ms since the navigation began. */
  startedMs: performance.now(),
  eventsApplied: 0,
  lastEventId: null,
  reloadedMessages: [],
  outlineRowsRead: 0,
  sessionsShownMs: null,
  sessionsLoading: false,
};
window.sessionPrune = record;

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

/** `#ws=ID&session=ID`: where the page is, so that a reload or a link opens the same place. */
function route() {
  return new URLSearchParams(location.hash.slice(1));
}

function setRoute(session) {
  const params = new URLSearchParams({ ws: state.workspace });
  if (session) params.set("session", session);
  history.replaceState(null, "", `#${params}`);
}

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

/** Shows `message` above everything (`""` hides it); `ofSession`: it concerns the open session only. */
function notice(message, ofSession = false) {
  const line = $("notice");
  line.textContent = message;
  line.hidden = !message;
  state.noticeOfSession = ofSession;
}

// --- the event stream ----------------------------------------------------------------------

function startEvents() {
  const key = `session-prune.lastEventId.${state.health.databaseID}.${state.workspace}`;
  state.stream = new EventStream(
    api,
    state.paths.events,
    key,
    state.health.lastSeq,
    (event) => {
      state.pending.push(event);
      if (!state.draining) drain();
    },
    (status, live) => {
      $("events-status").textContent = status;
      $("events-status").className = live ? "live" : "down";
    },
    sameDatabase,
  );
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

async function applyEvents(batch) {
  const changed = [];
  for (const { type, id, data } of batch) {
    if (id !== null) record.lastEventId = Number(id);
    if (type === "heartbeat") continue;
    if (type === "resync") {
      log(id, type, data, false);
      notice("The journal no longer holds every event this page missed: everything was read again.");
      state.appliedThrough = Number(data.resumeAfter);
      await reloadAll();
      return;
    }
    if (type !== PRUNED && type !== RESTORED && type !== COMPACTED) continue;
    // Every committed event has a number of its own; one without a number, or not past the
    // last applied, is an identical retry's announcement of an event already applied.
    const again = id === null || Number(id) <= state.appliedThrough;
    log(id, type, data, again);
    if (again) continue;
    state.appliedThrough = Number(id);
    record.eventsApplied += 1;
    changed.push(data);
  }
  if (changed.length === 0) return;
  const open = state.open;
  const here = open ? changed.filter((d) => d.sessionID === open.id) : [];
  // A compaction (and its restore) names no message.
  const messages = [...new Set(here.map((d) => d.messageID).filter(Boolean))];
  if (messages.length > 0) {
    await reloadMessages(open, messages);
    await loadOutline(open);
    if (messages.includes(open.previewing)) await preview(open.previewing, { fresh: false });
  }
  if (here.length > 0 && !$("receipts").hidden) await loadReceipts();
  for (const sessionID of new Set(changed.map((d) => d.sessionID))) {
    if (state.sessions.has(sessionID)) await refreshSession(sessionID);
  }
  scheduleOverview();
}

function log(id, type, data, again) {
  const line = document.createElement("li");
  line.dataset.eventId = id ?? "";
  line.dataset.type = type;
  if (data?.messageID) line.dataset.messageId = data.messageID;
  const what =
    type === "resync"
      ? `resync: resumed after #${data.resumeAfter}`
      : type === COMPACTED
        ? `compacted ${data.snapshots} snapshot(s) of ${data.sessionID}`
        : `${type.split(".").pop()} ${data.messageID ?? ""}`;
  line.append(text("code", "", id === null || again ? "(again)" : `#${id}`), text("span", "", what));
  const list = $("log");
  list.prepend(line);
  while (list.children.length > LOG_LINES) list.lastElementChild.remove();
}

async function reloadAll() {
  await loadSessions(false, loadOverview);
  if (state.open) await openSession(state.open.id);
}

// --- where the bytes are -------------------------------------------------------------------

/**
 * After prunes: the overview is read again a second after the last one, when reading it is
 * cheap; on a database where it is not (it reads every row's size), the page says the sizes
 * changed and reads them again when asked.
 */
function scheduleOverview() {
  if (state.overviewMs === null || state.overviewMs > OVERVIEW_AUTO_MS) {
    $("overview-refresh").hidden = false;
    return;
  }
  clearTimeout(state.overviewTimer);
  state.overviewTimer = setTimeout(loadOverview, 1000);
}

$("overview-refresh").addEventListener("click", (event) => {
  event.preventDefault();
  loadOverview();
});

$("overview-exact").addEventListener("click", (event) => {
  event.preventDefault();
  loadOverview(true);
});

/**
 * Reads the overview and draws it: by default the server's estimate (technical content and
 * copies from a sample of rows, marked "about"); with `exact`, every row read (on a large file,
 * seconds).
 */
async function loadOverview(exact = false) {
  const workspace = state.workspace;
  if (state.overviewLoading === workspace) return;
  const started = performance.now();
  state.overviewLoading = workspace;
  $("overview-refresh").hidden = true;
  $("overview-exact").hidden = true;
  let overview;
  try {
    overview = await api.get(state.paths.stats(10, exact));
  } catch (error) {
    // Charts read before stay (the server may be restarting); the link reads them again.
    if ($("overview-body").childElementCount === 0) {
      $("overview-body").replaceChildren(text("p", "error", `The sizes could not be read: ${error.message}`));
    }
    $("overview-refresh").textContent = "could not read them again: try again";
    $("overview-refresh").hidden = false;
    return;
  } finally {
    if (state.overviewLoading === workspace) state.overviewLoading = null;
  }
  // Only the estimate's time decides whether prunes read the overview again by themselves.
  if (!exact) state.overviewMs = performance.now() - started;
  $("overview-refresh").textContent = "prunes changed these: read them again";
  if (workspace !== state.workspace) return;
  const t = overview.technical;
  const technical = t.toolParts.bytes + t.reasoningParts.bytes + t.snapshotEvents.bytes + t.v2Entries.bytes;
  // An estimated figure says so; the estimate gives its margin (95 %).
  const about = overview.estimate ? "about " : "";
  const margin = overview.estimate && overview.estimate.marginBytes > 0 ? ` (± ${bytes(overview.estimate.marginBytes)})` : "";
  $("overview-summary").textContent =
    `file ${bytes(overview.databaseBytes)} · WAL ${bytes(overview.walBytes)} · free ${bytes(overview.freeBytes)} · up to ${about}${bytes(technical)}${margin} technical content and copies of it`;
  $("overview-exact").hidden = !(overview.estimate && overview.estimate.marginBytes > 0);
  $("overview-body").replaceChildren(
    chart("Tables", overview.tables.map((x) => [x.table, x.bytes, `${x.count} rows`])),
    chart(
      overview.estimate && overview.estimate.marginBytes > 0 ? "Technical content (estimated)" : "Technical content",
      [
        ["tool parts", t.toolParts.bytes, `${t.toolParts.count}`],
        ["reasoning parts", t.reasoningParts.bytes, `${t.reasoningParts.count}`],
        ["snapshot events of them", t.snapshotEvents.bytes, `${t.snapshotEvents.count}`],
        ["V2 tool and reasoning items", t.v2Entries.bytes, `${t.v2Entries.count}`],
      ],
    ),
    chart("Event types", overview.events.slice(0, 8).map((x) => [x.type, x.bytes, `${x.count} rows`])),
    chart(
      "Largest sessions",
      overview.sessions.map((s) => [s.title || s.sessionID, s.totalBytes, `${bytes(s.prunableBytes)} prunable`, s.sessionID]),
    ),
  );
}

/** A bar chart: one row per `[label, bytes, note, sessionID?]`, bars relative to the largest. */
function chart(title, rows) {
  const figure = document.createElement("figure");
  figure.className = "chart";
  figure.append(text("figcaption", "", title));
  const most = Math.max(1, ...rows.map((r) => r[1]));
  for (const [label, size, note, session] of rows) {
    const row = document.createElement("div");
    row.className = "bar-row";
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.style.width = `${Math.max(0.5, (100 * size) / most)}%`;
    const name = text(session ? "a" : "span", "label", label);
    if (session) {
      name.href = "#";
      name.addEventListener("click", (event) => {
        event.preventDefault();
        openSession(session);
      });
    }
    row.append(name, text("span", "size", `${bytes(size)} · ${note}`), bar);
    figure.append(row);
  }
  if (rows.length === 0) figure.append(text("p", "empty", "nothing"));
  return figure;
}

// --- sessions --------------------------------------------------------------------------------

/** Reads the sessions, page after page; `shown` is called once the first page is drawn. */
async function loadSessions(more = false, shown = () => {}) {
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
async function refreshSession(sessionID) {
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

// --- one session: outline and window -------------------------------------------------------

async function openSession(sessionID) {
  const open = {
    id: sessionID,
    /** Outline chunks: `{checkpoint, entries}` in order. */
    chunks: [],
    /** messageID -> normalized message, for what the window holds. */
    messages: new Map(),
    older: null,
    newer: null,
    loading: false,
    /** Counts the places the window was opened at; a read for an earlier place is dropped. */
    place: 0,
    previewing: null,
  };
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

function drawSessionHead(session) {
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
async function loadOutline(open) {
  const held = new Map(open.chunks.map((c) => [chunkKey(c.checkpoint), c]));
  const known = open.chunks.length <= MOST_KNOWN ? open.chunks.map(({ checkpoint: c }) => ({ after: c.after, through: c.through, digest: c.digest })) : [];
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
    for (const checkpoint of answer.checkpoints) {
      if (checkpoint.changed) {
        const entries = answer.entries.filter((e) => e.seq > checkpoint.after && e.seq <= checkpoint.through);
        read += entries.length;
        chunks.push({ checkpoint, entries, element: null });
        continue;
      }
      const kept = held.get(chunkKey(checkpoint));
      if (!kept) {
        // A chunk answered as unchanged that this page does not hold: read the whole outline.
        open.chunks = [];
        return loadOutline(open);
      }
      chunks.push(kept);
    }
    cursor = answer.cursor;
  } while (cursor);
  open.chunks = chunks;
  record.outlineRowsRead = read;
  drawOutline(open);
}

function chunkKey(checkpoint) {
  return `${checkpoint.after}:${checkpoint.through}:${checkpoint.digest}`;
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
  if (open.loading && mode !== "replace") return;
  // A new place supersedes every read in flight: what they bring is not drawn.
  if (mode === "replace") open.place += 1;
  const place = open.place;
  open.loading = true;
  try {
    const answer = await api.post(state.paths.history("window"), { sessionID: open.id, target });
    if (state.open !== open || open.place !== place) return;
    if (answer.status !== "window") {
      notice(`window: ${answer.reason} — ${READ_REASONS[answer.reason] ?? ""}`, true);
      return;
    }
    const list = $("messages-list");
    const fresh = answer.messages.map(normalize);
    if (mode === "replace") {
      open.messages.clear();
      list.replaceChildren();
    }
    const added = fresh.filter((m) => !open.messages.has(m.id));
    for (const message of added) open.messages.set(message.id, message);
    const elements = added.map((m) => render(m, onPreview));
    if (mode === "prepend") {
      const scroller = $("messages");
      const before = scroller.scrollHeight;
      list.prepend(...elements);
      scroller.scrollTop += scroller.scrollHeight - before;
    } else {
      list.append(...elements);
    }
    if (mode !== "append") open.older = answer.older;
    if (mode !== "prepend") open.newer = answer.newer;
    if (mode === "replace") {
      const anchor = target.messageID ? messageElement(target.messageID) : null;
      if (anchor) anchor.scrollIntoView({ block: "start" });
      else $("messages").scrollTop = $("messages").scrollHeight;
    }
    $("messages-status").textContent = `${open.messages.size} messages loaded${open.older ? ", older above" : ""}${open.newer ? ", newer below" : ""}`;
  } finally {
    if (open.place === place) open.loading = false;
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
async function reloadMessages(open, messageIDs) {
  const wanted = new Set(messageIDs.filter((id) => open.messages.has(id)));
  while (wanted.size > 0) {
    const [anchor] = wanted;
    const answer = await api.post(state.paths.history("window"), { sessionID: open.id, target: { kind: "around", messageID: anchor } });
    if (state.open !== open) return;
    const fresh = answer.status === "window" ? answer.messages.map(normalize) : [];
    for (const message of fresh.filter((m) => wanted.has(m.id))) {
      wanted.delete(message.id);
      open.messages.set(message.id, message);
      messageElement(message.id)?.replaceWith(render(message, onPreview));
      record.reloadedMessages.push(message.id);
    }
    if (wanted.delete(anchor)) {
      open.messages.delete(anchor);
      messageElement(anchor)?.remove();
    }
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

// --- the panel: preview and prune, clean, receipts ----------------------------------------

/** Fills the panel; a clean that runs keeps its progress and Stop button above whatever else it shows. */
function panel(title, ...content) {
  $("panel-title").textContent = title;
  $("panel-body").replaceChildren(...(state.cleaning ? [state.cleaning] : []), ...content);
}

function blockedLine(reason) {
  return text("p", "blocked", `blocked: ${reason} — ${REASONS[reason] ?? ""}`);
}

/** What a message's "Preview prune" button does: the parts ticked in the message (none: all). */
function onPreview(messageID, checked) {
  return preview(messageID, { checked });
}

/**
 * Previews a message in the panel: from its button (`checked`: the parts to tick, none ticks
 * all), or again after an event named it (`fresh: false`: nothing ticked, and the answer of
 * the prune made from the panel kept).
 */
async function preview(messageID, { checked = [], fresh = true } = {}) {
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

$("clean").addEventListener("click", () => state.open && cleanDryRun(state.open));

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
    const turns = Math.max(0, Math.floor(Number(keep.value)) || 0);
    keep.value = String(turns);
    open.keepTurns = turns;
    apply.disabled = true;
    const read = await readPlan(open, turns);
    // A later change of the kept turns planned again meanwhile: its plan is the one shown.
    if (!read || read.keepLastTurns !== Number(keep.value)) return;
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
    const plan = await readPlan(open, dry.keepLastTurns);
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

async function loadReceipts() {
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

boot();
