// The OpenCode plugin of session-prune, one module for both majors (docs/plugin.md): OpenCode
// 1.x calls `server(input, options)` (the `server` plugin of `@opencode-ai/plugin`), OpenCode
// 2 calls `setup(api)`; each ignores the other's key.
import { server } from "./plugin/opencode1.mjs";
import { setup } from "./plugin/opencode2.mjs";

export default { id: "session-prune", server, setup };
