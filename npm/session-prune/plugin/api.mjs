// The plugin's client of `session-prune serve` (docs/http.md lists the routes): JSON requests
// with the server's password, and the event stream followed from a cursor across reconnects.
// Requests go straight to the loopback address with `node:http`: `fetch` would send them to a
// proxy that `HTTP_PROXY` names, which cannot reach this machine's loopback.

import http from "node:http";

import { WORKSPACE } from "./server.mjs";

/** `method url` with `headers` and `body` (text): a promise of the response (a readable
 * stream with `statusCode`). Rejects when `signal` aborts. */
export function send(method, url, { headers = {}, body, signal } = {}) {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, headers, signal }, resolve);
    request.on("error", reject);
    request.end(body);
  });
}

/** The whole body of a response, as text. */
async function text(response) {
  let all = "";
  response.setEncoding("utf8");
  for await (const chunk of response) all += chunk;
  return all;
}

/** Whether `error` is a connection that could not be made or was cut (the server is gone). */
function lost(error) {
  return error.status === undefined && ["ECONNREFUSED", "ECONNRESET", "EPIPE"].includes(error.code);
}

/**
 * A client of the server `connect` resolves to (`{url, password}`), asked again for each
 * request: when a request finds the server gone, `forget()` is called and the request is made
 * once more to the server `connect` then gives (another process's server that ended, one that
 * is starting again). Same methods as `client`.
 */
export function connectedClient(connect, forget) {
  const retried = (method) => async (...args) => {
    try {
      return await client(await connect())[method](...args);
    } catch (error) {
      if (!lost(error)) throw error;
      forget();
      return client(await connect())[method](...args);
    }
  };
  return { call: retried("call"), get: retried("get"), post: retried("post") };
}

/** A client of the server at `url` with `password`. */
export function client({ url, password }) {
  const headers = { authorization: `Bearer ${password}` };
  const base = `${url}/api/workspaces/${WORKSPACE}`;

  /** The JSON answer of `method path` (a path under the workspace unless it starts with `/`).
   * Rejects with the server's `error` words on a 4xx or 5xx answer (`status` set). */
  async function call(method, route, body, signal) {
    const target = route.startsWith("/") ? `${url}${route}` : `${base}/${route}`;
    const answer = await send(method, target, {
      headers: body === undefined ? headers : { ...headers, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    const words = await text(answer);
    let document;
    try {
      document = JSON.parse(words);
    } catch {
      document = { error: words };
    }
    if (answer.statusCode >= 400) {
      const error = new Error(`session-prune answered ${answer.statusCode}: ${document.error || words}`);
      error.status = answer.statusCode;
      error.field = document.field;
      throw error;
    }
    return document;
  }

  return {
    call,
    get: (route, signal) => call("GET", route, undefined, signal),
    post: (route, body, signal) => call("POST", route, body, signal),
  };
}

/**
 * Follows the server's event stream (in CodeNomad's framing, which names each event's session
 * folder) from the event after `cursor` (`null`: from now), calling `onEvent({type, directory,
 * data})` for each event, and reconnecting from the last event seen after a lost connection
 * (waiting `retryMs`, 1 s by default). Stops when `signal` aborts. `connect` gives the `{url,
 * password}` of the server each time (it may have been started again).
 */
export async function follow({ connect, cursor, onEvent, signal, retryMs = 1_000 }) {
  let last = cursor;
  while (!signal.aborted) {
    try {
      const { url, password } = await connect();
      if (last === null) {
        const health = await client({ url, password }).get("/health", signal);
        last = String(health.lastSeq ?? 0);
      }
      const answer = await send("GET", `${url}/api/workspaces/${WORKSPACE}/session-pruning/events?framing=codenomad`, {
        headers: { authorization: `Bearer ${password}`, "last-event-id": last, accept: "text/event-stream" },
        signal,
      });
      if (answer.statusCode !== 200) throw new Error(`event stream answered ${answer.statusCode}`);
      answer.setEncoding("utf8");
      let buffered = "";
      for await (const chunk of answer) {
        buffered += chunk;
        let end;
        while ((end = buffered.indexOf("\n\n")) >= 0) {
          const frame = parseFrame(buffered.slice(0, end));
          buffered = buffered.slice(end + 2);
          if (frame.id !== undefined) last = frame.id;
          const envelope = frame.data;
          if (!envelope || typeof envelope.type !== "string" || envelope.type === "server.connected") continue;
          await onEvent({ type: envelope.type, directory: envelope.location?.directory, data: envelope.data });
        }
      }
    } catch {
      // A lost connection or a server that is starting again: retried below.
    }
    if (signal.aborted) return;
    await new Promise((resolve) => setTimeout(resolve, retryMs));
  }
}

/** One Server-Sent Events frame as `{type, id, data}`: `id` undefined when it has none, `data`
 * parsed as JSON, undefined when it has none or it is not JSON. */
export function parseFrame(text) {
  let type = "message";
  let id;
  const data = [];
  for (const line of text.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") type = value;
    else if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  let parsed;
  try {
    parsed = data.length ? JSON.parse(data.join("\n")) : undefined;
  } catch {
    parsed = undefined;
  }
  return { type, id, data: parsed };
}
