// CodeNomad's session-pruning RPC served inside OpenCode 2 (docs/plugin.md, "CodeNomad's RPC"):
// the id, the methods with their strict input schemas (the bounds of the contract CodeNomad's
// own plugin registers), and each method answered by the server's route of the same request.
// The server checks every bound again and fails closed as it always does.

export const RPC_ID = "codenomad.session-pruning";

const id = { type: "string", minLength: 1, maxLength: 256 };
// OpenCode 2 refuses a schema with `pattern` ("Patterns may block validation"): the length is
// checked here, the lowercase hex by the server.
const revision = { type: "string", minLength: 64, maxLength: 64 };
const closed = (properties, required) => ({ type: "object", properties, required, additionalProperties: false });
const output = { type: "object" };

const candidate = closed(
  {
    messageID: id,
    revision,
    toolCount: { type: "integer", minimum: 0 },
    reasoningCount: { type: "integer", minimum: 0 },
  },
  ["messageID", "revision", "toolCount", "reasoningCount"],
);

const target = {
  anyOf: [
    closed({ kind: { enum: ["latest", "oldest"] } }, ["kind"]),
    closed({ kind: { enum: ["around", "before", "after"] }, messageID: id }, ["kind", "messageID"]),
  ],
};

/** Each method: its input schema and the server route that answers it. */
const METHODS = {
  preview: { route: "session-pruning/preview", input: closed({ sessionID: id, messageID: id }, ["sessionID", "messageID"]) },
  prune: {
    route: "session-pruning/prune",
    input: closed(
      {
        sessionID: id,
        messageID: id,
        revision,
        indexes: {
          type: "array",
          minItems: 1,
          maxItems: 100_001,
          uniqueItems: true,
          items: { type: "integer", minimum: 0, maximum: 100_000 },
        },
      },
      ["sessionID", "messageID", "revision", "indexes"],
    ),
  },
  history: {
    route: "session-pruning/history",
    input: closed(
      {
        sessionID: id,
        query: { type: "string", maxLength: 200 },
        includeTechnical: { type: "boolean" },
        purpose: { enum: ["search", "stats", "prune"] },
        cursor: { type: "string", maxLength: 4096 },
      },
      [],
    ),
  },
  pruneBatch: {
    route: "session-pruning/prune-batch",
    input: closed({ sessionID: id, candidates: { type: "array", minItems: 1, maxItems: 16, items: candidate } }, ["sessionID", "candidates"]),
  },
  window: { route: "session-history/window", input: closed({ sessionID: id, target }, ["sessionID", "target"]) },
  outline: {
    route: "session-history/outline",
    input: closed(
      {
        sessionID: id,
        cursor: closed({ after: { type: "integer", minimum: 0 }, through: { type: "integer", minimum: 0 } }, ["after", "through"]),
        after: { type: "integer", minimum: -1 },
        known: {
          type: "array",
          maxItems: 512,
          items: closed(
            {
              after: { type: "integer", minimum: -1 },
              through: { type: "integer", minimum: 0 },
              digest: { type: "string", minLength: 64, maxLength: 64 },
              changed: { type: "boolean" },
            },
            ["after", "through", "digest"],
          ),
        },
      },
      ["sessionID"],
    ),
  },
  outlinePreview: {
    route: "session-history/outlinePreview",
    input: closed({ sessionID: id, messageIDs: { type: "array", minItems: 1, maxItems: 12, items: id } }, ["sessionID", "messageIDs"]),
  },
};

const changed = closed({ sessionID: id, messageID: id, revision }, ["sessionID", "messageID", "revision"]);

/** The error a method answers when the server refuses its input as malformed (HTTP 400; a
 * bound OpenCode's schema cannot say, such as a revision's lowercase hex): OpenCode sends it to
 * the client as `{"type": "invalid_request", "message", "data": {"detail"}}`. */
const INVALID_REQUEST = "invalid_request";
const errors = { [INVALID_REQUEST]: closed({ detail: { type: "string" } }, ["detail"]) };

/** The RPC's definition as `api.rpc.register` takes it: methods and the events it emits. */
export const DEFINITION = {
  id: RPC_ID,
  methods: Object.fromEntries(Object.entries(METHODS).map(([name, method]) => [name, { input: method.input, output, errors }])),
  events: {
    pruned: { schema: changed },
    restored: { schema: changed },
    compacted: { schema: { type: "object" } },
  },
};

/** The methods that answer `{status:"blocked", reason:"unavailable"}` when the server cannot
 * be reached, as CodeNomad's broker answers a failure. */
const BLOCKED_WHEN_UNAVAILABLE = new Set(["preview", "prune", "history"]);

/** The handlers of every method: each posts its input to its route on the server `connect`
 * resolves to (see api.mjs `client`) and answers what the server answers. */
export function handlers(connect) {
  return Object.fromEntries(
    Object.entries(METHODS).map(([name, method]) => [
      name,
      async (input, context) => {
        try {
          const api = await connect();
          return await api.post(method.route, input, context?.signal);
        } catch (error) {
          if (error.status === undefined && BLOCKED_WHEN_UNAVAILABLE.has(name)) {
            return { status: "blocked", reason: "unavailable" };
          }
          if (error.status === 400 && context?.error) {
            throw context.error(INVALID_REQUEST, error.message, { detail: error.message });
          }
          throw error;
        }
      },
    ]),
  );
}
