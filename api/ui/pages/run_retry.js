// "Retry this run" on a run's page: for a run that ended without success (failed, skipped, cancelled),
// POST /api/runs/{id}/retry queues the next attempt of its tick (the same tick and idempotency key),
// and the page moves to that new run. A refusal (409: an attempt of the tick is still pending) is
// flashed as the API words it.
import { ApiError, post } from "../api.js";
import { h } from "../dom.js";
import { flash } from "../feedback.js";

const RETRIED = ["failed", "skipped", "cancelled"];

export function retryButton(run) {
  if (!RETRIED.includes(run.state)) return null;
  const button = h("button", { type: "button", id: "retry", class: "primary" }, "Retry this run");
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const again = await post(`/api/runs/${run.id}/retry`);
      flash(`Queued run #${again.id}: attempt ${again.attempt} of the same tick`);
      location.hash = `#/runs/${again.id}`;
    } catch (error) {
      flash(error instanceof ApiError ? error.message : String(error));
      button.disabled = false;
    }
  });
  return h("div", { class: "actions", role: "group", "aria-label": "Run actions" }, button);
}
