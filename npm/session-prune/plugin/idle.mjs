// The idle clean (docs/plugin.md, "Options"): when OpenCode says a session's run ended, the
// session is pruned by the policy `idleClean` names ("old": what is older than its last
// compaction; "apply": what `/prune apply` takes), through the fence like any prune. A prune
// the fence refuses because OpenCode still holds the session waits for it to settle. One clean
// per session at a time: a run that ends during one is cleaned after it.

import { runCommand } from "./commands.mjs";
import { warn } from "./log.mjs";

/**
 * A function `(sessionID) => void` that cleans the session when it is called, for `options`
 * (`idleClean`, `keepLastTurns`) through the server `connect` resolves to (a client of
 * api.mjs). `answered(sessionID, command, text)` receives each clean's answer; `command` is
 * `idle /prune old` or `idle /prune apply`.
 */
export function idleCleaner(connect, options, answered) {
  const verb = options.idleClean === "apply" ? "apply" : "old";
  const command = `idle /prune ${verb}`;
  const running = new Map();
  const clean = async (sessionID) => {
    try {
      const answer = await runCommand(await connect(), { sessionID, text: verb }, options);
      answered(sessionID, command, answer.later ? await answer.later : answer.text);
    } catch (error) {
      warn(`the idle clean of ${sessionID} failed: ${error.message}`);
    }
  };
  return (sessionID) => {
    const next = (running.get(sessionID) || Promise.resolve()).then(() => clean(sessionID));
    running.set(sessionID, next);
    next.then(() => {
      if (running.get(sessionID) === next) running.delete(sessionID);
    });
  };
}
