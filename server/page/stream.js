// The event stream of one workspace, read with `fetch` (an `EventSource` cannot send the
// password), resumed after every drop with `Last-Event-ID`. The last id is kept in
// localStorage per database and workspace, so a reload or a restarted server resumes where
// the page was, and the page learns every prune it missed.

const RETRY_FIRST_MS = 250;
const RETRY_MOST_MS = 4000;

/**
 * Follows the stream at `path` until `stop()`. `onEvent({type, id, data})` gets every event
 * (`id` is null for a retry's event the stream has already passed); `onStatus(text, live)`
 * says whether it is connected. A fresh page with no stored id starts at `startAfter` (the
 * journal's `lastSeq` when the page loaded: what came before is in what it reads).
 */
export class EventStream {
  constructor(api, path, storeKey, startAfter, onEvent, onStatus) {
    this.api = api;
    this.path = path;
    this.storeKey = storeKey;
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    const stored = localStorage.getItem(storeKey);
    this.lastId = stored !== null && /^\d+$/.test(stored) ? stored : String(startAfter);
    this.controller = null;
    this.stopped = false;
  }

  stop() {
    this.stopped = true;
    this.controller?.abort();
  }

  async run() {
    let delay = RETRY_FIRST_MS;
    while (!this.stopped) {
      this.controller = new AbortController();
      try {
        const response = await fetch(this.path, {
          headers: this.api.headers({ "Last-Event-ID": this.lastId, Accept: "text/event-stream" }),
          credentials: "omit",
          cache: "no-store",
          signal: this.controller.signal,
        });
        if (response.status === 401) {
          this.api.onUnauthorized();
          this.onStatus("events: waiting for the password", false);
          return;
        }
        if (!response.ok || !response.body) throw new Error(`${response.status}`);
        this.onStatus(`events: live after #${this.lastId}`, true);
        delay = RETRY_FIRST_MS;
        await this.read(response.body);
      } catch (error) {
        if (this.stopped) return;
        this.onStatus(`events: reconnecting (${error.message || error})`, false);
      }
      if (this.stopped) return;
      this.onStatus(`events: reconnecting after #${this.lastId}`, false);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, RETRY_MOST_MS);
    }
  }

  /** Reads events off `body` until it ends, dispatching each at its blank line. */
  async read(body) {
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
    this.onEvent({ type: event.type || "message", id: event.id, data });
    if (event.id !== null && /^\d+$/.test(event.id)) {
      this.lastId = event.id;
      localStorage.setItem(this.storeKey, event.id);
      this.onStatus(`events: live after #${this.lastId}`, true);
    }
  }
}

function blank() {
  return { type: "", id: null, data: [] };
}
