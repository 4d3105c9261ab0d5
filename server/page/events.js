// What a batch of the event stream's events changes, as data: which are applied and which are
// an identical retry's announcement seen before, where a resync starts the page anew, and what
// the applied ones name (sessions, messages). Nothing here touches the page, so `node --test`
// runs it; app.js reads what it answers and reads again what it names.

/** The events the page applies (docs/http.md, "The event stream"). */
export const PRUNED = "rpc.codenomad.session-pruning.pruned";
export const RESTORED = "rpc.codenomad.session-pruning.restored";
/** A compaction deleted snapshots of a session's event log: no message changed, its size did. */
export const COMPACTED = "rpc.codenomad.session-pruning.compacted";

const APPLIED = new Set([PRUNED, RESTORED, COMPACTED]);
/** A run of the clean on a schedule ended (no journal event: it has no number). */
export const UPKEEP = "rpc.codenomad.session-pruning.upkeep";

/**
 * Takes a batch of `{type, id, data}` (the stream's order; `id` a decimal string or null: any
 * other id counts as null, and `data` that is no object as `{}`) after the event numbered
 * `appliedThrough` had been applied. Answers:
 *
 * - `lines`: `{id, type, data, again}` for the log, one per event shown (not heartbeats);
 *   `again` marks an event already applied: one without a number, or numbered at or below
 *   the last applied (every committed event has a number of its own, so that is a retry's);
 * - `changed`: the `data` of each event to apply, in order;
 * - `appliedThrough`: the number of the last event applied after this batch;
 * - `lastEventId`: the last number the batch carried (heartbeats too), or null;
 * - `upkeep`: whether a run of the clean on a schedule ended (its prunes came as their own
 *   events): the upkeep view is read again;
 * - `resync`: true when the journal no longer held every missed event: the page reads
 *   everything again, which covers what `changed` holds from before it and what followed it
 *   in the batch (not taken); `appliedThrough` is then the resync's `resumeAfter`.
 */
export function takeBatch(batch, appliedThrough) {
  const taken = { lines: [], changed: [], appliedThrough, lastEventId: null, resync: false, upkeep: false };
  for (const event of batch) {
    const { type } = event;
    // A number is decimal digits (the journal's sequence); anything else counts as none.
    const id = numbered(event.id) ? event.id : null;
    const data = event.data !== null && typeof event.data === "object" ? event.data : {};
    if (id !== null) taken.lastEventId = Number(id);
    if (type === "heartbeat") continue;
    if (type === "resync") {
      taken.lines.push({ id, type, data, again: false });
      // Without a number to resume after, the page reads everything and keeps its own.
      const resumeAfter = data.resumeAfter;
      if (Number.isSafeInteger(resumeAfter) && resumeAfter >= 0) taken.appliedThrough = resumeAfter;
      else if (numbered(resumeAfter)) taken.appliedThrough = Number(resumeAfter);
      taken.resync = true;
      return taken;
    }
    if (type === UPKEEP) {
      taken.lines.push({ id: null, type, data, again: false });
      taken.upkeep = true;
      continue;
    }
    if (!APPLIED.has(type)) continue;
    const again = id === null || Number(id) <= taken.appliedThrough;
    taken.lines.push({ id, type, data, again });
    if (again) continue;
    taken.appliedThrough = Number(id);
    taken.changed.push(data);
  }
  return taken;
}

/** Whether `id` is a sequence number as the stream sends it: decimal digits. */
function numbered(id) {
  return typeof id === "string" && /^\d+$/.test(id);
}

/**
 * What the applied events' `data` name, seen from the open session `openID` (or null):
 * `here` (whether any names it), `messages` (its messages they name, once each, in order; a
 * compaction and its restore name none) and `sessions` (every session they name, once each;
 * a `sessionID` that is no string names none).
 */
export function named(changed, openID) {
  const here = openID === null ? [] : changed.filter((d) => d.sessionID === openID);
  return {
    here: here.length > 0,
    messages: [...new Set(here.map((d) => d.messageID).filter(Boolean))],
    sessions: [...new Set(changed.map((d) => d.sessionID).filter((id) => typeof id === "string"))],
  };
}

/** The log's words for an event line (its number is shown beside them). */
export function describeEvent(type, data) {
  if (type === "resync") return `resync: resumed after #${data.resumeAfter}`;
  if (type === COMPACTED) return `compacted ${data.snapshots} snapshot(s) of ${data.sessionID}`;
  if (type === UPKEEP) return `upkeep: clean ${data.run} ${data.status}, ${data.counts?.pruned ?? 0} pruned`;
  return `${type.split(".").pop()} ${data.messageID ?? ""}`;
}
