// "Backfill…" on the job page: a dialog that asks POST /api/jobs/{id}/backfill for a dry run of a
// range and mode (the ticks it would queue, with their state now), then queues exactly that on
// "Queue". A 422 is shown in place, next to the field it names.
import { ApiError, post } from "../api.js";
import { flash } from "../feedback.js";
import { h, replace, table } from "../dom.js";

const HOUR = 3600 * 1000;
const field = (label, control) => h("div", { class: "field" }, h("label", { for: control.id }, label), control);
const iso = (date) => date.toISOString().replace(/\.\d{3}Z$/, "Z");

export function openBackfill(job, done) {
  const now = Date.now();
  const from = h("input", { id: "backfill-from", type: "text", value: iso(new Date(now - 24 * HOUR)), autocomplete: "off" });
  const to = h("input", { id: "backfill-to", type: "text", value: iso(new Date(now)), autocomplete: "off" });
  const mode = h("select", { id: "backfill-mode" },
    h("option", { value: "missing" }, "Missing: ticks no run of which started"),
    h("option", { value: "failed" }, "Failed: ticks whose last attempt failed"),
    h("option", { value: "all" }, "All ticks"));
  const pace = h("input", { id: "backfill-pace", type: "number", min: "0.01", step: "any", placeholder: "the job's catch-up pace" });
  const problem = h("p", { id: "backfill-error", class: "error", role: "alert" });
  const preview = h("div", { id: "backfill-preview", "aria-live": "polite" });
  const queue = h("button", { type: "button", id: "backfill-queue", class: "primary", disabled: true }, "Queue");
  const form = h("form", { id: "backfill-form" },
    h("h2", { id: "backfill-title" }, "Backfill"),
    h("p", { class: "muted small" },
      "Queue runs for this job's past ticks in [from, to), as its schedule was then; each keeps its tick's date and idempotency key."),
    field("From (UTC, or with its offset)", from),
    field("To (not included)", to),
    field("Mode", mode),
    field("Pace (runs a second, optional)", pace),
    problem, preview,
    h("div", { class: "actions" },
      h("button", { type: "submit", id: "backfill-dry-run" }, "Dry run"), queue,
      h("button", { type: "button", id: "backfill-cancel" }, "Cancel")));
  const dialog = h("dialog", { id: "backfill-dialog", class: "wide", "aria-labelledby": "backfill-title" }, form);

  const body = (dryRun) => {
    const sent = { from: from.value.trim(), to: to.value.trim(), mode: mode.value, dry_run: dryRun };
    if (pace.value.trim()) sent.pace = Number(pace.value);
    return sent;
  };
  const fields = { "$.from": from, from, "$.to": to, to, "$.mode": mode, "$.pace": pace };
  const valid = () => {
    for (const input of new Set(Object.values(fields))) input.setAttribute("aria-invalid", "false");
  };
  const fail = (error) => {
    replace(problem, error instanceof ApiError ? error.message : String(error));
    valid();
    const named = error instanceof ApiError ? fields[error.field] : null;
    if (named) named.setAttribute("aria-invalid", "true");
  };
  const close = () => {
    dialog.close();
    dialog.remove();
  };
  for (const input of [from, to, mode, pace]) input.addEventListener("input", () => { queue.disabled = true; });

  form.addEventListener("submit", async (event) => {
    event.preventDefault(); // the CSP allows no form submission
    try {
      const answer = await post(`/api/jobs/${job.id}/backfill`, body(true));
      replace(problem);
      valid();
      replace(preview,
        h("p", { id: "backfill-summary" }, `${answer.ticks} ticks in the range; would queue ${answer.queued} at ${answer.pace}/s.`),
        table("Ticks it would queue", [
          ["Tick", (t) => h("code", {}, t.scheduled_for)],
          ["State now", (t) => t.state],
          ["Attempt", (t) => String(t.attempt)],
          ["Action", (t) => t.action],
        ], answer.items, "No tick to queue in this range and mode."));
      queue.disabled = answer.queued === 0;
    } catch (error) {
      fail(error);
    }
  });
  queue.addEventListener("click", async () => {
    try {
      const answer = await post(`/api/jobs/${job.id}/backfill`, body(false));
      close();
      flash(`Backfill: queued ${answer.queued} runs`);
      await done(answer);
    } catch (error) {
      fail(error);
    }
  });
  dialog.addEventListener("cancel", close);
  form.querySelector("#backfill-cancel").addEventListener("click", close);
  document.body.append(dialog);
  dialog.showModal();
  from.focus();
}
