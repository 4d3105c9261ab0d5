// The one `session-prune serve` the plugin talks to (docs/plugin.md, "The server"): started
// for the database OpenCode uses, on loopback with a password of its own, or attached to when
// another OpenCode process of the same database started it first. One per process and
// database, however many times OpenCode sets the plugin up (OpenCode 2 sets it up once per
// location). The server stops when this process ends, however it ends: its standard input is a
// pipe from here and it runs with `--stop-with-stdin`.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync, unlinkSync, renameSync, statSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The workspace id every request names: the server is started with this one workspace, `/`,
 * which holds every session of the database. */
export const WORKSPACE = "opencode";

/** How long the server may take to say where it listens, ms. */
const START_TIMEOUT_MS = 30_000;

const servers = new Map();

/**
 * The database OpenCode uses, as OpenCode finds it: `options.database`, else `OPENCODE_DB`
 * (a file name is taken in OpenCode's data folder), else `opencode.db` in
 * `$XDG_DATA_HOME/opencode` or `~/.local/share/opencode`.
 */
export function databasePath(options) {
  const dataDir = path.join(process.env.XDG_DATA_HOME || path.join(homedir(), ".local", "share"), "opencode");
  const given = options.database || process.env.OPENCODE_DB;
  if (!given) return path.join(dataDir, "opencode.db");
  return path.isAbsolute(given) ? given : path.join(dataDir, given);
}

/** The binary to run: `options.binary`, `SESSION_PRUNE_BINARY`, or the one the npm platform
 * package holds. `{path}` or `{error}` in words. */
export function binary(options) {
  const given = options.binary || process.env.SESSION_PRUNE_BINARY;
  if (given) return { path: given };
  const { platformKey, binaryPath } = require("../platform.js");
  return binaryPath(platformKey());
}

/**
 * The server for `options` (see `databasePath`): a promise of `{url, password, database,
 * attached, pid}`, made once per database and process (again when the process that started
 * an attached one has ended). Rejects with an Error whose message says what
 * to do when no server can be had.
 */
export function server(options) {
  const database = databasePath(options);
  let found = servers.get(database);
  if (!found) {
    found = attach(database).then((attached) => attached || start(database, options).catch((error) => attachAfter(database, error)));
    found.catch(() =>
      setTimeout(() => {
        if (servers.get(database) === found) servers.delete(database);
      }, RETRY_START_AFTER_MS).unref(),
    );
    servers.set(database, found);
    return found;
  }
  // A server another process started ends with that process: attach again, or start one.
  return found.then((known) => {
    if (!known.attached || alive(known.pid)) return known;
    if (servers.get(database) === found) servers.delete(database);
    return server(options);
  });
}

/** When a start failed because another process holds the journal, that process may be another
 * OpenCode's plugin that started its server a moment before (when the process whose server
 * they shared ended): its registration is attached to if it appears within a few seconds;
 * else `error` stands. */
async function attachAfter(database, error) {
  for (let tries = 0; tries < 6; tries += 1) {
    const attached = await attach(database);
    if (attached) return attached;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw error;
}

/** Forgets the server of `options`' database, so that the next request attaches or starts
 * again (the one it knew is gone). */
export function forgetServer(options) {
  servers.delete(databasePath(options));
}

/** How long a server that would not start is not tried again, ms: each request would otherwise
 * start one more that stops at once (another process holds the journal). */
const RETRY_START_AFTER_MS = 30_000;

/** The file's identity, `dev:ino`, or null: a copy of the database (with its registration) is
 * another file, whose server this is not. */
function identity(database) {
  try {
    const stat = statSync(database);
    return `${stat.dev}:${stat.ino}`;
  } catch {
    return null;
  }
}

/** Where a server started by this plugin writes how to reach it, for the other OpenCode
 * processes of the same database (mode 0600: it holds the password). */
function registrationPath(database) {
  return `${database}.session-prune-serve.json`;
}

/** The server another process registered for `database`, if it is alive and answers; else
 * null. */
async function attach(database) {
  let registration;
  try {
    registration = JSON.parse(readFileSync(registrationPath(database), "utf8"));
  } catch {
    return null;
  }
  if (!alive(registration.pid)) return null;
  if (!registration.identity || registration.identity !== identity(database)) return null;
  try {
    const { send } = await import("./api.mjs");
    const answer = await send("GET", `${registration.url}/health`, {
      headers: { authorization: `Bearer ${registration.password}` },
      signal: AbortSignal.timeout(5_000),
    });
    answer.resume();
    if (answer.statusCode !== 200) return null;
  } catch {
    return null;
  }
  return { url: registration.url, password: registration.password, database, attached: true, pid: registration.pid };
}

function alive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}

/** Starts `session-prune serve` for `database` and waits for its `listening` line. */
function start(database, options) {
  const found = binary(options);
  if (found.error) return Promise.reject(new Error(found.error));
  const password = randomBytes(24).toString("hex");
  const args = [
    "serve", "--db", database, "--listen", "127.0.0.1:0", "--json",
    "--workspace", `${WORKSPACE}=/`, "--archive", "--stop-with-stdin",
  ];
  if (options.quietPeriod !== undefined) args.push("--quiet-period", String(options.quietPeriod));
  const child = spawn(found.path, args, {
    env: { ...process.env, SESSION_PRUNE_PASSWORD: password },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text) => {
    stderr = (stderr + text).slice(-4_000);
  });
  let ready = false;
  return new Promise((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      reject(new Error(`session-prune serve did not start within ${START_TIMEOUT_MS / 1000} s: ${stderr.trim()}`));
    }, START_TIMEOUT_MS);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`could not run ${found.path}: ${error.message}`));
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      forget(database, child.pid);
      // A server that stopped after it started is started again by the next request that needs
      // one; one that never started is retried after RETRY_START_AFTER_MS (see `server`).
      if (ready) servers.delete(database);
      const words = stderr.trim().split("\n").pop() || `exit ${code}`;
      reject(new Error(code === 3
        ? `another session-prune process holds the journal of ${database} (a \`session-prune serve\` or a clean started outside OpenCode; ${words}). The plugin uses only a server it or another OpenCode started: stop that process, and the plugin starts its own within ${RETRY_START_AFTER_MS / 1000} s`
        : `session-prune serve for ${database} stopped: ${words}`));
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (text) => {
      stdout += text;
      const end = stdout.indexOf("\n");
      if (end < 0) return;
      let line;
      try {
        line = JSON.parse(stdout.slice(0, end));
      } catch {
        return;
      }
      if (line.status !== "listening") return;
      ready = true;
      clearTimeout(timer);
      child.stdout.removeAllListeners("data");
      child.stdout.resume();
      child.unref();
      child.stdin.unref?.();
      child.stdout.unref?.();
      child.stderr.unref?.();
      register(database, { pid: child.pid, url: line.url, password, database, identity: identity(database) });
      process.once("exit", () => {
        forget(database, child.pid);
        child.kill("SIGTERM");
      });
      resolve({ url: line.url, password, database, attached: false, pid: child.pid });
    });
  });
}

function register(database, registration) {
  const target = registrationPath(database);
  const temporary = `${target}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, JSON.stringify(registration), { mode: 0o600 });
    renameSync(temporary, target);
  } catch {
    // Without the file, another OpenCode process starts a server of its own, which then
    // finds the journal held and says so: nothing is lost.
  }
}

function forget(database, pid) {
  try {
    const registration = JSON.parse(readFileSync(registrationPath(database), "utf8"));
    if (registration.pid === pid) unlinkSync(registrationPath(database));
  } catch {
    // Already gone, or another server's.
  }
}
