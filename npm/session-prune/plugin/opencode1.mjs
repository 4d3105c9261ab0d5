// The plugin inside OpenCode 1.x (the `server` plugin of `@opencode-ai/plugin`; docs/plugin.md):
// `/prune` added to OpenCode's commands by the `config` hook and answered by
// `command.execute.before`, which shows the answer (a message the model is never sent, and a
// toast) and then stops the command before it reaches the model; a clean of each session that
// goes idle (`session.idle`), when asked for; and, since an open 1.x view does not re-read a
// message changed beside it, on each prune or restore the server announces, its parts told to
// OpenCode's own part routes (every 1.x release has them): a pruned part through
// `DELETE /session/{id}/message/{id}/part/{id}` (the row is gone already; OpenCode announces
// `message.part.removed`), a part put back through `PATCH` of the same path with what OpenCode
// reads now (it announces `message.part.updated`), so that every open view follows; a toast
// that says to reload where that fails.

import { client, follow } from "./api.mjs";
import { runCommand, USAGE } from "./commands.mjs";
import { idleCleaner } from "./idle.mjs";
import { logBeside, warn } from "./log.mjs";
import { readOptions } from "./options.mjs";
import { databasePath, server as serverFor } from "./server.mjs";

/** The words the command is stopped with after it answered: OpenCode logs them, and a person
 * who sees them knows the command did its work. */
export const HANDLED = "session-prune answered /prune; the model is not called";

let relaying = false;

/** The `server` plugin function of OpenCode 1.x: `(input, options) => hooks`. */
export async function server(input, given) {
  const { options, problems } = readOptions(given);
  logBeside(databasePath(options));
  for (const problem of problems) warn(`${problem}; using the default`);
  const connect = async () => client(await serverFor(options));
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
        if (!/\.(pruned|restored)$/.test(event.type)) return;
        try {
          await refresh(input.client, await connect(), event);
        } catch (error) {
          warn(`could not refresh the open views of ${event.data?.messageID}: ${error.message}`);
          reload();
        }
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

/**
 * Tells OpenCode's open views about the parts of the prune or restore `event` (from the
 * server's stream: `type` ends in `.pruned` or `.restored`, `data` is `{sessionID, messageID,
 * revision}`): the receipt that committed it (`api`, a client of api.mjs) names the parts;
 * each pruned part is deleted through OpenCode's part route, each part put back is written
 * through it with what OpenCode reads now. `client` is the plugin input's SDK client. Throws
 * when the receipt is not found or OpenCode answers an error.
 */
async function refresh(client, api, event) {
  const { sessionID, messageID, revision } = event.data || {};
  if (!sessionID || !messageID) return;
  const restored = event.type.endsWith(".restored");
  const receipts = await api.get(`session-pruning/receipts?sessionID=${encodeURIComponent(sessionID)}`);
  const receipt = receipts.find(
    (candidate) =>
      candidate.messageID === messageID && candidate.revisionAfter === revision && Boolean(candidate.restores) === restored,
  );
  if (!receipt) throw new Error(`no receipt of message ${messageID} at revision ${revision}`);
  const route = (partID) =>
    `/session/${encodeURIComponent(sessionID)}/message/${encodeURIComponent(messageID)}/part/${encodeURIComponent(partID)}`;
  const check = (answer, what) => {
    if (answer.error) throw new Error(`${what}: ${JSON.stringify(answer.error)}`);
  };
  if (!restored) {
    for (const partID of receipt.partIDs) check(await client._client.delete({ url: route(partID) }), `removing part ${partID}`);
    return;
  }
  const read = await client.session.message({ path: { id: sessionID, messageID } });
  check(read, "reading the message");
  const back = new Set(receipt.partIDs);
  for (const part of read.data?.parts || []) {
    if (!back.has(part.id)) continue;
    const written = await client._client.patch({
      url: route(part.id),
      body: part,
      headers: { "Content-Type": "application/json" },
    });
    check(written, `writing part ${part.id}`);
  }
}
