// The run page's Cancel button: shown while the run is queued, waiting or running; asks first.
// A queued or waiting run is cancelled at once (200); a running one's executor is asked to stop it
// (202): the page, refreshed while the run is not over, then shows it `cancelled`.
import { ApiError, post } from "../api.js";
import { h } from "../dom.js";
import { flash } from "../feedback.js";

const CANCELLABLE = ["queued", "waiting", "reserved", "running"];

export function cancelButton(run, refresh) {
  if (!CANCELLABLE.includes(run.state)) return null;
  return h("button", { type: "button", id: "cancel-run", class: "danger", onclick: async () => {
    const what = run.state === "running" ? "Stop the running run" : "Cancel the run";
    if (!confirm(`${what} #${run.id}? It ends cancelled and is not retried.`)) return;
    try {
      const after = await post(`/api/runs/${run.id}/cancel`);
      flash(after.state === "cancelled" ? "Cancelled" : "Cancel requested: its executor stops it");
      await refresh();
    } catch (error) {
      flash(error instanceof ApiError ? error.message : String(error));
    }
  } }, "Cancel run");
}
