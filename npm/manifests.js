// Writes the package.json of the npm packages `scripts/npm-pack.sh` packs: `node manifests.js
// main VERSION` (the launcher `session-prune`, with every platform package as an exact-version
// optional dependency) or `node manifests.js platform KEY VERSION` (`session-prune-KEY`, which
// holds the binary, installed only where its os/cpu/libc match). The platforms are
// `session-prune/platforms.json`. No package has an install script (docs/npm.md).
"use strict";

const platforms = require("./session-prune/platforms.json");

const common = {
  license: "MIT",
  keywords: ["opencode", "opencode-plugin", "sqlite", "prune", "session"],
};

function main(version) {
  const optionalDependencies = {};
  for (const key of Object.keys(platforms)) optionalDependencies[`session-prune-${key}`] = version;
  return {
    name: "session-prune",
    version,
    description: "Prunes tool output and reasoning from OpenCode's session database, while OpenCode runs",
    ...common,
    main: "index.js",
    bin: { "session-prune": "bin/session-prune.js" },
    files: ["bin/", "plugin/", "index.js", "platform.js", "platforms.json", "README.md"],
    engines: { node: ">=18" },
    optionalDependencies,
  };
}

function platform(key, version) {
  const entry = platforms[key];
  if (!entry) throw new Error(`unknown platform ${key}: ${Object.keys(platforms).join(", ")}`);
  return {
    name: `session-prune-${key}`,
    version,
    description: `The session-prune binary for ${key}`,
    ...common,
    os: [entry.os],
    cpu: [entry.cpu],
    ...(entry.libc ? { libc: [entry.libc] } : {}),
    files: ["bin/"],
    preferUnplugged: true,
  };
}

const [kind, ...rest] = process.argv.slice(2);
const manifest = kind === "main" ? main(rest[0]) : kind === "platform" ? platform(rest[0], rest[1]) : null;
if (!manifest || !manifest.version) {
  process.stderr.write("usage: node manifests.js main VERSION | platform KEY VERSION\n");
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(manifest, null, 2)}\n`);
