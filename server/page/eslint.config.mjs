// The page's lint (`.ci/run` runs `npx eslint@10 --config server/page/eslint.config.mjs
// server/page`): no name used that is not declared or imported, none declared and unused, no
// unreachable code. The browser's names the page uses are listed: a new one is added here.

const browser = [
  "AbortController", "BroadcastChannel", "CSS", "IntersectionObserver", "TextDecoderStream", "TextEncoder",
  "URLSearchParams", "clearTimeout", "document", "fetch", "history", "localStorage", "location",
  "navigator", "performance", "requestAnimationFrame", "sessionStorage", "setTimeout", "window",
];

export default [
  {
    files: ["**/*.js"],
    languageOptions: {
      sourceType: "module",
      ecmaVersion: 2024,
      globals: Object.fromEntries(browser.map((name) => [name, "readonly"])),
    },
    rules: {
      "no-undef": "error",
      "no-unused-vars": ["error", { args: "after-used" }],
      "no-unreachable": "error",
      "no-dupe-keys": "error",
      "no-redeclare": "error",
      "no-shadow-restricted-names": "error",
      "no-self-assign": "error",
      "no-constant-condition": ["error", { checkLoops: false }],
      "eqeqeq": "error",
      "prefer-const": "error",
    },
  },
];
