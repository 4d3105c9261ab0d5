// The lint of the OpenCode plugin and the launcher (`.ci/run` runs `npx eslint@10 --config
// npm/session-prune/eslint.config.mjs npm/session-prune`): the rules of the page's lint
// (server/page/eslint.config.mjs), with the names Node and Bun give a module. Not packed: the
// packages list their files (npm/manifests.js).

import page from "../../server/page/eslint.config.mjs";

const node = [
  "AbortController", "AbortSignal", "Buffer", "Date", "Symbol", "URL", "clearTimeout", "console",
  "process", "require", "module", "__dirname", "setTimeout",
];

// The page's rules, one list for both.
const rules = page.find((config) => config.rules).rules;

const globals = Object.fromEntries(node.map((name) => [name, "readonly"]));

export default [
  { files: ["**/session-prune/index.js", "**/session-prune/plugin/**/*.mjs"], languageOptions: { sourceType: "module", ecmaVersion: 2024, globals }, rules },
  { files: ["**/session-prune/bin/**/*.js", "**/session-prune/platform.js"], languageOptions: { sourceType: "commonjs", ecmaVersion: 2024, globals }, rules },
];
