// What the page's clean takes, by `clean`'s default policy: the tool and reasoning parts of
// the completed assistant messages before the session's last N user turns (a session with
// fewer user turns than N keeps every message), every tool but `skill` (whose output is
// instructions the model goes on following; `clean --skip-tools` says the same).

/** Tools whose parts a clean keeps, as `clean`'s default `--skip-tools skill`. */
export const KEPT_TOOLS = ["skill"];

/**
 * The plan of a clean: `entries` the outline's entries in order (`{id, seq, type}`),
 * `messages` the session's messages by id (as `messages.js` draws them), `candidates` the
 * `history` route's prune candidates (`{messageID, revision, toolCount, reasoningCount}`),
 * `turns` the user turns kept. Returns `{chosen, recent, skillOnly, parts}`: each chosen
 * candidate with `indexes` (null: every technical part, as `prune-batch` takes them; else the
 * parts to prune, `skill` left out), the prunable messages kept for their turn (or not read)
 * and for holding only skill output, and the parts the clean takes.
 */
export function planClean(entries, messages, candidates, turns) {
  const users = entries.filter((e) => e.type === "user");
  const from = turns === 0 ? Infinity : users.length < turns ? -Infinity : users[users.length - turns].seq;
  const seqs = new Map(entries.map((e) => [e.id, e.seq]));
  const chosen = [];
  let recent = 0;
  let skillOnly = 0;
  let parts = 0;
  for (const candidate of candidates) {
    const seq = seqs.get(candidate.messageID);
    const message = messages.get(candidate.messageID);
    if (seq === undefined || seq >= from || !message) {
      recent += 1;
      continue;
    }
    const technical = message.parts.filter((p) => p.technical);
    const taken = technical.filter((p) => !KEPT_TOOLS.includes(p.tool));
    if (taken.length === 0) {
      skillOnly += 1;
      continue;
    }
    parts += taken.length;
    chosen.push({ ...candidate, indexes: taken.length === technical.length ? null : taken.map((p) => p.index) });
  }
  return { chosen, recent, skillOnly, parts };
}
