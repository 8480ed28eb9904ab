// The fleet: planned starts per minute of every active repeating job over the next hours, as bars,
// so a herd (hundreds of jobs at :00) stands out; the busiest minutes listed under the chart.
// GET /api/fleet/starts (docs/schedule-lint.md); jitter_s spreads a job's starts.
import { get, query } from "../api.js";
import { ticks } from "../chart.js";
import { fields, h, replace, svg, table, utc } from "../dom.js";

const H = 220;
const PAD = { left: 48, right: 12, top: 12, bottom: 24 };

function minuteOf(start, i) {
  return new Date(Date.parse(start) + i * 60_000).toISOString();
}

function barChart(data) {
  const W = Math.round(Math.min(1100, Math.max(320, window.innerWidth - 48)));
  const n = data.counts.length;
  const axis = ticks(Math.max(1, ...data.counts, data.herd_jobs));
  const top = axis[axis.length - 1] || 1;
  const width = (W - PAD.left - PAD.right) / n;
  const x = (i) => PAD.left + i * width;
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
  const grid = axis.map((v) => svg("g", { class: "tick" },
    svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
    svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, String(v))));
  const bars = [];
  data.counts.forEach((count, i) => {
    if (!count) return;
    const herd = count >= data.herd_jobs;
    bars.push(svg("rect", { x: x(i), y: y(count), width: Math.max(1, width), height: y(0) - y(count),
      class: herd ? "bar herd" : "bar" }, svg("title", {}, `${count} starts at ${utc(minuteOf(data.start, i))}`)));
  });
  const limit = svg("line", { class: "limit", x1: PAD.left, x2: W - PAD.right, y1: y(data.herd_jobs), y2: y(data.herd_jobs) });
  const stamp = (iso) => (W < 600 ? utc(iso).slice(11) : utc(iso));
  const first = svg("text", { x: PAD.left, y: H - 6 }, stamp(data.start));
  const last = svg("text", { x: W - PAD.right, y: H - 6, "text-anchor": "end" }, stamp(minuteOf(data.start, n)));
  const busiest = data.peaks[0];
  const label = `Planned starts per minute, ${n / 60} hours from ${utc(data.start)}; ` +
    (busiest ? `busiest ${busiest.starts} at ${utc(busiest.at)}` : "no starts");
  return h("figure", { class: "chart fleet", id: "fleet-chart" },
    svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label }, grid, bars, limit, first, last),
    h("figcaption", { class: "legend" }, h("span", { class: "key bar" }, "starts in a minute"),
      h("span", { class: "key herd" }, `${data.herd_jobs} or more: a herd (CRONOS_HERD_JOBS)`)));
}

export async function fleetPage(main, _params, alive) {
  let hours = 24;
  const choice = h("select", { id: "fleet-hours", "aria-label": "Hours ahead" },
    [1, 6, 24, 48].map((v) => h("option", { value: v, selected: v === hours }, `next ${v} h`)));
  choice.addEventListener("change", () => { hours = Number(choice.value); refresh(); });
  async function refresh() {
    const data = await get(`/api/fleet/starts${query({ hours })}`);
    if (!alive()) return;
    const herds = data.peaks.filter((p) => p.starts >= data.herd_jobs);
    replace(main,
      h("h1", {}, "Fleet"),
      h("p", { class: "muted" }, "When the active repeating jobs start, minute by minute. Many in one minute hit ",
        "the executors and their targets at once: give such jobs a ", h("code", {}, "jitter_s"),
        " (a delay drawn per tick, up to that many seconds), an ", h("code", {}, "H"),
        " in their cron expression (a minute each job keeps, picked by its name) or another minute."),
      h("div", { class: "actions" }, choice),
      fields([
        ["Active jobs", String(data.jobs)],
        ["Distinct schedules", String(data.schedules)],
        ["Busiest minute", data.peaks[0] ? `${data.peaks[0].starts} starts at ${utc(data.peaks[0].at)}` : "–"],
        ["Herds", h("strong", { id: "fleet-herds", class: herds.length ? "error" : "" },
          herds.length ? `${herds.length} of the busiest minutes reach ${data.herd_jobs}` : "none")],
        ["Spread by H", h("span", { id: "fleet-spread" }, data.spread_jobs
          ? `${data.spread_jobs} jobs; without it the busiest minute would have ${data.unspread_peak} starts`
          : "none")],
      ]),
      data.partial ? h("p", { class: "notice" }, "Partial: too many schedules to walk them all; the counts are low.") : null,
      barChart(data),
      table("Busiest minutes", [
        ["Minute (UTC)", (p) => utc(p.at)],
        ["Starts", (p) => String(p.starts)],
      ], data.peaks, "No job starts in this window."));
  }
  await refresh();
  return refresh;
}
