// Which platform package holds the binary for this machine, and where its binary is. The
// packages and their `os`/`cpu`/`libc` are listed in `platforms.json` (docs/npm.md).
"use strict";

const path = require("node:path");
const platforms = require("./platforms.json");

/** Whether this Linux runs on musl rather than glibc: Node reports glibc's version when it
 * runs on glibc, and none on musl. */
function isMusl() {
  const report = process.report && process.report.getReport ? process.report.getReport() : null;
  const header = report && report.header;
  return !(header && header.glibcVersionRuntime);
}

/** This machine's platform key: `linux-x64-gnu`, `darwin-arm64`, `win32-x64`, ... */
function platformKey() {
  const base = `${process.platform}-${process.arch}`;
  if (process.platform !== "linux") return base;
  return `${base}-${isMusl() ? "musl" : "gnu"}`;
}

/** `{path}` of the binary for `key`, or `{error}` in words: no package is built for it, or the
 * package is not installed. */
function binaryPath(key) {
  const platform = platforms[key];
  const known = Object.keys(platforms).join(", ");
  if (!platform) {
    return { error: `no binary is built for ${key} (the platforms: ${known}); build it with \`cargo install --locked --path .\` from a clone of the repository` };
  }
  const name = `session-prune-${key}`;
  try {
    const manifest = require.resolve(`${name}/package.json`);
    return { path: path.join(path.dirname(manifest), "bin", platform.binary) };
  } catch {
    return { error: `the package ${name}, which holds the binary for ${key}, is not installed: install session-prune again with optional dependencies (npm install session-prune, without --omit=optional or --no-optional), or build it with \`cargo install --locked --path .\`` };
  }
}

module.exports = { platformKey, binaryPath, platforms };
