// The page's clean in words and steps. What it takes comes from the server's `clean-plan`
// route, which plans as `clean ID --keep-last-turns N --no-compact` does (the tool and
// reasoning parts, not the superseded snapshots a `clean` also compacts): the rule is written
// once, in Rust. Nothing here touches the page, so `node --test` can run it.

/** The dry run in words, from a `clean-plan` answer of status `plan`. */
export function describe(plan, bytes) {
  const refused = plan.prunes.filter((p) => p.blocked !== null);
  const byReason = new Map();
  for (const prune of refused) byReason.set(prune.blocked, (byReason.get(prune.blocked) ?? 0) + 1);
  const skipped = Object.entries(plan.skipped).map(([reason, n]) => `${n} ${reason}`);
  const lines = [
    `Dry run: ${plan.prunes.length - refused.length} message(s), ${plan.parts} tool and reasoning part(s), ${bytes(plan.bytes)} would be pruned.`,
    `${plan.lookedAt} assistant message(s) looked at, and ${plan.keptInTurns} more left alone in the last ${plan.keepLastTurns} turn(s)${plan.nothingToPrune ? `; ${plan.nothingToPrune} with nothing to prune` : ""}${skipped.length ? `; skipped: ${skipped.join(", ")}` : ""}.`,
  ];
  if (refused.length > 0) {
    lines.push(`Refused now: ${[...byReason].map(([reason, n]) => `${n} ${reason}`).join(", ")}.`);
  }
  lines.push("Text and skill output are never removed. Whether OpenCode is using the session is checked again as each message is pruned.");
  return lines.join(" ");
}

/** The most turns `keepLastTurns` takes (the route's: a 32-bit unsigned number). */
export const MOST_KEPT_TURNS = 4294967295;

/**
 * The kept turns a person typed: a whole number from 0 to `MOST_KEPT_TURNS` (spaces around it
 * allowed), or null for anything else, an empty field among them (never read as 0, which
 * keeps nothing).
 */
export function keptTurns(typed) {
  const value = String(typed).trim();
  if (!/^\d+$/.test(value)) return null;
  const turns = Number(value);
  return turns <= MOST_KEPT_TURNS ? turns : null;
}

/**
 * Whether two plans make the same prunes (same messages, revisions and parts) and would meet
 * the same refusals now: a prune refused at the dry run and admitted since is a change the
 * person sees before it is applied.
 */
export function samePrunes(a, b) {
  const key = (plan) => JSON.stringify(plan.prunes.map((p) => [p.messageID, p.revision, p.indexes, p.blocked]));
  return key(a) === key(b);
}

/** The `prune` bodies that apply a plan, in its order (each the request `clean` makes). */
export function pruneBodies(plan) {
  return plan.prunes.map(({ messageID, revision, indexes }) => ({ sessionID: plan.sessionID, messageID, revision, indexes }));
}
