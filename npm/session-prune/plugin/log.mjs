// The plugin's warnings: OpenCode does not show what a plugin writes to the console, so each
// warning is also appended, with its time, to `<database>.session-prune-plugin.log` beside
// OpenCode's database (docs/plugin.md, "When something goes wrong").

import { appendFileSync } from "node:fs";

let target = null;

/** Sends later warnings to the log beside `database` too. */
export function logBeside(database) {
  target = `${database}.session-prune-plugin.log`;
}

/** The longest warning written, in characters: a warning may quote what a person typed. */
const LINE_CHARACTERS = 1_000;

/** Logs `message` (one line, cut to `LINE_CHARACTERS`) as a warning of the plugin. */
export function warn(message) {
  const whole = `session-prune: ${message}`;
  const line = whole.length > LINE_CHARACTERS ? `${whole.slice(0, LINE_CHARACTERS)}…` : whole;
  console.warn(line);
  if (!target) return;
  try {
    appendFileSync(target, `${new Date().toISOString()} ${line.replace(/\n/g, " | ")}\n`, { mode: 0o600 });
  } catch {
    // The console still has it.
  }
}
