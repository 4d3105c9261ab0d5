// The plugin's options (docs/plugin.md, "Options"), as OpenCode passes them from
// `"plugin": [["session-prune", {...}]]`, checked once: an option that is not understood is
// named in OpenCode's log and the default is used.

const DEFAULTS = {
  idleClean: false,
  keepLastTurns: 2,
  quietPeriod: undefined,
  database: undefined,
  binary: undefined,
};

/** The most turns `keepLastTurns` takes: the server reads it as an unsigned 32-bit number. */
const MAX_TURNS = 4_294_967_295;

/** A duration as `serve --quiet-period` reads it: seconds, or numbers with units ("30s",
 * "1m 30s", "500ms"); the server checks its bounds. */
const UNIT = "(ns|us|ms|s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hr|hrs|hour|hours|d|day|days|w|week|weeks)";
const DURATION = new RegExp(`^\\s*\\d{1,9}(\\s*${UNIT}\\s*(\\d{1,9}\\s*${UNIT}\\s*)*)?$`);

/** The options from what OpenCode passed (`undefined` or an object): `{idleClean: false |
 * "old" | "apply", keepLastTurns, quietPeriod, database, binary}` and the words of each
 * problem. */
export function readOptions(given) {
  const options = { ...DEFAULTS };
  const problems = [];
  for (const [key, value] of Object.entries(given && typeof given === "object" ? given : {})) {
    if (key === "idleClean") {
      if (value === true) options.idleClean = "old";
      else if (value === false || value === "old" || value === "apply") options.idleClean = value;
      else problems.push(`idleClean must be true, false, "old" or "apply", not ${JSON.stringify(value)}`);
    } else if (key === "keepLastTurns") {
      if (Number.isInteger(value) && value >= 0 && value <= MAX_TURNS) options.keepLastTurns = value;
      else problems.push(`keepLastTurns must be a whole number from 0 to ${MAX_TURNS}, not ${JSON.stringify(value)}`);
    } else if (key === "quietPeriod") {
      if ((Number.isInteger(value) && value >= 0 && value < 1e9) || (typeof value === "string" && DURATION.test(value))) options.quietPeriod = value;
      else problems.push(`quietPeriod must be a duration such as "30s", "2m" or a number of seconds, not ${JSON.stringify(value)}`);
    } else if (key === "database" || key === "binary") {
      if (typeof value === "string" && value !== "") options[key] = value;
      else problems.push(`${key} must be a path, not ${JSON.stringify(value)}`);
    } else {
      problems.push(`unknown option ${key}`);
    }
  }
  return { options, problems };
}
