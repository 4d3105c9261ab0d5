#!/usr/bin/env node
// The `session-prune` command of the npm package: finds the binary of this platform in the
// package `session-prune-<platform>` npm installed beside this one (an optional dependency
// chosen by its `os`, `cpu` and `libc` fields), and runs it with the same arguments, standard
// streams and exit code. Signals sent to this process are passed on to the binary, which stops
// as it does on a terminal (docs/npm.md).
"use strict";

const { spawn } = require("node:child_process");
const { platformKey, binaryPath } = require("../platform.js");

const key = platformKey();
const found = binaryPath(key);
if (found.error) {
  process.stderr.write(`session-prune: ${found.error}\n`);
  process.exit(1);
}

const child = spawn(found.path, process.argv.slice(2), { stdio: "inherit" });
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
const forward = (signal) => child.kill(signal);
for (const signal of forwarded) process.on(signal, forward);

child.on("error", (error) => {
  process.stderr.write(`session-prune: could not run ${found.path}: ${error.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  for (const name of forwarded) process.off(name, forward);
  if (signal) {
    // Ended by a signal: end the same way, so that the caller sees what the binary met.
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
