// The job form's chain (docs/chains.md): when the job runs after each parent (an edge: `12:failed,
// 40:ended`; a parent not named waits for `completed`) and whether it joins its parents per tick,
// with the join's timeout and what it does then. Nothing set sends `chain: null` (each successful
// parent run starts one run), unless the job as loaded held an empty chain: that is sent back as is,
// so an untouched form changes nothing. A 422 naming `$.chain.<field>` is shown under this group.
import { h } from "../dom.js";
import { parseNumber } from "../edits.js";

const ON = ["completed", "failed", "ended"];

/** "12:failed, 40:ended" -> {"12": "failed", "40": "ended"}; undefined when a part is not ID:ON. */
export function parseEdges(text) {
  const on = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const [id, when, ...rest] = part.split(":").map((p) => p.trim());
    if (rest.length || !/^[1-9]\d*$/.test(id) || !ON.includes(when)) return undefined;
    on[id] = when;
  }
  return on;
}

export function edgesText(on) {
  return Object.entries(on ?? {}).map(([id, when]) => `${id}:${when}`).join(", ");
}

// `field(name, label, control, hint)` is the form's own field builder.
export function chainFields(job, field) {
  const loaded = job?.chain ?? null;
  const joinLoaded = loaded?.join ?? null;
  const edges = h("input", { id: "chain_on", name: "chain_on", type: "text", value: edgesText(loaded?.on),
    placeholder: "e.g. 12:failed, 40:ended" });
  const join = h("input", { id: "chain_join", name: "chain_join", type: "checkbox", checked: joinLoaded ? true : undefined });
  const timeout = h("input", { id: "chain_timeout_s", name: "chain_timeout_s", type: "number", min: 0, step: "any",
    value: joinLoaded?.timeout_s ?? 3600 });
  const onTimeout = h("select", { id: "chain_on_timeout", name: "chain_on_timeout" },
    ["skip", "run"].map((v) => h("option", { value: v, selected: (joinLoaded?.on_timeout ?? "skip") === v ? true : undefined }, v)));
  const node = h("details", { id: "chain", open: loaded ? true : undefined },
    h("summary", {}, "After its parents"),
    h("div", { class: "form-grid" },
      field("chain_on", "Edges (parent:when)", edges,
        "When it runs after each parent: completed (the default), failed (its last attempt failed) or ended."),
      field("chain_join", "Join its parents", join, "Run once per tick, after every parent of that tick."),
      field("chain_timeout_s", "Join timeout (s)", timeout, "How long a join waits after its first parent ended."),
      field("chain_on_timeout", "At the timeout", onTimeout, "Run the job anyway, or skip it (with the reason).")),
    h("p", { class: "problem", id: "chain-problem", role: "alert" }));
  /** The chain as the API takes it; undefined (the field marked) when the edges cannot be read. */
  function value(problem) {
    const on = parseEdges(edges.value);
    if (on === undefined) {
      problem("chain", "edges are parent:when pairs (when: completed, failed or ended), separated by commas");
      node.open = true;
      edges.focus();
      return undefined;
    }
    const chain = {};
    if (Object.keys(on).length) chain.on = on;
    if (join.checked) chain.join = { timeout_s: parseNumber(timeout.value), on_timeout: onTimeout.value };
    if (Object.keys(chain).length) return chain;
    return loaded && !Object.keys(loaded.on ?? {}).length && !loaded.join ? loaded : null;
  }
  return { node, first: edges, value };
}
