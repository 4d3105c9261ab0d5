// Where the bytes are: the workspace's overview (the file, its WAL and free pages, the tables,
// the technical content and its copies, the event types, the largest sessions) as bar charts;
// read again a second after prunes when reading it is cheap, else on request.

import { bytes, text } from "./messages.js";
import { openSession } from "./session.js";
import { $, api, state } from "./state.js";

/** An overview that took longer than this to read is read again on request, not after each prune. */
const OVERVIEW_AUTO_MS = 2000;

/**
 * After prunes: the overview is read again a second after the last one, when reading it is
 * cheap; on a database where it is not (it reads every row's size), the page says the sizes
 * changed and reads them again when asked.
 */
export function scheduleOverview() {
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
export async function loadOverview(exact = false) {
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
