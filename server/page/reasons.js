// What each refusal reason of the API means, in words for the person at the page. The reasons
// are the contract's (docs/refusals.md says when each is given); the quiet period is the
// server's (`serve --quiet-period`, read from `GET /health`).

import { state } from "./state.js";

/** A prune's or a preview's refusal. */
export const REASONS = {
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

/** A read's refusal (a window, an outline). */
export const READ_REASONS = {
  not_deletable: "There is no such session in this database.",
  conflict: "The session left this workspace, or changed under a scan: open it again.",
  anchor_missing: REASONS.anchor_missing,
  unsupported_storage: "A message is over 16 MiB, the window over 24 MiB, or a row is damaged.",
  unavailable: REASONS.unavailable,
};
