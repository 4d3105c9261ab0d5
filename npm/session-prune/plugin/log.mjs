// The plugin's warnings: OpenCode does not show what a plugin writes to the console, so each
// warning is also appended, with its time, to `<database>.session-prune-plugin.log` beside
// OpenCode's database (docs/plugin.md, "When something goes wrong").

import { appendFileSync } from "node:fs";

let target = null;

/** Sends later warnings to the log beside `database` too. */
export function logBeside(database) {
  target = `${database}.session-prune-plugin.log`;
}

/** Logs `message` (one line) as a warning of the plugin. */
export function warn(message) {
  const line = `session-prune: ${message}`;
  console.warn(line);
  if (!target) return;
  try {
    appendFileSync(target, `${new Date().toISOString()} ${line.replace(/\n/g, " | ")}\n`, { mode: 0o600 });
  } catch {
    // The console still has it.
  }
}
