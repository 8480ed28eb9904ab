// The job form's third kind of schedule (issue 25): an interval, `every` with an optional `anchor`.
// Its preview comes from the same API as a cron's (GET /api/schedule/preview?every=…), which checks
// it as a save would; its fire times are shown in the job's zone, never moved by DST.
import { get, query } from "../api.js";
import { h, local, replace, utc } from "../dom.js";

export const INTERVAL = "every"; // the schedule_type choice
export const INTERVAL_LABEL = "Every (interval)";

/** The every and anchor inputs, filled from the job (a new one: every 90 minutes). */
export function intervalControls(job, text) {
  return {
    every: text("every", job?.every ?? "90m", { maxlength: 40, "aria-describedby": "preview" }),
    anchor: text("anchor", job?.anchor ?? null, { placeholder: "none: the Unix epoch" }),
  };
}

/** Their labelled fields, made by the form's own `field`. */
export function intervalFields(field, controls) {
  return {
    every: field("every", "Every", controls.every,
      "A duration: 90s, 90m, 1h30m, 2d (or seconds), 1 s to 366 days. Elapsed time: DST moves no tick."),
    anchor: field("anchor", "Anchor", controls.anchor,
      "Ticks are anchor + k × every (RFC 3339, e.g. 2026-01-01T00:07:00Z); empty: the Unix epoch."),
  };
}

/** Preview the interval (with `extra` in the query: more schedules) into `preview`; `problem(name, message)`
 * marks a field. False: a stale answer. */
export async function previewInterval(controls, timezone, preview, problem, current, extra = {}) {
  try {
    const data = await get(`/api/schedule/preview${query({
      every: controls.every.value, anchor: controls.anchor.value.trim() || undefined, timezone, count: 5, ...extra,
    })}`);
    if (!current()) return;
    for (const name of ["every", "anchor", "timezone"]) problem(name, null);
    replace(preview, h("p", { class: "lead", id: "description" }, data.description),
      h("ol", { class: "fires" }, data.fire_times.map((t) => h("li", {}, utc(t.at), " ",
        local(t.local) ? h("span", { class: "muted" }, ` (${local(t.local)})`) : null))));
  } catch (error) {
    if (!current()) return;
    const field = (error.field ?? "").replace(/^\$\./, "");
    const name = field.startsWith("schedules") ? "schedules" : field;
    problem(["anchor", "timezone", "schedules", "spread"].includes(name) ? name : "every", error.message);
    replace(preview, h("p", { class: "muted" }, "No preview until the interval is valid."));
  }
}

/** The interval's fields of a save's body: null unless the interval is the chosen schedule. */
export function intervalBody(body, chosen, controls) {
  body.every = chosen ? controls.every.value.trim() : null;
  body.anchor = chosen ? controls.anchor.value.trim() || null : null;
}
