// Calendars and blackouts (issue 25): the business calendars jobs name to exclude or allow days, and
// the blackout windows that skip or defer ticks. Also what the job form and page use to show a job's
// calendars and its timed pause.
import { inNamespace } from "../namespace.js";
import { get, query } from "../api.js";
import { fields, h, replace, table, utc } from "../dom.js";

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** [{name, mode}] -> "holidays, weekdays:allow" (the form's text). */
export function calendarsText(refs) {
  return (refs ?? []).map((r) => (r.mode === "allow" ? `${r.name}:allow` : r.name)).join(", ");
}

/** "holidays, weekdays:allow" -> [{name, mode}]; undefined when a part is not NAME or NAME:allow|exclude. */
export function parseCalendars(text) {
  const refs = [];
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const [name, mode = "exclude", ...rest] = part.split(":");
    if (!NAME.test(name) || !["exclude", "allow"].includes(mode) || rest.length) return undefined;
    refs.push({ name, mode });
  }
  return refs;
}

/** The job page's lines for its calendars and a timed pause (none when it has neither). */
export function jobRuleFields(job) {
  const pairs = [];
  if (job.calendars?.length) pairs.push(["Calendars", calendarsText(job.calendars)]);
  if (job.paused_until) {
    pairs.push(["Paused until", [utc(job.paused_until), job.pause_note ? ` — ${job.pause_note}` : ""]]);
  }
  return pairs.length ? fields(pairs) : null;
}

function days(c) {
  return [...c.weekdays, ...c.dates, ...c.ranges.map((r) => `${r.from} – ${r.to}`)].join(", ") || "none";
}

function window(b) {
  if (b.cron_expression === null) return `${utc(b.starts_at)} – ${utc(b.ends_at)}`;
  return [h("code", {}, b.cron_expression), ` for ${b.duration_s} s in ${b.timezone}`];
}

function selector(b) {
  const parts = [];
  if (b.selector.jobs.length) parts.push(`jobs ${b.selector.jobs.join(", ")}`);
  if (b.selector.queues.length) parts.push(`queues ${b.selector.queues.join(", ")}`);
  return parts.join("; ") || "every job";
}

export async function calendarsPage(main, _params, alive) {
  async function refresh() {
    const [cals, blackouts] = await Promise.all([get(`/api/calendars${query(inNamespace())}`), get("/api/blackouts")]);
    if (!alive()) return;
    replace(main,
      h("h1", {}, "Calendars and blackouts"),
      h("p", { class: "muted" }, "A job names calendars to skip their days (exclude) or every other day (allow); ",
        "a blackout skips or defers the ticks inside its window. Skipped ticks name them as their reason."),
      h("h2", {}, "Calendars"),
      h("div", { id: "calendars" }, table("Calendars", [
        ["Name", (c) => h("strong", {}, c.name)],
        ["Time zone", (c) => c.timezone],
        ["Days", (c) => days(c)],
        ["Description", (c) => c.description],
      ], cals.items, "No calendar yet: cronos calendars set NAME …, or PUT /api/calendars/NAME.")),
      h("h2", {}, "Blackouts"),
      h("div", { id: "blackouts" }, table("Blackouts", [
        ["Name", (b) => h("strong", {}, b.name)],
        ["Action", (b) => b.action],
        ["Window", (b) => window(b)],
        ["Jobs", (b) => selector(b)],
        ["Note", (b) => b.note],
      ], blackouts.items, "No blackout window.")));
  }
  await refresh();
  return refresh;
}
