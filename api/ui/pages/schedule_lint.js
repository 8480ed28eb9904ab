// The job editor's schedule warnings and, editing a job, the ticks the new schedule adds and removes
// (docs/schedule-lint.md). The form asks the preview API with the job's stored schedule as the
// previous one and shows what comes back under the fire times, before anything is saved.
import { h, local, utc } from "../dom.js";

const SHOWN = 6; // ticks listed per side; the rest counted

/** The preview query's extra parameters for an edit of `job` (none for a new job or a one-off). */
// An H in a cron expression takes the values the job's name picks: the preview needs the name then.
export const HASHED = /(^|[\s,])h/i;
export function hashKey(expression, name) {
  return HASHED.test(expression || "") ? { job: name } : {};
}

export function previousOf(job) {
  if (!job?.cron_expression) return {};
  const more = job.schedules?.length ? { previous_schedules: JSON.stringify(job.schedules) } : {};
  return { previous_cron_expression: job.cron_expression, previous_timezone: job.timezone, previous_job: job.name, ...more };
}

function tick(t, sign) {
  return h("li", { class: sign === "+" ? "added" : "removed" }, `${sign} ${utc(t.at)}`,
    local(t.local) ? h("span", { class: "muted" }, ` (${local(t.local)})`) : null,
    t.dst ? h("span", { class: "dst" }, ` ${t.dst.detail}`) : null);
}

function diffSection(diff) {
  const changed = diff.added.length + diff.removed.length;
  const until = utc(diff.until);
  if (!changed) {
    return h("p", { class: "muted small", id: "schedule-diff" }, `Same ticks as now until ${until} (${diff.kept}).`);
  }
  const list = (ticks, sign) => [...ticks.slice(0, SHOWN).map((t) => tick(t, sign)),
    ticks.length > SHOWN ? h("li", { class: "muted" }, `${sign} … ${ticks.length - SHOWN} more`) : null];
  return h("div", { id: "schedule-diff" },
    h("p", { class: "small" }, h("strong", {}, "This edit, until " + until + ": "),
      `${diff.added.length} ticks added, ${diff.removed.length} removed, ${diff.kept} kept`,
      diff.partial ? " (more not counted)" : ""),
    h("ul", { class: "diff small" }, list(diff.added, "+"), list(diff.removed, "-")));
}

/** Nodes to show under the preview: the warnings, then an edit's diff. */
export function lintNotes(preview) {
  const warnings = preview.warnings ?? [];
  return [
    warnings.length
      ? h("ul", { class: "lint", id: "schedule-warnings", "aria-label": "Schedule warnings" },
        warnings.map((w) => h("li", { class: "notice", "data-code": w.code },
          h("strong", {}, `${w.code.replaceAll("_", " ")}: `), w.message,
          w.suggestion ? h("p", { class: "muted small" }, `Instead: ${w.suggestion}`) : null)))
      : null,
    preview.diff ? diffSection(preview.diff) : null,
  ];
}
