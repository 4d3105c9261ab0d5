// Where `/prune` answers inside OpenCode 2 (docs/plugin.md, "Where the answer appears"). OpenCode
// 2's plugin API has no toast and no message that skips the model: a synthetic message waits in
// the session's inbox and is sent to the model with the next turn, and a command's return value
// is dropped. So the plugin answers on OpenCode's own event stream, as the event
// `rpc.session-prune.answer` of its own RPC `session-prune`, and keeps the latest answers of each
// session for a client that was not listening (`POST /api/rpc/session-prune/answers`).

/** The RPC id of the plugin's own answers (not CodeNomad's contract). */
export const ANSWERS_RPC_ID = "session-prune";

/** How many answers are kept per session, newest last. */
const KEPT_PER_SESSION = 20;

const session = { type: "string", minLength: 1, maxLength: 256 };
const answer = {
  type: "object",
  properties: {
    sessionID: session,
    command: { type: "string" },
    text: { type: "string" },
    time: { type: "number" },
    final: { type: "boolean" },
  },
  required: ["sessionID", "command", "text", "time", "final"],
  additionalProperties: false,
};

/** The definition `api.rpc.register` takes: the method `answers` and the event `answer`. */
export const ANSWERS_DEFINITION = {
  id: ANSWERS_RPC_ID,
  methods: {
    answers: {
      input: { type: "object", properties: { sessionID: session }, required: ["sessionID"], additionalProperties: false },
      output: {
        type: "object",
        properties: { answers: { type: "array", items: answer } },
        required: ["answers"],
        additionalProperties: false,
      },
    },
  },
  events: { answer: { schema: answer } },
};

/** The kept answers: session id -> `[{sessionID, command, text, time, final}]`, oldest first. */
const kept = new Map();

/** Keeps one answer and returns it as the event's data. `time` is ms since epoch; `final` is
 * false when another answer of the same command follows (a prune waiting for its session). */
export function keep(sessionID, command, text, final) {
  const entry = { sessionID, command, text, time: Date.now(), final };
  const list = kept.get(sessionID) || [];
  list.push(entry);
  if (list.length > KEPT_PER_SESSION) list.splice(0, list.length - KEPT_PER_SESSION);
  kept.set(sessionID, list);
  return entry;
}

/** The handlers of the answers RPC. */
export const answersHandlers = {
  answers: async ({ sessionID }) => ({ answers: [...(kept.get(sessionID) || [])] }),
};
