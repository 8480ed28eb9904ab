// The job form's expectations (docs/expectations.md): four optional numbers of seconds, and the
// job's own circuit breaker (docs/breaker.md: two optional counts); none set sends
// `expectations: null`. What the form reads as the job as loaded (an empty breaker, `{}`, the
// same as null to the form) is sent back as loaded, so an untouched form changes nothing. A 422
// naming `$.expectations.<field>` is shown under this group.
import { h } from "../dom.js";
import { parseNumber, sameJson } from "../edits.js";

export const EXPECTATIONS = [
  ["start_within_s", "Start within (s)", "A run starts at most this long after its tick; later: late start."],
  ["finish_within_s", "Finish within (s)", "A run ends at most this long after it started; longer: overran."],
  ["not_faster_than_s", "Not faster than (s)", "A completed run took at least this long; sooner: too fast."],
  ["success_every_s", "Success every (s)", "At least one completed run this often; none: no success."],
];
// expectations.breaker's fields, each control's id prefixed (`breaker_failures`).
export const BREAKER = [
  ["failures", "Breaker: failures in a row",
    "Pause the job after this many failed runs in a row (0: never; empty: the cluster's setting)."],
  ["canary_every", "Canary every (ticks)",
    "While the breaker holds it paused, one run every this many ticks; it resumes when one succeeds."],
];

/** Expectations as the form holds them: only the numbers set, an empty breaker or none at all null. */
export function shownExpectations(expectations) {
  const pick = (from, names) => Object.fromEntries(names.filter(([n]) => (from?.[n] ?? null) !== null)
    .map(([n]) => [n, from[n]]));
  const out = pick(expectations, EXPECTATIONS);
  const own = pick(expectations?.breaker, BREAKER);
  if (Object.keys(own).length) out.breaker = own;
  return Object.keys(out).length ? out : null;
}

// `field(name, label, control, hint)` is the form's own field builder.
export function expectationFields(job, field) {
  const loaded = job?.expectations ?? {};
  const controls = Object.fromEntries(EXPECTATIONS.map(([name]) => [name, h("input", {
    id: name, name, type: "number", min: 0, step: "any", value: loaded[name] ?? "", placeholder: "none",
  })]));
  const breaker = Object.fromEntries(BREAKER.map(([name]) => [name, h("input", {
    id: `breaker_${name}`, name: `breaker_${name}`, type: "number", min: 0, step: 1,
    // Unset: the default that applies (GET's `breaker`: its queue's, else the cluster's).
    value: loaded.breaker?.[name] ?? "", placeholder: job?.breaker ? `default: ${job.breaker[name] ?? 0}`
      : name === "failures" ? "cluster's" : "none",
  })]));
  const node = h("details", { id: "expectations", open: job?.expectations ? true : undefined },
    h("summary", {}, "Expectations"),
    h("p", { class: "hint muted small" }, "The leader tells of each run that breaks one (a job event) and shows ",
      "the job's verdict. Each run is judged by the expectations in force when it was planned."),
    h("div", { class: "form-grid" }, EXPECTATIONS.map(([name, label, hint]) => field(name, label, controls[name], hint))),
    h("div", { class: "form-grid", id: "breaker" },
      BREAKER.map(([name, label, hint]) => field(`breaker_${name}`, label, breaker[name], hint))),
    h("p", { class: "problem", id: "expectations-problem", role: "alert" }));
  function value() {
    const read = (names, from) => Object.fromEntries(names.map(([n]) => [n, parseNumber(from[n].value)]));
    const shown = shownExpectations({ ...read(EXPECTATIONS, controls), breaker: read(BREAKER, breaker) });
    const loadedOrNull = job?.expectations ?? null;
    return sameJson(shown, shownExpectations(loadedOrNull)) ? loadedOrNull : shown;
  }
  return { node, first: controls.start_within_s, value };
}
