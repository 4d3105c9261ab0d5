// The plugin inside OpenCode 2 (`export default {id, setup(api)}`; docs/plugin.md): `/prune`
// registered with `api.command.transform`, answered on OpenCode's event stream (answers.mjs);
// CodeNomad's RPC registered with `api.rpc.register`; every prune, restore and compaction the
// server announces (its own, the command line's, another client's) emitted into OpenCode's
// event stream through that RPC; and, when asked for, a clean of each session that goes idle.
// OpenCode 2 sets a plugin up once per location (the project folder, the home): the server, the
// relay and the idle watch are made once per process, the command and the RPC once per
// location.

import { ANSWERS_DEFINITION, answersHandlers, keep } from "./answers.mjs";
import { connectedClient, follow } from "./api.mjs";
import { runCommand, shown, USAGE } from "./commands.mjs";
import { DEFINITION, handlers } from "./contract.mjs";
import { idleCleaner } from "./idle.mjs";
import { logBeside, warn } from "./log.mjs";
import { readOptions } from "./options.mjs";
import { databasePath, forgetServer, server } from "./server.mjs";

/** The RPC registrations, one per location: `{directory, events}`. */
const registrations = [];
let relaying = false;
let watchingIdle = false;

/** `setup(api)` of OpenCode 2's plugin API. */
export async function setup(api) {
  const { options, problems } = readOptions(api.options);
  logBeside(databasePath(options));
  for (const problem of problems) warn(`${problem}; using the default`);
  // One client for every request: it finds the server again when the one it knew is gone.
  const prune = connectedClient(() => server(options), () => forgetServer(options));
  const connect = async () => prune;
  // Started now, waited for by the first request: OpenCode's start does not wait for it.
  server(options).catch((error) => warn(`${error.message}`));

  // Registered before the command, so that the command's first answer has somewhere to go.
  const answers = await api.rpc.register(ANSWERS_DEFINITION, answersHandlers);
  api.command.transform((draft) => {
    draft.add({
      name: "prune",
      description: "Prune tool output and reasoning from this session (session-prune; /prune help)",
      execute: async (input) => {
        await answerCommand(answers.events, connect, input, options);
        return undefined;
      },
    });
  });

  const registration = await api.rpc.register(DEFINITION, handlers(connect));
  registrations.push({ directory: api.location?.directory || "", events: registration.events, answers: answers.events });
  if (!relaying) {
    relaying = true;
    relay(options);
  }
  if (options.idleClean && !watchingIdle) {
    watchingIdle = true;
    watchIdle(api, connect, options).catch((error) => warn(`the idle clean stopped: ${error.message}`));
  }
}

/** Runs `/prune` and emits its answer (and the one that follows a wait) as the `answer` event
 * of the location whose command ran. */
async function answerCommand(events, connect, input, options) {
  const command = `/prune ${shown(String(input.prompt?.text || "").trim())}`.trim();
  const say = (text, final) =>
    Promise.resolve(events.emit("answer", keep(input.sessionID, command, text, final))).catch((error) =>
      warn(`could not emit the answer to ${command}: ${error.message}`),
    );
  let answer;
  try {
    answer = await runCommand(await connect(), { sessionID: input.sessionID, text: input.prompt?.text }, options);
  } catch (error) {
    warn(`${command} failed: ${error.message}`);
    await say(`session-prune: ${error.message}\n${USAGE}`, true);
    return;
  }
  await say(answer.text, !answer.later);
  if (answer.later) {
    answer.later.then(
      (text) => say(text, true),
      (error) => say(`session-prune: ${error.message}`, true),
    );
  }
}

/** Emits each event of the server's stream, from now on, through the registration of the
 * event's directory (or its nearest enclosing location; every registration when none
 * encloses it), so that a client of OpenCode's event stream for that folder receives it. */
function relay(options) {
  const controller = new AbortController();
  follow({
    connect: () => server(options),
    cursor: null,
    signal: controller.signal,
    onEvent: async (event) => {
      const name = event.type.replace(/^rpc\.codenomad\.session-pruning\./, "");
      if (!(name in DEFINITION.events)) return;
      for (const registration of receivers(event.directory)) {
        await Promise.resolve(registration.events.emit(name, event.data)).catch((error) =>
          warn(`could not emit ${event.type}: ${error.message}`),
        );
      }
    },
  });
}

function receivers(directory) {
  if (!directory) return registrations;
  const enclosing = registrations
    .filter((registration) => registration.directory && (directory === registration.directory || directory.startsWith(`${registration.directory}/`)))
    .sort((a, b) => b.directory.length - a.directory.length);
  return enclosing.length ? enclosing.slice(0, 1) : registrations;
}

/** The events of OpenCode 2 that end a run of a session (`data.sessionID`): the session is
 * idle after each, whatever the run's outcome. */
const RUN_ENDED = new Set(["session.execution.succeeded", "session.execution.failed", "session.execution.interrupted"]);

/** Cleans each session that goes idle (idle.mjs), its answer emitted like a command's through
 * the registration of the event's folder. */
async function watchIdle(api, connect, options) {
  const directories = new Map();
  const cleanSoon = idleCleaner(connect, options, (sessionID, command, text) => {
    for (const registration of receivers(directories.get(sessionID) || "")) {
      Promise.resolve(registration.answers.emit("answer", keep(sessionID, command, text, true))).catch((error) =>
        warn(`could not emit the answer to ${command}: ${error.message}`),
      );
    }
  });
  for await (const event of api.event.subscribe()) {
    const sessionID = idleSession(event);
    if (!sessionID) continue;
    directories.set(sessionID, event.location?.directory || "");
    cleanSoon(sessionID);
  }
}

/** The session of an event that ends a run (`RUN_ENDED`), or null. */
export function idleSession(event) {
  if (!RUN_ENDED.has(event?.type)) return null;
  return event.data?.sessionID || null;
}
