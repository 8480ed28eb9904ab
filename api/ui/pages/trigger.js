// "Run now…" with inputs: a dialog on the job page. The job's payload (as the API shows it: secrets
// as "***") is edited as JSON; what differs is sent as overrides (a JSON Merge Patch, RFC 7396) to
// POST /api/jobs/{id}/trigger, with an optional past tick to re-run with its logical date. Secrets
// are locked: they stay as stored and cannot be changed here (the API refuses it too).
import { ApiError, post } from "../api.js";
import { flash } from "../feedback.js";
import { h, replace } from "../dom.js";

const SECRET = "***";
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/** The merge patch that turns `before` into `after` (RFC 7396: null removes a key). */
export function mergePatch(before, after) {
  if (!isObject(before) || !isObject(after)) return after;
  const patch = {};
  for (const key of Object.keys(before)) if (!(key in after)) patch[key] = null;
  for (const [key, value] of Object.entries(after)) {
    if (!(key in before)) patch[key] = value;
    else if (!same(before[key], value)) patch[key] = mergePatch(before[key], value);
  }
  return patch;
}

/** Every place of the shown payload that holds a secret ("***", or a URL with "***" in it). */
export function lockedPlaces(value, path = []) {
  if (typeof value === "string") return value.includes(SECRET) ? [path] : [];
  if (Array.isArray(value)) return value.flatMap((v, i) => lockedPlaces(v, [...path, i]));
  if (isObject(value)) return Object.entries(value).flatMap(([k, v]) => lockedPlaces(v, [...path, k]));
  return [];
}

const label = (path) => path.map((p) => (typeof p === "number" ? `[${p}]` : `.${p}`)).join("").slice(1);
const at = (value, path) => path.reduce((v, p) => (v === undefined || v === null ? undefined : v[p]), value);

export function openTrigger(job, done) {
  const shown = job.payload;
  const locked = lockedPlaces(shown);
  const editor = h("textarea", { id: "trigger-payload", rows: 12, spellcheck: "false", "aria-describedby": "trigger-help" });
  editor.value = JSON.stringify(shown, null, 2);
  const tick = h("input", { id: "trigger-at", type: "text", placeholder: "2026-03-01T02:00:00Z", autocomplete: "off",
    "aria-describedby": "trigger-at-help" });
  const problem = h("p", { id: "trigger-error", class: "error", role: "alert" });
  const form = h("form", { id: "trigger-form" },
    h("h2", { id: "trigger-title" }, "Run now with inputs"),
    h("label", { for: "trigger-payload" }, "Payload for this run"),
    editor,
    h("p", { id: "trigger-help", class: "muted small" },
      "Only what you change is sent, as overrides for this run; the job itself stays as it is."),
    locked.length ? h("p", { id: "trigger-locked", class: "muted small" }, "Locked secrets (kept as stored): ",
      locked.map((p, i) => [i ? ", " : "", h("code", {}, label(p))])) : null,
    h("label", { for: "trigger-at" }, "Logical date (optional)"),
    tick,
    h("p", { id: "trigger-at-help", class: "muted small" },
      "A past tick of the schedule to re-run, with its idempotency key (UTC, or with its offset)."),
    problem,
    h("div", { class: "actions" },
      h("button", { type: "submit", id: "trigger-run", class: "primary" }, "Run now"),
      h("button", { type: "button", id: "trigger-cancel" }, "Cancel")));
  const dialog = h("dialog", { id: "trigger-dialog", class: "wide", "aria-labelledby": "trigger-title" }, form);

  const close = () => {
    dialog.close();
    dialog.remove();
  };
  const fail = (text, field) => {
    replace(problem, text);
    editor.setAttribute("aria-invalid", String(field === "editor"));
    tick.setAttribute("aria-invalid", String(field === "tick"));
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault(); // the CSP allows no form submission
    let edited;
    try {
      edited = JSON.parse(editor.value);
    } catch (error) {
      return fail(`The payload is not JSON: ${error.message}`, "editor");
    }
    if (!isObject(edited)) return fail("The payload must be a JSON object.", "editor");
    const moved = locked.find((p) => !same(at(edited, p), at(shown, p)));
    if (moved) return fail(`${label(moved)} is a secret: it stays as stored (edit the job to change it).`, "editor");
    const body = {};
    const patch = mergePatch(shown, edited);
    if (Object.keys(patch).length) body.payload = patch;
    if (tick.value.trim()) body.scheduled_for = tick.value.trim();
    try {
      const run = await post(`/api/jobs/${job.id}/trigger`, Object.keys(body).length ? body : undefined);
      close();
      flash(`Queued run #${run.id} (attempt ${run.attempt})`);
      await done(run);
    } catch (error) {
      const field = error instanceof ApiError ? error.field : null;
      fail(error instanceof ApiError ? error.message : String(error), field === "$.scheduled_for" ? "tick" : "editor");
    }
  });
  dialog.addEventListener("cancel", close);
  form.querySelector("#trigger-cancel").addEventListener("click", close);
  document.body.append(dialog);
  dialog.showModal();
  editor.focus();
}
