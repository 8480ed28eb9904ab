// The job form's expectations (docs/expectations.md): four optional numbers of seconds; none set
// sends `expectations: null`. A 422 naming `$.expectations.<field>` is shown under this group.
import { h } from "../dom.js";
import { parseNumber } from "../edits.js";

export const EXPECTATIONS = [
  ["start_within_s", "Start within (s)", "A run starts at most this long after its tick; later: late start."],
  ["finish_within_s", "Finish within (s)", "A run ends at most this long after it started; longer: overran."],
  ["not_faster_than_s", "Not faster than (s)", "A completed run took at least this long; sooner: too fast."],
  ["success_every_s", "Success every (s)", "At least one completed run this often; none: no success."],
];

// `field(name, label, control, hint)` is the form's own field builder.
export function expectationFields(job, field) {
  const loaded = job?.expectations ?? {};
  const controls = Object.fromEntries(EXPECTATIONS.map(([name]) => [name, h("input", {
    id: name, name, type: "number", min: 0, step: "any", value: loaded[name] ?? "", placeholder: "none",
  })]));
  const node = h("details", { id: "expectations", open: job?.expectations ? true : undefined },
    h("summary", {}, "Expectations"),
    h("p", { class: "hint muted small" }, "The leader tells of each run that breaks one (a job event) and shows ",
      "the job's verdict. Each run is judged by the expectations in force when it was planned."),
    h("div", { class: "form-grid" }, EXPECTATIONS.map(([name, label, hint]) => field(name, label, controls[name], hint))),
    h("p", { class: "problem", id: "expectations-problem", role: "alert" }));
  function value() {
    const out = {};
    for (const [name] of EXPECTATIONS) {
      const number = parseNumber(controls[name].value);
      if (number !== null) out[name] = number;
    }
    return Object.keys(out).length ? out : null;
  }
  return { node, first: controls.start_within_s, value };
}
