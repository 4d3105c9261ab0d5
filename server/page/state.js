// What the page holds, declared in one place: the server's health, the workspace, the sessions
// read, the open session (its shape is `openSession` in open-session.js), the events waiting to
// be applied, the overview's timing, the clean that runs. Every view reads and writes these
// fields and no others. Also the page's one `Api`, the record tests read, the notice line and
// the address (`#ws=ID&session=ID`).

import { Api } from "./api.js";

/** The page's calls to the server that served it. */
export const api = new Api();

/** The element of the page with that id. */
export const $ = (id) => document.getElementById(id);

export const state = {
  /** `GET /health`'s answer: `version`, `databaseID`, `lastSeq`, `quietPeriodMs`; null before. */
  health: null,
  /** `GET /api/session-pruning/upkeep`'s last answer (the clean on a schedule); null before. */
  upkeep: null,
  /** The open workspace's id, and its routes (`workspacePaths`). */
  workspace: null,
  paths: null,
  /** The workspace's `EventStream`, or null. */
  stream: null,
  /** sessionID -> the summary the sessions route answered. */
  sessions: new Map(),
  /** sessionID -> the cursor of the sessions page that holds it (null: the first). */
  sessionPage: new Map(),
  /** The cursor of the next sessions page, or null when every page is read. */
  sessionsMore: null,
  /** Counts the reads of the sessions; a read that is not the latest stops. */
  sessionsToken: 0,
  /** The open session (`openSession`), or null. */
  open: null,
  /** The number of the last event applied: a retry's announcement is applied once. */
  appliedThrough: 0,
  /** Events received and not yet applied; `draining` while they are being applied. */
  pending: [],
  draining: false,
  /** The timer of the overview's next read after prunes. */
  overviewTimer: null,
  /** How long the last overview took to read, ms (null: never read). */
  overviewMs: null,
  /** The workspace whose overview is being read, or null. */
  overviewLoading: null,
  /** The progress of the clean that runs (its section of the panel), or null. */
  cleaning: null,
  /** Events could not be applied: everything is read again once the server answers. */
  needsReload: false,
  /** Whether the notice shown concerns the open session only (opening another hides it). */
  noticeOfSession: false,
};

/** What the page did, for a person at the console and for tests that drive a browser. */
export const record = {
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

/** Shows `message` above everything (`""` hides it); `ofSession`: it concerns the open session only. */
export function notice(message, ofSession = false) {
  const line = $("notice");
  line.textContent = message;
  line.hidden = !message;
  state.noticeOfSession = ofSession;
}

/** `#ws=ID&session=ID`: where the page is, so that a reload or a link opens the same place. */
export function route() {
  return new URLSearchParams(location.hash.slice(1));
}

/** Writes the open workspace and `session` (or none) into the address. */
export function setRoute(session) {
  const params = new URLSearchParams({ ws: state.workspace });
  if (session) params.set("session", session);
  history.replaceState(null, "", `#${params}`);
}
