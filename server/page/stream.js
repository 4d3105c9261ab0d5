// The event stream of one workspace, read with `fetch` (an `EventSource` cannot send the
// password), resumed after every drop with `Last-Event-ID`. The last id is kept in
// localStorage per database and workspace, so a reload or a restarted server resumes where
// the page was, and the page learns every prune it missed.
//
// One stream serves every tab of the page on the same database and workspace: a browser
// gives an origin 6 HTTP/1.1 connections, and a stream holds one for good, so six tabs with a
// stream each would leave none for their requests. The tab that holds a Web Lock reads the
// stream and passes each event on over a BroadcastChannel; when it closes, the next tab takes
// the lock and resumes from the shared last id. Where Web Locks are missing (a page served
// over plain HTTP to another machine is no secure context) each tab reads its own stream.

const RETRY_FIRST_MS = 250;
const RETRY_MOST_MS = 4000;

/**
 * Follows the stream at `path` until `stop()`. Its options:
 *
 * - `api`: the page's `Api` (its password goes with each connection);
 * - `path`: the workspace's events route;
 * - `storeKey`: the localStorage key of the last id (per database and workspace), also the
 *   name of the BroadcastChannel and the Web Lock the tabs share;
 * - `startAfter`: where a fresh page with no stored id starts (the journal's `lastSeq` when
 *   the page loaded: what came before is in what it reads);
 * - `onEvent({type, id, data})`: every event (`id` is null for a retry's event the stream has
 *   already passed);
 * - `onStatus(text, live)`: whether it is connected;
 * - `beforeConnect()`: runs before each connection: `"go"` connects, `"wait"` tries again after
 *   the next delay (the server cannot say which database it serves), `"stop"` ends the stream
 *   (the server now serves another database: the page starts anew).
 */
export class EventStream {
  constructor({ api, path, storeKey, startAfter, onEvent, onStatus, beforeConnect }) {
    this.api = api;
    this.path = path;
    this.storeKey = storeKey;
    this.startAfter = String(startAfter);
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.beforeConnect = beforeConnect;
    this.controller = null;
    this.stopped = false;
    /** Whether this tab reads the stream (else it follows the one that does). */
    this.reading = false;
    this.channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(storeKey) : null;
    this.lastId = this.stored() ?? this.startAfter;
    if (this.stored() === null) localStorage.setItem(storeKey, this.lastId);
  }

  stored() {
    const stored = localStorage.getItem(this.storeKey);
    return stored !== null && /^\d+$/.test(stored) ? stored : null;
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
    this.release?.();
    this.channel?.close();
  }

  /** Reads the stream in this tab, or follows the tab that does. */
  async run() {
    if (!navigator.locks || !this.channel) return this.read();
    this.channel.onmessage = ({ data }) => {
      if (this.stopped || this.reading) return;
      if (data.kind === "event") this.deliver(data.event);
      if (data.kind === "status") this.onStatus(`${data.text} (read by another tab)`, data.live);
    };
    this.onStatus("events: live (read by another tab)", true);
    await navigator.locks.request(`session-prune.events.${this.storeKey}`, () => {
      if (this.stopped) return undefined;
      // The tab that read the stream before kept the last id in localStorage.
      this.lastId = this.stored() ?? this.lastId;
      this.reading = true;
      return new Promise((resolve) => {
        this.release = resolve;
        this.read().then(resolve);
      });
    });
  }

  /** Reads the stream itself until stopped, reconnecting after each drop. */
  async read() {
    let delay = RETRY_FIRST_MS;
    while (!this.stopped) {
      const next = await this.beforeConnect();
      if (next === "stop") return;
      this.controller = new AbortController();
      try {
        if (next === "wait") throw new Error("the server does not answer");
        const response = await fetch(this.path, {
          headers: this.api.headers({ "Last-Event-ID": this.lastId, Accept: "text/event-stream" }),
          credentials: "omit",
          cache: "no-store",
          signal: this.controller.signal,
        });
        if (response.status === 401) {
          this.api.onUnauthorized();
          this.status("events: waiting for the password", false);
          return;
        }
        if (!response.ok || !response.body) throw new Error(`${response.status}`);
        this.status(`events: live after #${this.lastId}`, true);
        delay = RETRY_FIRST_MS;
        await this.parse(response.body);
      } catch (error) {
        if (this.stopped) return;
        this.status(`events: reconnecting (${error.message || error})`, false);
      }
      if (this.stopped) return;
      this.status(`events: reconnecting after #${this.lastId}`, false);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, RETRY_MOST_MS);
    }
  }

  /** Reads events off `body` until it ends, dispatching each at its blank line. */
  async parse(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let event = blank();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, end);
        const width = buffer.startsWith("\r\n", end) ? 2 : 1;
        buffer = buffer.slice(end + width);
        if (line === "") {
          this.dispatch(event);
          event = blank();
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event.type = value;
        else if (field === "data") event.data.push(value);
        else if (field === "id" && !value.includes("\0")) event.id = value;
      }
    }
  }

  dispatch(event) {
    if (event.data.length === 0) return;
    let data;
    try {
      data = JSON.parse(event.data.join("\n"));
    } catch {
      return;
    }
    const parsed = { type: event.type || "message", id: event.id, data };
    this.deliver(parsed);
    this.channel?.postMessage({ kind: "event", event: parsed });
    if (event.id !== null && /^\d+$/.test(event.id)) {
      this.lastId = event.id;
      localStorage.setItem(this.storeKey, event.id);
      this.status(`events: live after #${this.lastId}`, true);
    }
  }

  deliver(event) {
    this.onEvent(event);
  }

  /** Says whether the stream is connected, here and to the tabs that follow this one. */
  status(text, live) {
    this.onStatus(text, live);
    this.channel?.postMessage({ kind: "status", text, live });
  }
}

function blank() {
  return { type: "", id: null, data: [] };
}
