// A job's history on its page: its revisions (every change to what or when it runs, numbered from 1:
// GET /api/jobs/{id}/revisions) and its audit trail (who did what: edits, pauses, triggers, retries,
// secret rotations: GET /api/jobs/{id}/history), newest first, a page at a time ("Older").
import { get, query } from "../api.js";
import { badge, h, replace, table, time, utc } from "../dom.js";
import { showError } from "../feedback.js";

const PAGE = 10;

const short = (value) => {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
};

function changes(revision) {
  return h("ul", { class: "changes" }, revision.fields.map((name) =>
    h("li", {}, h("code", {}, name), name in revision.changes ? ` → ${short(revision.changes[name])}` : "")));
}

// What an audit entry changed or did, in a line: the fields that differ, a run retried, a trigger.
function what(entry) {
  const detail = entry.detail ?? {};
  if (detail.retry_run_id) {
    return ["run ", h("a", { href: `#/runs/${detail.run_id}` }, `#${detail.run_id}`), " retried as ",
      h("a", { href: `#/runs/${detail.retry_run_id}` }, `#${detail.retry_run_id}`), ` (attempt ${detail.attempt})`];
  }
  if (detail.run_id) return ["run ", h("a", { href: `#/runs/${detail.run_id}` }, `#${detail.run_id}`)];
  if (entry.before && entry.after) {
    const changed = Object.keys(entry.after).filter((k) => JSON.stringify(entry.before[k]) !== JSON.stringify(entry.after[k]));
    return changed.length ? changed.map((k, i) => [i ? ", " : "", h("code", {}, k)]) : "no field changed";
  }
  return "";
}

// One paged list: its rows so far, and an Older button while the API has more.
function paged(id, path, render) {
  const body = h("div", { id });
  const more = h("button", { type: "button", id: `${id}-more` }, "Older");
  let items = [];
  let cursor = null;
  async function load() {
    try {
      const page = await get(`${path}${query({ limit: PAGE, cursor })}`);
      items = items.concat(page.items);
      cursor = page.next_cursor;
      replace(body, render(items));
      more.hidden = !cursor;
    } catch (error) {
      showError(body, error);
    }
  }
  more.addEventListener("click", load);
  return { element: h("div", {}, body, h("div", { class: "pager" }, more)), load };
}

/** The history section of job `id`'s page; it loads once (a job's history changes with its edits). */
export function jobHistory(id) {
  const revisions = paged("revisions", `/api/jobs/${id}/revisions`, (items) => table("Revisions", [
    ["Revision", (r) => `#${r.number}`],
    ["Change", (r) => r.kind],
    ["When", (r) => h("span", { title: utc(r.at) }, time(r.at))],
    ["Who", (r) => r.actor],
    ["Status", (r) => badge(r.status)],
    ["Fields", changes],
  ], items, "No revision."));
  const audit = paged("audit", `/api/jobs/${id}/history`, (items) => table("Audit history", [
    ["When", (e) => h("span", { title: utc(e.at) }, time(e.at))],
    ["Who", (e) => e.actor],
    ["Action", (e) => e.action],
    ["What", what],
  ], items, "Nothing recorded."));
  revisions.load();
  audit.load();
  return h("section", { "aria-labelledby": "history-h", id: "history" },
    h("h2", { id: "history-h" }, "History"),
    h("div", { class: "columns" },
      h("div", {}, h("h3", {}, "Revisions"), revisions.element),
      h("div", {}, h("h3", {}, "Audit history"), audit.element)));
}
