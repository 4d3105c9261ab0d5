// The plugin inside OpenCode 1.x (the `server` plugin of `@opencode-ai/plugin`; docs/plugin.md):
// `/prune` added to OpenCode's commands by the `config` hook and answered by
// `command.execute.before`, which shows the answer (a message the model is never sent, and a
// toast) and then stops the command before it reaches the model; a clean of each session that
// goes idle (`session.idle`), when asked for; and, since an open 1.x view does not re-read a
// message changed beside it, a toast on the prunes and restores the server announces (gathered
// over a second), saying to reload. OpenCode 1.x's part routes would make its views follow, but
// they write the part (`DELETE` removes the row, `PATCH` writes what was read a moment before):
// a restore or a prune committed between the read and that write would be undone, so the
// plugin does not use them (docs/plugin.md, "Open views").

import { connectedClient, follow } from "./api.mjs";
import { runCommand, USAGE } from "./commands.mjs";
import { idleCleaner } from "./idle.mjs";
import { logBeside, warn } from "./log.mjs";
import { readOptions } from "./options.mjs";
import { databasePath, forgetServer, server as serverFor } from "./server.mjs";

/** The words the command is stopped with after it answered: OpenCode logs them, and a person
 * who sees them knows the command did its work. */
export const HANDLED = "session-prune answered /prune; the model is not called";

let relaying = false;

/** The `server` plugin function of OpenCode 1.x: `(input, options) => hooks`. */
export async function server(input, given) {
  const { options, problems } = readOptions(given);
  logBeside(databasePath(options));
  for (const problem of problems) warn(`${problem}; using the default`);
  // One client for every request: it finds the server again when the one it knew is gone.
  const api = connectedClient(() => serverFor(options), () => forgetServer(options));
  const connect = async () => api;
  serverFor(options).catch((error) => warn(`${error.message}`));
  const toast = (message, variant = "info") =>
    input.client.tui?.showToast?.({ body: { title: "session-prune", message, variant } }).catch(() => {});
  const say = async (sessionID, text) => {
    await input.client.session
      .prompt({
        path: { id: sessionID },
        body: { noReply: true, parts: [{ type: "text", text, ignored: true }] },
      })
      .catch((error) => warn(`could not write the answer: ${error.message}`));
    await toast(text.split("\n")[0]);
  };
  const cleanSoon = options.idleClean
    ? idleCleaner(connect, options, (sessionID, command, text) => toast(text.split("\n")[0]))
    : null;
  if (!relaying) {
    relaying = true;
    const reload = debounced(RELOAD_TOAST_MS, () =>
      toast("A session changed beside this view: reload it (switch sessions and back) to see it as it is now."),
    );
    follow({
      connect: () => serverFor(options),
      cursor: null,
      signal: new AbortController().signal,
      onEvent: async (event) => {
        if (/\.(pruned|restored)$/.test(event.type)) reload();
      },
    });
  }
  return {
    config: async (config) => {
      config.command = config.command || {};
      config.command.prune ??= {
        template: "/prune $ARGUMENTS",
        description: "Prune tool output and reasoning from this session (session-prune; /prune help)",
      };
    },
    "command.execute.before": async (command) => {
      if (command.command !== "prune") return;
      let answer;
      try {
        answer = await runCommand(await connect(), { sessionID: command.sessionID, text: command.arguments }, options);
      } catch (error) {
        answer = { text: `session-prune: ${error.message}\n${USAGE}` };
      }
      await say(command.sessionID, answer.text);
      if (answer.later) {
        answer.later.then(
          (text) => say(command.sessionID, text),
          (error) => say(command.sessionID, `session-prune: ${error.message}`),
        );
      }
      throw new Error(HANDLED);
    },
    event: async ({ event }) => {
      if (!cleanSoon || event.type !== "session.idle") return;
      const sessionID = event.properties?.sessionID;
      if (sessionID) cleanSoon(sessionID);
    },
  };
}

/** How long toasts that say to reload are gathered into one, ms. */
const RELOAD_TOAST_MS = 1_000;

/** `run` once at the end of each quiet `ms` after one or more calls. */
function debounced(ms, run) {
  let timer = null;
  return () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      run();
    }, ms);
  };
}
