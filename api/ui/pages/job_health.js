// A job's health as the leader judges it (GET /api/jobs/{id}/health): its verdict with the reason,
// the failures in a row and its newest success and failure; and the verdict badges of the jobs list.
import { get, query } from "../api.js";
import { badge, fields, h, replace, utc } from "../dom.js";

function when(at) {
  return at ? h("span", { title: utc(at) }, utc(at)) : h("span", { class: "muted" }, "never");
}

const EXPECTED = [
  ["start_within_s", "starts within"], ["finish_within_s", "finishes within"],
  ["not_faster_than_s", "takes at least"], ["success_every_s", "succeeds at least every"],
];

function expected(job) {
  const set = EXPECTED.filter(([name]) => job?.expectations?.[name] != null);
  if (!set.length) return h("span", { class: "muted" }, "nothing set (failures and missed ticks only)");
  return set.map(([name, words]) => `${words} ${job.expectations[name]} s`).join(", ");
}

// The job's own circuit breaker (docs/breaker.md); none: the cluster's setting.
function ownBreaker(job) {
  const own = job?.expectations?.breaker;
  if (!own) return h("span", { class: "muted" }, "the cluster's setting");
  const failures = own.failures == null ? "the cluster's failures in a row"
    : own.failures === 0 ? "never (off for this job)" : `${own.failures} failed runs in a row`;
  return `pauses after ${failures}` + (own.canary_every ? `; a canary every ${own.canary_every} ticks` : "");
}

export function healthFields(health, job) {
  return fields([
    ["Expected", h("span", { id: "expected" }, expected(job))],
    ["Circuit breaker", h("span", { id: "breaker-setting" }, ownBreaker(job))],
    ["Verdict", [h("span", { id: "verdict" }, badge(health.verdict)), " ", h("span", { id: "verdict-reason" }, health.reason ?? "")]],
    ["Failures in a row", String(health.consecutive_failures)],
    ["Last success", when(health.last_success_at)],
    ["Last failure", when(health.last_failure_at)],
    ...(health.missed_at ? [["Missed tick", when(health.missed_at)]] : []),
  ]);
}

// The job page's section: `node` goes in the page, `refresh()` with the page's refresh.
export function healthSection(id) {
  const body = h("div", { id: "health" });
  const node = h("section", { "aria-labelledby": "health-h" }, h("h2", { id: "health-h" }, "Health"), body);
  async function refresh(job) {
    try {
      replace(body, healthFields(await get(`/api/jobs/${id}/health`), job));
    } catch (error) {
      replace(body, h("p", { class: "muted" }, `Health unavailable: ${error.message ?? error}`));
    }
  }
  return { node, refresh };
}

// The verdicts of a page of jobs, by id (a job the leader has not judged has none: no badge).
export async function verdicts(jobs) {
  if (!jobs.length) return new Map();
  try {
    const body = await get(`/api/jobs/health${query({ ids: jobs.map((j) => j.id).join(",") })}`);
    return new Map(body.items.map((item) => [item.job_id, item]));
  } catch {
    return new Map(); // the badges are extra: the list shows without them
  }
}

export function verdictBadge(found, job) {
  const health = found.get(job.id);
  if (!health) return h("span", { class: "muted" }, "–");
  return h("span", { title: health.reason ?? "" }, badge(health.verdict));
}
