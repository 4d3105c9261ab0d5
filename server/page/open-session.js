// The open session as data: its declared shape, and the bookkeeping of what the page holds of
// it — the window of messages (which an answer adds, where its edges are, which read is the
// latest) and the outline's chunks (which the server said did not move). Nothing here touches
// the page, so `node --test` runs it; session.js draws what it answers.

/** The outline's `known` holds at most this many checkpoints (the contract's most). */
export const MOST_KNOWN = 512;

/** The open session `id`, holding nothing yet. */
export function openSession(id) {
  return {
    id,
    /** Outline chunks, in order: `{checkpoint, entries, element}` (`element` once drawn). */
    chunks: [],
    /** messageID -> normalized message, for what the window holds. */
    messages: new Map(),
    /** The window targets beyond its older and newer edges, or null at the session's ends. */
    older: null,
    newer: null,
    /** Whether a read of the window is in flight. */
    loading: false,
    /** Counts the places the window was opened at; a read for an earlier place is dropped. */
    place: 0,
    /** The message the panel previews, or null. */
    previewing: null,
    /** The panel's words on the last prune made from it, kept while it previews again. */
    pruneNote: null,
    /** The turns the last clean dry run kept (null: the default, 2). */
    keepTurns: null,
  };
}

/**
 * Starts a read of the window in `mode`: `replace` (a new place: it supersedes every read in
 * flight), `prepend` (older) or `append` (newer). Answers the read's place, or null when a read
 * is in flight and this one is not a new place (it is not made).
 */
export function beginWindowRead(open, mode) {
  if (open.loading && mode !== "replace") return null;
  if (mode === "replace") open.place += 1;
  open.loading = true;
  return open.place;
}

/** Whether the read begun at `place` is still the latest (what it brings may be drawn). */
export function isLatestRead(open, place) {
  return open.place === place;
}

/** Ends the read begun at `place` (a superseded read leaves the latest one loading). */
export function endWindowRead(open, place) {
  if (open.place === place) open.loading = false;
}

/**
 * Takes a window answer's `messages` (normalized) and its `older` and `newer` targets into
 * `open`, read in `mode`: `replace` drops what was held; a message held already is not taken
 * twice; `prepend` keeps the newer edge and `append` the older one. Answers the messages added,
 * in the answer's order (to be drawn).
 */
export function takeWindow(open, messages, answer, mode) {
  if (mode === "replace") open.messages.clear();
  const added = messages.filter((m) => !open.messages.has(m.id));
  for (const message of added) open.messages.set(message.id, message);
  if (mode !== "append") open.older = answer.older;
  if (mode !== "prepend") open.newer = answer.newer;
  return added;
}

/**
 * After events named `wanted` (a Set of the held messages to read again), takes a window read
 * around `anchor` (its `messages`, normalized): each wanted message it holds replaces the held
 * one and leaves `wanted`; when the anchor itself is not in it, the message is gone and is
 * dropped. Answers `{replaced, removed}`: the messages to draw anew, and the id to remove or null.
 */
export function takeReloaded(open, wanted, anchor, messages) {
  const replaced = messages.filter((m) => wanted.has(m.id));
  for (const message of replaced) {
    wanted.delete(message.id);
    open.messages.set(message.id, message);
  }
  if (!wanted.delete(anchor)) return { replaced, removed: null };
  open.messages.delete(anchor);
  return { replaced, removed: anchor };
}

/** A chunk's checkpoint as a key: its range of sequence numbers and its digest. */
export function chunkKey(checkpoint) {
  return `${checkpoint.after}:${checkpoint.through}:${checkpoint.digest}`;
}

/** The outline's `known`: the held chunks' checkpoints, or none when they are over `MOST_KNOWN`. */
export function knownCheckpoints(chunks) {
  if (chunks.length > MOST_KNOWN) return [];
  return chunks.map(({ checkpoint: c }) => ({ after: c.after, through: c.through, digest: c.digest }));
}

/**
 * Takes one outline answer's `checkpoints` and `entries` onto `chunks` (the new outline being
 * built), keeping from `held` (chunkKey -> chunk) each chunk the server said did not move.
 * Answers the number of entries read, or null when the server said a chunk did not move that
 * `held` does not hold (the outline must then be read whole).
 */
export function takeOutline(held, answer, chunks) {
  let read = 0;
  for (const checkpoint of answer.checkpoints) {
    if (checkpoint.changed) {
      const entries = answer.entries.filter((e) => e.seq > checkpoint.after && e.seq <= checkpoint.through);
      read += entries.length;
      chunks.push({ checkpoint, entries, element: null });
      continue;
    }
    const kept = held.get(chunkKey(checkpoint));
    if (!kept) return null;
    chunks.push(kept);
  }
  return read;
}
