// What a run's work used (GET /api/runs/{id} `usage`, docs/run-usage.md): wall and CPU time, and a
// shell run's user and system parts and peak memory. Nothing until the run ended and was measured.
import { fields, h, ms } from "../dom.js";

function time(value) {
  if (value === null || value === undefined) return "–";
  return Math.abs(value) < 10 ? `${value.toFixed(1)} ms` : ms(value);
}

function bytes(value) {
  if (value >= 1024 ** 3) return `${(value / 1024 ** 3).toFixed(2)} GiB`;
  if (value >= 1024 ** 2) return `${(value / 1024 ** 2).toFixed(1)} MiB`;
  return `${Math.round(value / 1024)} KiB`;
}

export function usageSection(run) {
  const usage = run.usage;
  if (!usage) return null;
  const rows = [["Work (wall)", time(usage.wall_ms)]];
  if (usage.cpu_ms !== null) rows.push(["CPU", time(usage.cpu_ms)]);
  if (usage.cpu_user_ms !== null) rows.push(["CPU user", time(usage.cpu_user_ms)]);
  if (usage.cpu_sys_ms !== null) rows.push(["CPU system", time(usage.cpu_sys_ms)]);
  if (usage.max_rss_bytes !== null) rows.push(["Peak memory", bytes(usage.max_rss_bytes)]);
  return h("section", { "aria-labelledby": "usage-h", id: "usage" }, h("h2", { id: "usage-h" }, "Usage"), fields(rows));
}
