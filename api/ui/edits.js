// What a save sends: pure functions, no page. An edit sends only the fields whose value differs
// from the job as loaded, so a field the form shows differently (or not at all) is never written
// back by accident; a create sends them all. Every writable field of a job (api/schemas.py JobPatch)
// but managed_by, which only `cronos apply` sets (and every other write keeps).

/** How each field is compared: as text, a number, an instant (RFC 3339), a list of ids, or JSON. */
export const FIELDS = {
  name: "text",
  cron_expression: "text",
  run_at: "instant",
  timezone: "text",
  kind: "text",
  payload: "json",
  status: "text",
  timeout_s: "number",
  max_retries: "number",
  retry_backoff_s: "number",
  misfire_grace_s: "number",
  jitter_s: "number",
  concurrency_policy: "text",
  misfire_policy: "text",
  queue: "text",
  concurrency_group: "text", // null: none (the form's empty field)
  start_at: "instant",
  end_at: "instant",
  max_runs: "number",
  catchup_max_per_s: "number",
  parents: "ids",
  calendars: "json",
  expectations: "json",
  every: "text", // an interval (pages/interval.js)
  anchor: "instant",
  labels: "json",
  owner: "text",
  hosts: "json", // null: one run per tick (pages/form_hosts.js)
  chain: "json",
  schedules: "json", // more schedules (pages/form_schedules.js)
  spread: "text", // a spread window (docs/spread.md); null: none
};

/** Deep equality of JSON values; an object's key order does not matter. */
export function sameJson(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((v, i) => sameJson(v, b[i]));
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
}

/** The same instant however written (`…Z` or `…+00:00`, with or without fractions); text that is
 * no instant equals only itself, so the API judges it. */
function sameInstant(a, b) {
  if (a === null || b === null) return a === b;
  const [x, y] = [Date.parse(a), Date.parse(b)];
  return Number.isNaN(x) || Number.isNaN(y) ? a === b : x === y;
}

export function same(type, a, b) {
  const loaded = a === undefined ? null : a;
  const now = b === undefined ? null : b;
  if (type === "instant") return sameInstant(loaded, now);
  if (type === "json" || type === "ids") return sameJson(loaded, now);
  return loaded === now; // text and numbers: 300 and 300.0 are one JSON number
}

/** The fields of `values` (as the form reads them) that differ from `job` (as loaded). */
export function changedFields(job, values) {
  const body = {};
  for (const [name, value] of Object.entries(values)) {
    const type = FIELDS[name];
    if (type === undefined) throw new Error(`not a field of a job: ${name}`);
    if (!same(type, job[name], value)) body[name] = value;
  }
  return body;
}

/** "3, 7 12" -> [3, 7, 12]; undefined when a part is not a job id. */
export function parseIds(text) {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  const ids = parts.map((p) => (/^[1-9]\d*$/.test(p) ? Number(p) : NaN));
  return ids.every(Number.isSafeInteger) ? ids : undefined;
}

/** A number field: empty is null (an optional field unset), anything else the number it reads as. */
export function parseNumber(text) {
  const trimmed = text.trim();
  return trimmed === "" ? null : Number(trimmed);
}

/** "team=data, env=prod" -> {team: "data", env: "prod"}; undefined when a part is not KEY=VALUE
 * (the API checks the keys and values themselves, and names the label it refuses). */
export function parseLabels(text) {
  const labels = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at <= 0) return undefined;
    labels[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return labels;
}
