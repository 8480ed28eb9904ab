// A job: its definition, next 10 fire times, run history with a chart, its recent ticks and their
// outcomes, and its actions.
import { ApiError, del, get, post, query } from "../api.js";
import { flash, showError } from "../feedback.js";
import { runChart } from "../chart.js";
import { openTrigger } from "./trigger.js";
import { openBackfill } from "./backfill.js";
import { badge, fields, h, local, ms, replace, table, time, utc } from "../dom.js";
import { jobHistory } from "./job_history.js";
import { jobRuleFields } from "./calendars.js";
import { healthSection } from "./job_health.js";
import { hashKey } from "./schedule_lint.js";
import { schedulesText } from "./form_schedules.js";

// The API's one start delay (from the tick) and its two parts; the page computes none of them.
export function startDelay(run) {
  return run.start_delay_ms ?? null;
}

const seconds = (s) => (s === null || s === undefined ? null : s * 1000);

export function runsTable(runs) {
  return table("Runs", [
    ["Run", (r) => h("a", { href: `#/runs/${r.id}` }, `#${r.id}`)],
    ["State", (r) => badge(r.state)],
    ["Attempt", (r) => String(r.attempt)],
    ["Trigger", (r) => r.trigger],
    ["Scheduled", (r) => h("span", { title: utc(r.scheduled_for) }, time(r.scheduled_for))],
    ["Start delay", (r) => ms(startDelay(r))],
    ["Held back", (r) => ms(r.held_back_ms)],
    ["Waited", (r) => ms(r.waited_ms)],
    ["Duration", (r) => ms(r.duration_ms)],
    ["Node", (r) => r.node_id ?? "–"],
    ["Note", (r) => r.error ?? r.skip_reason ?? ""],
  ], runs, "No runs yet.");
}

const TICK_WINDOW_MS = 10 * 60 * 1000; // the ticks section: the last 10 minutes
const TICKS_SHOWN = 50;
const BEFORE_CREATED = "before the job existed"; // the ticks API's reason (cronos/ticks.py)

// Every tick of the window with its outcome, newest first: the run(s), or why there is none.
export function ticksTable(ticks) {
  return table("Ticks", [
    ["Tick", (t) => h("span", { title: utc(t.scheduled_for) }, time(t.scheduled_for))],
    ["Outcome", (t) => badge(t.reason === "unaccounted" ? "unaccounted" : t.outcome)],
    ["Runs", (t) => t.runs.map((r) => h("a", { href: `#/runs/${r.id}`, title: `attempt ${r.attempt}: ${r.state}` },
      `#${r.id} `))],
    ["Start delay", (t) => ms(seconds(t.runs[0]?.start_delay_s))],
    ["Held back", (t) => ms(seconds(t.runs[0]?.held_back_s))],
    ["Waited", (t) => ms(seconds(t.runs[0]?.waited_s))],
    ["Reason", (t) => [t.reason ?? "", t.dst ? h("span", { class: "dst", title: t.dst.detail }, ` ${t.dst.detail}`) : null]],
    ["Revision", (t) => String(t.revision)],
  ], ticks, "No tick in the last 10 minutes.");
}

// The window's ticks come oldest first, a page at a time: keep the newest.
async function recentTicks(id) {
  const to = new Date();
  const from = new Date(to.getTime() - TICK_WINDOW_MS);
  let items = [];
  let cursor = null;
  for (let page = 0; page < 20; page += 1) {
    const body = await get(`/api/jobs/${id}/ticks${query({
      from: from.toISOString(), to: to.toISOString(), limit: 500, cursor,
    })}`);
    // A new job's window reaches back before it was created: those ticks were never its own.
    items = items.concat(body.items.filter((t) => t.reason !== BEFORE_CREATED)).slice(-TICKS_SHOWN);
    cursor = body.next_cursor;
    if (!cursor) break;
  }
  return items.reverse();
}

// When it runs after its parents (docs/chains.md): each parent's edge, and the join if any.
export function parentsText(job) {
  const edges = (job.parents ?? []).map((p) => `${p} (${job.chain?.on?.[String(p)] ?? "completed"})`).join(", ");
  const join = job.chain?.join;
  return `after ${edges}` + (join ? `; joined: once per tick, waits ${join.timeout_s} s, then ${join.on_timeout}s` : "");
}

// Where each tick runs (docs/every-host.md): null is one run per tick, on any executor.
export function hostsText(hosts) {
  const where = hosts.count ? `at most ${hosts.count} executors` : "every executor";
  return `${where} of its queue` + (hosts.label ? ` labelled ${hosts.label}` : "") + ", a run each";
}

function definition(job) {
  return fields([
    ["Schedule", [h("code", {}, job.every ? `every ${job.every}` : job.cron_expression), ` in ${job.timezone}`]],
    ...(job.schedules?.length ? [["More schedules", h("pre", { id: "schedules" }, schedulesText(job.schedules))]] : []),
    ["Kind", job.kind],
    ["Status", badge(job.status)],
    // The API shows secrets as "***" (write-only); the payload is shown as text, as received.
    ["Payload", h("pre", { class: "payload" }, JSON.stringify(job.payload, null, 2))],
    ["Timeout", `${job.timeout_s} s`],
    ["Retries", `${job.max_retries} (backoff ${job.retry_backoff_s} s, doubled per attempt)`],
    ["Concurrency", job.concurrency_policy],
    ["Queue", job.queue],
    ["Misfire", `${job.misfire_policy}, grace ${job.misfire_grace_s} s`],
    ["Jitter", `${job.jitter_s} s`],
    ...(job.parents?.length ? [["Parents", h("span", { id: "def-parents" }, parentsText(job))]] : []),
    ...(job.hosts ? [["Hosts", h("span", { id: "def-hosts" }, hostsText(job.hosts))]] : []),
    ["Spread", job.spread ? `${job.spread} (each tick moved by the offset its name picks)` : "none"],
    ["Created", utc(job.created_at)],
    ["Updated", utc(job.updated_at)],
  ]);
}

function fireList(preview) {
  return h("ol", { class: "fires" }, preview.fire_times.map((t) =>
    h("li", {}, h("time", { datetime: t.at }, utc(t.at)), " ", local(t.local) ? h("span", { class: "muted" }, ` (${local(t.local)})`) : null,
      t.dst ? h("span", { class: "dst", title: t.dst.detail }, ` ${t.dst.detail}`) : null)));
}

export async function jobPage(main, [id], alive) {
  const head = h("div", { class: "title" });
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Job actions" });
  const words = h("p", { class: "lead" });
  const def = h("section", { "aria-labelledby": "def-h" });
  const fires = h("section", { "aria-labelledby": "fires-h" });
  const chart = h("div", { id: "chart" });
  const runs = h("div", { id: "runs", "aria-live": "polite" });
  const ticks = h("div", { id: "ticks" });
  const health = healthSection(id);
  let job;
  let firstFire = 0; // the list of fire times is read again once its first one has passed

  async function act(label, call) {
    try {
      await call();
      flash(label);
      await refresh();
    } catch (error) {
      flash(error instanceof ApiError ? error.message : String(error));
    }
  }

  function renderActions() {
    const paused = job.status === "paused";
    replace(actions,
      h("button", { type: "button", id: "toggle", onclick: () => act(paused ? "Resumed" : "Paused",
        () => post(`/api/jobs/${id}/${paused ? "resume" : "pause"}`)) }, paused ? "Resume" : "Pause"),
      h("button", { type: "button", id: "trigger", onclick: () => act("Triggered: a run is queued",
        () => post(`/api/jobs/${id}/trigger`)) }, "Trigger now"),
      h("button", { type: "button", id: "run-with-inputs", onclick: () => openTrigger(job, refresh) }, "Run now…"),
      h("button", { type: "button", id: "backfill", onclick: () => openBackfill(job, refresh) }, "Backfill…"),
      h("a", { class: "button", href: `#/jobs/${id}/edit` }, "Edit"),
      h("button", { type: "button", id: "delete", class: "danger", onclick: async () => {
        if (!confirm(`Delete job "${job.name}" and all its runs? This cannot be undone.`)) return;
        try {
          await del(`/api/jobs/${id}`);
          flash("Deleted");
          location.hash = "#/jobs";
        } catch (error) {
          flash(error.message);
        }
      } }, "Delete"));
  }

  async function refresh() {
    const [fresh, list] = await Promise.all([get(`/api/jobs/${id}`), get(`/api/jobs/${id}/runs?limit=50`)]);
    if (!alive()) return;
    const changed = !job || job.updated_at !== fresh.updated_at;
    job = fresh;
    if (changed) {
      replace(head, h("h1", {}, job.name), badge(job.status));
      renderActions();
      replace(def, h("h2", { id: "def-h" }, "Definition"), definition(job), jobRuleFields(job));
    }
    if (changed || Date.now() >= firstFire) {
      try {
        const preview = await get(`/api/schedule/preview${query({
          cron_expression: job.cron_expression, timezone: job.timezone, count: 10, every: job.every, anchor: job.anchor,
          ...hashKey(`${job.cron_expression ?? ""}\n${schedulesText(job.schedules)}`, job.name),
          ...(job.schedules?.length ? { schedules: JSON.stringify(job.schedules) } : {}),
        })}`);
        replace(words, preview.description);
        firstFire = preview.fire_times.length ? new Date(preview.fire_times[0].at).getTime() : Infinity;
        replace(fires, h("h2", { id: "fires-h" }, job.status === "paused" ? "Next 10 fire times (once resumed)"
          : "Next 10 fire times"), fireList(preview));
      } catch (error) {
        showError(fires, error);
      }
    }
    replace(chart, runChart(list.items, [
      ["start delay", "delay", startDelay],
      ["duration", "duration", (r) => r.duration_ms],
    ]));
    replace(runs, runsTable(list.items));
    await health.refresh(job);
    try {
      const recent = await recentTicks(id);
      if (alive()) replace(ticks, ticksTable(recent));
    } catch (error) {
      showError(ticks, error);
    }
  }

  replace(main, head, words, actions,
    health.node, h("div", { class: "columns" }, def, fires),
    h("section", { "aria-labelledby": "runs-h" }, h("h2", { id: "runs-h" }, "Runs"), chart, runs),
    h("section", { "aria-labelledby": "ticks-h" }, h("h2", { id: "ticks-h" }, "Ticks"),
      h("p", { class: "muted" }, "Every tick of the last 10 minutes, newest first: its run, or why it has none."),
      ticks),
    jobHistory(id));
  await refresh();
  return refresh;
}
