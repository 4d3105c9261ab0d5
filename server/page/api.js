// The page's calls to the API of the server that served it: JSON in and out, the password in
// `Authorization: Bearer` once the person gave it. `credentials: "omit"` keeps the browser's
// own password dialog away (the server's 401 carries a Basic challenge for other clients).

const PASSWORD_KEY = "session-prune.password";

/** An answer that is not 200: `status` is the HTTP status, `field` the field at fault. */
export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

export class Api {
  constructor() {
    this.password = sessionStorage.getItem(PASSWORD_KEY);
    /** Called with no argument whenever the server answers 401. */
    this.onUnauthorized = () => {};
  }

  setPassword(password) {
    this.password = password;
    if (password === null) sessionStorage.removeItem(PASSWORD_KEY);
    else sessionStorage.setItem(PASSWORD_KEY, password);
  }

  /** Request headers: the password when there is one, and `extra`. */
  headers(extra = {}) {
    const headers = { ...extra };
    if (this.password !== null) headers.Authorization = `Bearer ${latin1(this.password)}`;
    return headers;
  }

  get(path, signal) {
    return this.call(path, { method: "GET", signal });
  }

  post(path, body, signal) {
    return this.call(path, {
      method: "POST",
      body: JSON.stringify(body),
      signal,
      contentType: "application/json",
    });
  }

  async call(path, { method, body, signal, contentType }) {
    const extra = contentType ? { "Content-Type": contentType } : {};
    const response = await fetch(path, {
      method,
      body,
      signal,
      headers: this.headers(extra),
      credentials: "omit",
      cache: "no-store",
    });
    if (response.ok) return response.json();
    let detail = `${response.status} ${response.statusText}`;
    let field;
    try {
      const error = await response.json();
      detail = error.error ?? detail;
      field = error.field;
    } catch {
      // Not a JSON error: the status says it.
    }
    if (response.status === 401) this.onUnauthorized();
    throw new ApiError(response.status, detail, field);
  }
}

/**
 * `text` as UTF-8, one character per byte: a header value is sent as bytes of ISO-8859-1, and
 * the server compares the password's UTF-8 bytes.
 */
function latin1(text) {
  return String.fromCharCode(...new TextEncoder().encode(text));
}

/** The API paths of workspace `id`. */
export function workspacePaths(id) {
  const base = `/api/workspaces/${encodeURIComponent(id)}`;
  return {
    sessions: (cursor) => `${base}/sessions${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ""}`,
    stats: (top, exact = false) => `${base}/stats?top=${top}${exact ? "&exact=true" : ""}`,
    history: (name) => `${base}/session-history/${name}`,
    pruning: (name) => `${base}/session-pruning/${name}`,
    receipts: (sessionID) => `${base}/session-pruning/receipts?sessionID=${encodeURIComponent(sessionID)}`,
    events: `${base}/session-pruning/events`,
  };
}
