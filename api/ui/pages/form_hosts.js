// The job form's "Runs on every host" (docs/every-host.md): off sends `hosts: null` (one run per
// tick); on sends `{}` (every executor of its queue), with `count` and `label` when given. A 422
// naming `$.hosts` (or one of its fields) is shown under this group.
import { h } from "../dom.js";
import { parseNumber } from "../edits.js";

// `field(name, label, control, hint)` is the form's own field builder.
export function hostsFields(job, field) {
  const loaded = job?.hosts ?? null;
  const on = h("input", { id: "hosts", name: "hosts", type: "checkbox", checked: loaded !== null });
  const count = h("input", { id: "hosts_count", name: "hosts_count", type: "number", min: 1, step: 1,
    value: loaded?.count ?? "", placeholder: "all" });
  const label = h("input", { id: "hosts_label", name: "hosts_label", spellcheck: "false", autocomplete: "off",
    value: loaded?.label ?? "", placeholder: "e.g. rack=eu-1" });
  const node = h("details", { id: "hosts-box", open: loaded !== null ? true : undefined },
    h("summary", {}, "Runs on every host"),
    h("div", { class: "form-grid" },
      field("hosts", "Run on each executor of its queue", on,
        "A run per live executor each tick; needs overlap 'allow' and no retries."),
      field("hosts_count", "On at most (executors)", count, "The same ones tick after tick; empty: all."),
      field("hosts_label", "Only with label", label, "key=value from the executors' CRONOS_EXECUTOR_LABELS.")));
  function value() {
    if (!on.checked) return null;
    const out = {};
    const n = parseNumber(count.value);
    if (n !== null) out.count = n;
    if (label.value.trim()) out.label = label.value.trim();
    return out;
  }
  return { node, control: on, value };
}
