// The upkeep view: where the clean on a schedule stands (`GET /api/session-pruning/upkeep`),
// read at start and after each of its runs (the `upkeep` event), and the switch that pauses or
// resumes it (`POST` with `{paused}`). Hidden on a server without a schedule. Its words are
// upkeep-status.js's.

import { bytes, text } from "./messages.js";
import { $, api, notice, state } from "./state.js";
import { describeUpkeep } from "./upkeep-status.js";

const PATH = "/api/session-pruning/upkeep";

/** Reads where the schedule stands and draws it. */
export async function loadUpkeep() {
  try {
    show(await api.get(PATH));
  } catch (error) {
    notice(`The upkeep cannot be read: ${error.message}`);
  }
}

function show(status) {
  state.upkeep = status;
  const view = describeUpkeep(status, bytes, clock);
  $("upkeep").hidden = !view.shown;
  if (!view.shown) return;
  $("upkeep-state").textContent = view.state;
  $("upkeep-body").replaceChildren(...view.lines.map((line) => text("p", "", line)));
  $("upkeep-pause").textContent = view.pause;
}

/** A time of today as the browser's clock shows it. */
function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

$("upkeep-pause").addEventListener("click", async () => {
  const button = $("upkeep-pause");
  button.disabled = true;
  try {
    show(await api.post(PATH, { paused: !state.upkeep.paused }));
  } catch (error) {
    notice(`The upkeep could not be changed: ${error.message}`);
  } finally {
    button.disabled = false;
  }
});
