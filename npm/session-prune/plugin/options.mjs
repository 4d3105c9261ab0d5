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
      if (Number.isInteger(value) && value >= 0) options.keepLastTurns = value;
      else problems.push(`keepLastTurns must be a whole number from 0, not ${JSON.stringify(value)}`);
    } else if (key === "quietPeriod" || key === "database" || key === "binary") {
      if (typeof value === "string" || (key === "quietPeriod" && Number.isFinite(value))) options[key] = value;
      else problems.push(`${key} must be a string, not ${JSON.stringify(value)}`);
    } else {
      problems.push(`unknown option ${key}`);
    }
  }
  return { options, problems };
}
