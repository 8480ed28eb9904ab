// Every job's runs, newest first (GET /api/runs): filters by state, job, queue, trigger and tick
// age, kept in the URL hash (#/runs?state=failed&since=24h) so a view can be shared or bookmarked;
// pages by cursor. The API reads a bounded number of runs per page: a rare match may give a short
// page (even an empty one) that Next continues further back.
import { inNamespace } from "../namespace.js";
import { get, query } from "../api.js";
import { badge, h, ms, replace, table, time, utc } from "../dom.js";
import { jobLink, loadJobNames } from "../job_names.js";

const PAGE = 50;
// The states and triggers the API filters on, from its OpenAPI document (a state added to the API
// shows up here without a change); these if the document cannot be read.
const KNOWN = { states: ["queued", "waiting", "reserved", "running", "completed", "failed", "skipped"],
  triggers: ["schedule", "manual", "retry", "chain", "backfill"] };
let choices = null;

function filterChoices() {
  choices ??= get("/openapi.json").then((doc) => {
    const params = doc.paths["/api/runs"].get.parameters;
    const schema = (name) => params.find((p) => p.name === name).schema;
    return { states: schema("state").items.enum, triggers: schema("trigger").enum };
  }).catch(() => KNOWN);
  return choices;
}
export const SINCE = { "": "any time", "1h": "last hour", "24h": "last 24 h", "7d": "last 7 days", "30d": "last 30 days" };
const UNIT_MS = { h: 3_600_000, d: 86_400_000 };

/** The filters of a #/runs hash's query part; unknown values are dropped. */
export function readFilters(raw, known = KNOWN) {
  const params = new URLSearchParams(raw ?? "");
  const states = (params.get("state") ?? "").split(",").filter((s) => known.states.includes(s));
  const job = /^\d{1,19}$/.test(params.get("job") ?? "") ? params.get("job") : "";
  const trigger = known.triggers.includes(params.get("trigger")) ? params.get("trigger") : "";
  const since = params.get("since") in SINCE ? params.get("since") : "";
  return { states, job, queue: params.get("queue") ?? "", trigger, since };
}

/** The hash of a view of these filters: #/runs?state=failed,skipped&since=24h */
export function runsHash(filters) {
  return `#/runs${query({
    state: filters.states?.join(","), job: filters.job, queue: filters.queue, trigger: filters.trigger,
    since: filters.since,
  })}`;
}

/** The API's `from` for a "since" choice (24h: 24 hours before now). */
export function sinceInstant(since) {
  if (!since) return undefined;
  return new Date(Date.now() - Number(since.slice(0, -1)) * UNIT_MS[since.slice(-1)]).toISOString();
}

export async function runsPage(main, [raw], alive) {
  const known = await filterChoices();
  const filters = readFilters(raw, known);
  const cursors = [null]; // cursors[i]: where page i starts
  const boxes = known.states.map((s) => h("label", { class: "nowrap" },
    h("input", { type: "checkbox", name: "state", value: s, checked: filters.states.includes(s) }), ` ${s}`));
  const job = h("input", { id: "job-filter", type: "text", inputmode: "numeric", size: 6, placeholder: "id",
    value: filters.job, autocomplete: "off" });
  const queue = h("input", { id: "queue-filter", type: "text", size: 10, placeholder: "any", value: filters.queue,
    autocomplete: "off" });
  const trigger = h("select", { id: "trigger-filter" }, h("option", { value: "" }, "any"),
    known.triggers.map((t) => h("option", { value: t, selected: t === filters.trigger }, t)));
  const since = h("select", { id: "since-filter" },
    Object.entries(SINCE).map(([value, label]) => h("option", { value, selected: value === filters.since }, label)));
  const results = h("div", { id: "runs", "aria-live": "polite" });
  const prev = h("button", { type: "button", id: "prev" }, "← Newer");
  const next = h("button", { type: "button", id: "next" }, "Older →");
  const where = h("span", { class: "muted", id: "where" });

  function read() {
    filters.states = boxes.map((b) => b.querySelector("input")).filter((i) => i.checked).map((i) => i.value);
    filters.job = /^\d{1,19}$/.test(job.value.trim()) ? job.value.trim() : "";
    filters.queue = queue.value.trim();
    filters.trigger = trigger.value;
    filters.since = since.value;
    history.replaceState(null, "", runsHash(filters)); // the view's URL, without re-rendering the page
    cursors.length = 1;
    refresh();
  }

  async function refresh() {
    const page = cursors.length - 1;
    const data = await get(`/api/runs${query({
      ...inNamespace(), state: filters.states.join(","), job: filters.job, queue: filters.queue, trigger: filters.trigger,
      from: sinceInstant(filters.since), limit: PAGE, cursor: cursors[page],
    })}`);
    await loadJobNames(data.items.map((r) => r.job_id));
    if (!alive()) return;
    const short = data.items.length < PAGE && data.next_cursor;
    replace(results, table("Runs", [
      ["Run", (r) => h("a", { href: `#/runs/${r.id}` }, `#${r.id}`)],
      ["Job", (r) => jobLink(r.job_id)],
      ["State", (r) => badge(r.state)],
      ["Attempt", (r) => String(r.attempt)],
      ["Trigger", (r) => r.trigger],
      ["Scheduled", (r) => h("span", { title: utc(r.scheduled_for) }, time(r.scheduled_for))],
      ["Start delay", (r) => ms(r.start_delay_ms)],
      ["Duration", (r) => ms(r.duration_ms)],
      ["Node", (r) => r.node_id ?? "–"],
      ["Note", (r) => r.error ?? r.skip_reason ?? ""],
    ], data.items, short ? "No match among the runs searched so far: Older → searches further back."
      : "No run matches."));
    prev.disabled = page === 0;
    next.disabled = !data.next_cursor;
    next.onclick = () => { cursors.push(data.next_cursor); refresh(); };
    replace(where, `Page ${page + 1}`, short && data.items.length ? " (the search goes on with Older →)" : "");
  }

  for (const control of [...boxes.map((b) => b.querySelector("input")), trigger, since]) {
    control.addEventListener("change", read);
  }
  let typing;
  for (const input of [job, queue]) {
    input.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(read, 300); });
  }
  prev.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); refresh(); } });

  replace(main,
    h("div", { class: "title" }, h("h1", {}, "Runs")),
    h("p", { class: "muted" }, "Every job's runs, newest first (the order they were queued)."),
    h("fieldset", { class: "filters", id: "state-filter" }, h("legend", { class: "sr-only" }, "States"), "State:", boxes),
    h("div", { class: "filters" },
      h("label", { for: "job-filter" }, "Job"), job,
      h("label", { for: "queue-filter" }, "Queue"), queue,
      h("label", { for: "trigger-filter" }, "Trigger"), trigger,
      h("label", { for: "since-filter" }, "Scheduled"), since),
    results,
    h("div", { class: "pager" }, prev, where, next));
  await refresh();
  return () => (cursors.length === 1 ? refresh() : undefined); // only the newest page follows new runs
}
