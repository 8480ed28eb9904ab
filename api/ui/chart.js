// A small SVG chart of start delay and duration per run, oldest on the left; no library.
import { h, ms, svg, utc } from "./dom.js";

const H = 200;
const PAD = { left: 56, right: 12, top: 12, bottom: 24 };

export function ticks(max) {
  if (max <= 0) return [0];
  const step = 10 ** Math.floor(Math.log10(max));
  const unit = max / step > 5 ? step * 2 : max / step > 2 ? step : step / 2;
  const out = [0];
  while (out[out.length - 1] < max) out.push(out.length * unit); // the last tick is at or above max
  return out;
}

/** runs: newest first, as the API lists them; series: [[label, cssClass, (run) => value|null]]. */
export function runChart(runs, series) {
  const points = runs.filter((r) => r.started_at).slice().reverse();
  // Drawn at the window's width (redrawn on every poll), so its text stays readable on a phone.
  const W = Math.round(Math.min(1100, Math.max(320, window.innerWidth - 48)));
  if (points.length < 2) return h("p", { class: "muted" }, "The chart appears once two runs have started.");
  const values = points.flatMap((r) => series.map(([, , value]) => value(r) ?? 0));
  const axis = ticks(Math.max(1, ...values));
  const top = axis[axis.length - 1] || 1;
  const x = (i) => PAD.left + (i * (W - PAD.left - PAD.right)) / (points.length - 1);
  const y = (v) => H - PAD.bottom - ((Math.max(0, v) / top) * (H - PAD.top - PAD.bottom));
  const grid = axis.map((v) =>
    svg("g", { class: "tick" },
      svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
      svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, ms(v))),
  );
  const lines = series.map(([label, css, value]) => {
    const path = points.map((r, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(value(r) ?? 0).toFixed(1)}`).join(" ");
    const dots = points.map((r, i) =>
      svg("circle", { cx: x(i), cy: y(value(r) ?? 0), r: 2.5 },
        svg("title", {}, `${label} ${ms(value(r))} — run ${r.id}, ${utc(r.scheduled_for)}`)));
    return svg("g", { class: `series ${css}` }, svg("path", { d: path }), dots);
  });
  const stamp = (iso) => (W < 600 ? utc(iso).slice(11) : utc(iso)); // a phone: the time of day only
  const first = svg("text", { x: PAD.left, y: H - 6, class: "axis" }, stamp(points[0].scheduled_for));
  const last = svg("text", { x: W - PAD.right, y: H - 6, "text-anchor": "end", class: "axis" },
    stamp(points[points.length - 1].scheduled_for));
  const legend = h("p", { class: "legend" },
    series.map(([label, css]) => h("span", { class: `key ${css}` }, label)));
  const summary = `${points.length} runs; ` + series.map(([label, , value]) =>
    `${label} up to ${ms(Math.max(...points.map((r) => value(r) ?? 0)))}`).join(", ");
  return h("figure", { class: "chart" },
    svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary }, grid, lines, first, last),
    h("figcaption", {}, legend));
}
